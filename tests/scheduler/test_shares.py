"""What each queue holds, borrows and lends now, read off the scheduler's quota tree; every
expected number is worked out by hand in the case (GPUs; the tree counts milli-GPU)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpupool.scheduler.quota import QuotaTree
from gpupool.scheduler.shares import QueueShare, queue_shares
from gpupool.scheduler.types import MILLI, QueueInfo, QuotaInfo


def q(
    name: str,
    parent: str | None = "root",
    quota: tuple[float, float, float] | None = None,
    lending_limit: float | None = None,
) -> QueueInfo:
    """A queue with an h100 quota (guarantee, deserved, capability) in GPUs."""
    quotas = {} if quota is None else {"h100": QuotaInfo(*(round(x * MILLI) for x in quota))}
    limit = None if lending_limit is None else round(lending_limit * MILLI)
    return QueueInfo(name, parent, quota=quotas, lending_limit=limit)


@dataclass(frozen=True)
class Case:
    """A tree, its pool of h100 GPUs, what each leaf uses, and the shares wanted (GPUs)."""

    name: str
    queues: tuple[QueueInfo, ...]
    pool: float
    used: dict[str, float]
    want: dict[str, tuple[float, float, float]]  # queue -> allocated, borrowed, lent


def shares_of(case: Case) -> dict[str, tuple[float, float, float]]:
    tree = QuotaTree(case.queues, {"h100": round(case.pool * MILLI)})
    for leaf, gpus in case.used.items():
        tree.add(leaf, "h100", round(gpus * MILLI))
    found = queue_shares(tree)
    return {
        name: (s.allocated / MILLI, s.borrowed / MILLI, s.lent / MILLI)
        for name, by_flavor in found.items()
        for s in [by_flavor.get("h100", QueueShare(0, 0, 0))]
    }


TWO_TEAMS = (q("root", None), q("a", quota=(0, 8, 16)), q("b", quota=(0, 8, 16)))

CASES = [
    Case(
        "a borrower's excess is the idle team's lending",
        TWO_TEAMS,
        pool=16,
        used={"b": 12},
        # b uses 4 above its 8; the pool has no unassigned GPUs, so they are a's.
        want={"root": (12, 0, 0), "a": (0, 0, 4), "b": (12, 4, 0)},
    ),
    Case(
        "unassigned capacity is borrowed before anyone's deserved share",
        TWO_TEAMS,
        pool=20,
        used={"b": 14},
        # 16 deserved of 20: b's 6 above deserved take the 4 nobody deserves, then 2 of a's.
        want={"root": (14, 0, 0), "a": (0, 0, 2), "b": (14, 6, 0)},
    ),
    Case(
        "nobody lends while everyone stays within their share",
        TWO_TEAMS,
        pool=16,
        used={"a": 5, "b": 8},
        want={"root": (13, 0, 0), "a": (5, 0, 0), "b": (8, 0, 0)},
    ),
    Case(
        "a guarantee and a lending limit keep part of the idle share from being lent",
        (
            q("root", None),
            q("a", quota=(2, 6, 16)),
            q("b", quota=(0, 6, 16), lending_limit=1),
            q("c", quota=(0, 4, 16)),
        ),
        pool=16,
        used={"c": 9},
        # c borrows 5: a may lend 6 - 2 = 4, b only 1 (its limit); 4 + 1 = 5 exactly.
        want={"root": (9, 0, 0), "a": (0, 0, 4), "b": (0, 0, 1), "c": (9, 5, 0)},
    ),
    Case(
        "lending is split in proportion to what each may lend",
        (
            q("root", None),
            q("a", quota=(0, 6, 16)),
            q("b", quota=(0, 3, 16)),
            q("c", quota=(0, 3, 16)),
        ),
        pool=12,
        used={"c": 6},
        # c borrows 3 from a (6 lendable) and b (3 lendable): 2 and 1.
        want={"root": (6, 0, 0), "a": (0, 0, 2), "b": (0, 0, 1), "c": (6, 3, 0)},
    ),
    Case(
        "teams lend inside their org, and the org lends to the other org",
        (
            q("root", None),
            q("org1", quota=(0, 10, 20)),
            q("org2", quota=(0, 10, 20)),
            q("a", "org1", quota=(0, 5, 20)),
            q("b", "org1", quota=(0, 5, 20)),
            q("c", "org2", quota=(0, 10, 20)),
        ),
        pool=20,
        used={"a": 8, "b": 4, "c": 8},
        # Inside org1 (share 10): a takes 3 above its 5; b's idle 1 is used, the other 2 come
        # from org1 borrowing 2 of org2's idle 2 (c uses 8 of its org's 10). Those 2 are c's
        # idle deserved share, so c lends them (test_shares_reconcile: the lending reaches
        # the leaves whose share it is).
        want={
            "root": (20, 0, 0),
            "org1": (12, 2, 0),
            "org2": (8, 0, 2),
            "a": (8, 3, 0),
            "b": (4, 0, 1),
            "c": (8, 0, 2),
        },
    ),
    Case(
        "an org without a quota of its own lets its teams lend across the pool",
        (
            q("root", None),
            q("org", "root"),
            q("a", "org", quota=(0, 4, 16)),
            q("b", quota=(0, 4, 16)),
        ),
        pool=8,
        used={"b": 7},
        want={"root": (7, 0, 0), "org": (0, 0, 0), "a": (0, 0, 3), "b": (7, 3, 0)},
    ),
    Case(
        "with GPUs failed below the deserved total, the lending is what others really use",
        TWO_TEAMS,
        pool=12,
        used={"b": 12},
        want={"root": (12, 0, 0), "a": (0, 0, 4), "b": (12, 4, 0)},
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_queue_shares(case: Case) -> None:
    assert shares_of(case) == case.want


@given(
    teams=st.lists(
        st.tuples(st.integers(0, 8), st.integers(0, 16), st.integers(0, 4)), min_size=1, max_size=5
    ),
    extra=st.integers(0, 8),
)
def test_a_cohort_lends_no_more_than_its_members_borrow_nor_than_each_has_idle(
    teams: list[tuple[int, int, int]], extra: int
) -> None:
    queues = [q("root", None)] + [
        q(f"t{i}", quota=(min(g, d), d, 32)) for i, (d, _, g) in enumerate(teams)
    ]
    pool = sum(d for d, _, _ in teams) + extra
    tree = QuotaTree(tuple(queues), {"h100": pool * MILLI})
    room = pool
    for i, (_, wanted, _) in enumerate(teams):
        used = min(wanted, room)
        room -= used
        tree.add(f"t{i}", "h100", used * MILLI)
    found = queue_shares(tree)
    teams_found = [found[f"t{i}"]["h100"] for i in range(len(teams))]
    assert sum(s.lent for s in teams_found) <= sum(s.borrowed for s in teams_found)
    for (deserved, _, _), share in zip(teams, teams_found, strict=True):
        assert 0 <= share.lent <= max(0, deserved * MILLI - share.allocated)
        assert share.borrowed == max(0, share.allocated - deserved * MILLI)


def test_a_queue_without_quota_or_usage_of_a_flavor_has_no_row_for_it() -> None:
    tree = QuotaTree((q("root", None), q("a", quota=(0, 4, 8)), q("idle")), {"h100": 8000})
    found = queue_shares(tree)
    assert found["idle"] == {} and found["root"] == {}
    assert found["a"] == {"h100": QueueShare(0, 0, 0)}
