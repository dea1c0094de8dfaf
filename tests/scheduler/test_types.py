"""The core's value types whose initialisers are written out (so that, compiled, they set
their fields natively) take the same parameters, in the same order, with the same defaults
as the dataclass would generate from their fields; the rest the dataclass still provides."""

from __future__ import annotations

import dataclasses

import pytest

from gpupool.scheduler.types import (
    Admission,
    Eviction,
    NodeInfo,
    PendingExplanation,
    PodPlacement,
    PodRef,
    PodSetInfo,
    WorkloadInfo,
)

POD_SETS = (PodSetInfo(count=1, gpus=8, flavors=("h100",)),)


def _defaults(cls: type) -> dict[str, object]:
    """Each optional field's default (a default factory's value for one that has one)."""
    return {
        f.name: f.default if f.default_factory is dataclasses.MISSING else f.default_factory()
        for f in dataclasses.fields(cls)
        if f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
    }


# Every field's value, of its type (the compiled initialiser checks), told apart by field:
# a value given to the wrong field shows.
EVERY_FIELD = {
    WorkloadInfo: (
        "team/b", "team-b", "high", POD_SETS, 3.5, "running", 2, "domain", 60.0, 7200.0, 4.0,
        5.0, (PodPlacement("n1", (0,)),), 1, True, "team/c", "team/d", 6.0, False, True,
        8.0,
    ),
    PodPlacement: ("n2", (3,), 500),
    NodeInfo: (
        "n3",
        "h100",
        8,
        96_000,
        1_048_576,
        "nvl-1",
        frozenset({2}),
        True,
        9,
        frozenset({5}),
    ),
    PodRef: (1, 2),
    Admission: ("team/e", (PodPlacement("n4", (1,)),), (PodRef(0, 0),), "team/f", 1.5),
    Eviction: ("team/g", "preempt", "team/h"),
    PendingExplanation: ("team/i", "quota", "Waits for quota.", 3, {"asked": 8}),
}  # fmt: skip


@pytest.mark.parametrize(
    ("cls", "required"),
    [
        (WorkloadInfo, ("team/a", "team-a", "normal", POD_SETS, 12.5)),
        (PodPlacement, ("n1", (0, 1))),
        (NodeInfo, ("n1", "a100", 4, 32_000, 262_144, "rack-1")),
        (PodRef, (0, 1)),
        (Admission, ("team/a", (PodPlacement("n1", (0,)),), (PodRef(0, 0),))),
        (Eviction, ("team/a", "idle", None)),
        (PendingExplanation, ("team/a", "capacity", "Waits for capacity.", 1)),
    ],
    ids=[
        "WorkloadInfo",
        "PodPlacement",
        "NodeInfo",
        "PodRef",
        "Admission",
        "Eviction",
        "PendingExplanation",
    ],
)
def test_the_written_initialisers_match_the_fields(cls: type, required: tuple[object, ...]) -> None:
    fields = dataclasses.fields(cls)
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
    changed = dataclasses.replace(built, **{names[0]: values[0]})
    assert getattr(changed, names[0]) == values[0] and changed != built
    if cls is not PendingExplanation:  # (its facts are a dict: it has no hash)
        assert hash(cls(*required)) == hash(built)
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(built, names[0], "other")
    with pytest.raises(TypeError):
        cls(*values, "one too many")


def test_an_explanation_left_without_facts_gets_an_empty_dict_of_its_own() -> None:
    # As the field's default factory: never one dict shared by every explanation.
    first = PendingExplanation("team/a", "capacity", "Waits.", 1)
    second = PendingExplanation("team/b", "capacity", "Waits.", 2)
    assert first.facts == {} and isinstance(first.facts, dict)
    assert first.facts is not second.facts
