"""The core's value types whose initialisers are written out (so that, compiled, they set
their fields natively) take the same parameters, in the same order, with the same defaults
as the dataclass would generate from their fields; the rest the dataclass still provides."""

from __future__ import annotations

import dataclasses

import pytest

from gpupool.scheduler.types import PodPlacement, PodSetInfo, WorkloadInfo

POD_SETS = (PodSetInfo(count=1, gpus=8, flavors=("h100",)),)


def _defaults(cls: type) -> dict[str, object]:
    return {
        f.name: f.default
        for f in dataclasses.fields(cls)
        if f.default is not dataclasses.MISSING  # (none of these has a default factory)
    }


# Every field's value, of its type (the compiled initialiser checks), told apart by field:
# a value given to the wrong field shows.
EVERY_FIELD = {
    WorkloadInfo: (
        "team/b", "team-b", "high", POD_SETS, 3.5, "running", 2, "domain", 60.0, 7200.0, 4.0,
        5.0, (PodPlacement("n1", (0,)),), 1, True, "team/c", "team/d", 6.0, False,
    ),
    PodPlacement: ("n2", (3,), 500),
}  # fmt: skip


@pytest.mark.parametrize(
    ("cls", "required"),
    [
        (WorkloadInfo, ("team/a", "team-a", "normal", POD_SETS, 12.5)),
        (PodPlacement, ("n1", (0, 1))),
    ],
    ids=["WorkloadInfo", "PodPlacement"],
)
def test_the_written_initialisers_match_the_fields(cls: type, required: tuple[object, ...]) -> None:
    fields = dataclasses.fields(cls)
    assert all(f.default_factory is dataclasses.MISSING for f in fields)
    # Only the required fields given: every other field takes its declared default.
    built = cls(*required)
    names = [f.name for f in fields]
    assert [getattr(built, name) for name in names[: len(required)]] == list(required)
    assert {name: getattr(built, name) for name in _defaults(cls)} == _defaults(cls)
    assert len(required) + len(_defaults(cls)) == len(fields)
    # Every field by position, and by name, lands in the field of that name.
    values = list(EVERY_FIELD[cls])
    by_position = cls(*values)
    by_name = cls(**dict(zip(names, values, strict=True)))
    assert [getattr(by_position, n) for n in names] == values
    assert by_name == by_position
    # What the dataclass still generates: replace, equality, hashing, frozen fields (pickling
    # the compiled core's values: tests/control/test_cached_core_values_pickle.py).
    changed = dataclasses.replace(built, **{names[0]: "other"})
    assert getattr(changed, names[0]) == "other" and changed != built
    assert hash(cls(*required)) == hash(built)
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(built, names[0], "other")
    with pytest.raises(TypeError):
        cls(*values, "one too many")
