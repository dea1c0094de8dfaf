"""Lenders get their share back (issue 13, item 5; DESIGN section 3, allocate and reclaim).

A queue's deserved share is lent while idle and taken back when it wants it: work within its
deserved share goes before work that borrows (nearest first up the tree), so nothing is
admitted only to be reclaimed in the next cycle; "below its deserved share" is judged along
the path; a lender takes back what it lent before it evicts its own work, or both in one set;
the last victim may take its queue below its deserved share; fair-share reclaim compares the
final shares with "at most"; reclaim victims come from the queue furthest above its deserved
share, recomputed after each pick.
"""

from __future__ import annotations

from typing import Any

import pytest
from scheduler_builders import Case, check_invariants, pool, queue, run_case, workload

from gpupool.scheduler import plan
from gpupool.scheduler.lifecycle import apply_plan
from gpupool.scheduler.scenario import Scenario

FULL = list(range(8))
HALF_A = [0, 1, 2, 3]
HALF_B = [4, 5, 6, 7]
HIGH = [{"tenant": "team-a", "priority_class": "high", "gpu_hours": 100, "used": 0}]


def org(name: str, deserved: float, capability: float | None = None) -> dict[str, Any]:
    """An inner queue under the root with an h100 quota."""
    return queue(name, deserved=deserved, capability=capability)


WITHIN_FIRST = Case(
    "work within its queue's deserved share goes before work that must borrow",
    # Kueue orders the heads it admits by how far up the cohort tree they would borrow
    # (FindHeightOfLowestSubtreeThatFits): not borrowing first.
    pool(2),
    [queue("team-a", deserved=4, capability=16), queue("team-b", deserved=12, capability=16)],
    [
        workload("b-run", "team-b", gpus=6, on=[("n2", [0, 1, 2, 3, 4, 5])]),
        workload("a1", "team-a", submitted="07:00"),
        workload("b1", "team-b", gpus=6, submitted="09:00"),
    ],
    want_admitted={"b1"},
    want_not_admitted={"a1"},
)

ALLOCATE = [
    WITHIN_FIRST,
    Case(
        "within the queue's share first, then within its org's, then across orgs",
        pool(3),
        [
            org("org-a", 8, 24),
            org("org-b", 16, 24),
            queue("a1", deserved=4, capability=24, parent="org-a"),
            queue("a2", deserved=4, capability=24, parent="org-a"),
            queue("b1", deserved=16, capability=24, parent="org-b"),
        ],
        [
            workload("b1-run", "b1", on=[("n3", FULL)]),
            workload("a1-run", "a1", gpus=4, on=[("n1", HALF_A)]),
            # a1 borrows a2's idle share (within org-a's) before a1's second job, which
            # would make org-a borrow org-b's
            workload("a1-sister", "a1", gpus=4, submitted="09:00"),
            workload("b1-own", "b1", submitted="09:30"),
            workload("a1-cross", "a1", submitted="08:00"),
        ],
        want_admitted={"a1-sister", "b1-own"},
        want_not_admitted={"a1-cross"},
    ),
]

RECLAIM = [
    Case(
        "a queue's own share never passes an ancestor's capability: it is reclaimed instead",
        # DESIGN section 2: capability is a hard cap, even when the pool is idle
        pool(3),
        [
            org("org", 8, 8),
            queue("t1", deserved=4, capability=8, parent="org"),
            queue("t2", deserved=4, capability=8, parent="org"),
        ],
        [
            workload("t2-own", "t2", gpus=4, on=[("n1", HALF_A)], started="07:00"),
            workload("t2-lent", "t2", gpus=4, on=[("n1", HALF_B)], started="09:00"),
            workload("t1-job", "t1", gpus=4),
        ],
        want_evicted={"t2-lent": "reclaim"},
        want_reasons={"t1-job": "waiting-for-preemption"},
    ),
    Case(
        "a leaf with no deserved share of its own reclaims when its parent is below its share",
        # Kueue's hierarchical cohorts: a ClusterQueue whose request fits in an ancestor's
        # nominal quota gains the right to reclaim from subtrees above theirs.
        pool(2),
        [
            org("org-a", 8, 16),
            org("org-b", 8, 16),
            queue("a1", deserved=0, capability=8, parent="org-a"),
            queue("b1", deserved=8, capability=16, parent="org-b", weight=4),
        ],
        [
            workload("b1-own", "b1", on=[("n1", FULL)], started="07:00"),
            workload("b1-lent", "b1", on=[("n2", FULL)], started="09:00"),
            workload("a1-job", "a1"),
        ],
        want_evicted={"b1-lent": "reclaim"},
        want_reasons={"a1-job": "waiting-for-preemption"},
    ),
    Case(
        "a lender takes back what it lent before it evicts its own lower-priority work",
        # Kueue puts other ClusterQueues' candidates before its own in one candidate list.
        pool(2),
        [queue("team-a", deserved=8, capability=8), queue("team-b", deserved=8, capability=16)],
        [
            workload("a-low", priority="low", gpus=4, on=[("n1", HALF_A)]),
            workload("b-lent", "team-b", gpus=4, on=[("n1", HALF_B)], started="09:00"),
            workload("b-own", "team-b", on=[("n2", FULL)], started="07:00"),
            workload("urgent", gpus=4, priority="high"),
        ],
        budgets=HIGH,
        want_evicted={"b-lent": "reclaim"},
    ),
    Case(
        "one victim set may combine the lender's own work and what it lent",
        # Kueue searches its own queue's lower-priority work and the cohort's borrowers in
        # one pass, each candidate under its own rule.
        pool(2),
        [queue("team-a", deserved=8, capability=8), queue("team-b", deserved=8, capability=16)],
        [
            workload("a-low", priority="low", gpus=4, on=[("n1", HALF_A)]),
            workload("b-lent", "team-b", gpus=4, on=[("n1", HALF_B)], started="09:00"),
            workload("b-own", "team-b", on=[("n2", FULL)], started="09:30", protected_s=7200),
            workload("urgent", priority="high"),
        ],
        budgets=HIGH,
        want_evicted={"a-low": "preempt", "b-lent": "reclaim"},
    ),
    Case(
        "the last victim may take its queue below its deserved share",
        # KAI: "queue0 is over deserved quota and will go below quota - reclaim"; Kueue and
        # Volcano also only ask the victim's queue to be above its share before the eviction.
        pool(2),
        [queue("first", deserved=8, capability=16), queue("second", deserved=8, capability=16)],
        [
            workload("f-gang", "first", count=2, on=[("n1", FULL), ("n2", FULL)]),
            workload("s1", "second"),
        ],
        want_evicted={"f-gang": "reclaim"},
    ),
    Case(
        "victims come from the queue furthest above its deserved share, recomputed each pick",
        # Kueue's fair-sharing preemption takes its next target from the ClusterQueue with
        # the highest dominant resource share, recomputed after each one.
        pool(4),
        [
            queue("first", deserved=4, capability=32),
            queue("second", deserved=16, capability=32),
            queue("third", deserved=4, capability=32),
        ],
        [
            workload("f1", "first", gpus=4, on=[("n1", HALF_A)], started="06:00"),
            workload("f2", "first", gpus=4, on=[("n1", HALF_B)], started="07:00"),
            workload("f3", "first", gpus=4, on=[("n2", HALF_A)], started="08:00"),
            workload("f4", "first", gpus=4, on=[("n2", HALF_B)], started="09:00"),
            workload("t1", "third", gpus=4, on=[("n3", HALF_A)], started="09:10"),
            workload("t2", "third", gpus=4, on=[("n3", HALF_B)], started="09:20"),
            workload("s-run", "second", on=[("n4", FULL)], started="06:00"),
            workload("s1", "second", gpus=4, count=2),
        ],
        want_evicted={"f3": "reclaim", "f4": "reclaim"},
    ),
]

FAIR_QUEUES = [
    queue("first", deserved=8, capability=32),
    queue("second", deserved=4, capability=16),
]
FAIR_RUNNING = [
    workload("f1", "first", on=[("n1", FULL)], started="07:00"),
    workload("f2", "first", on=[("n2", FULL)], started="08:00"),
    workload("f3", "first", on=[("n3", FULL)], started="09:00"),
    workload("s-run", "second", on=[("n4", FULL)], started="08:00"),
]
THREE_TO_ONE = Case(
    "fair-share reclaim may leave the shares equal: 3:1 becomes 2:2",
    # Kueue's LessThanOrEqualToFinalShare: the reclaimer's share after the admission is at
    # most the victim queue's after the eviction.
    pool(4),
    FAIR_QUEUES,
    [*FAIR_RUNNING, workload("s2", "second")],
    want_evicted={"f3": "reclaim"},
)

FAIR = [
    THREE_TO_ONE,
    Case(
        "fair-share reclaim never leaves the victim's queue below the reclaimer's share",
        pool(4),
        FAIR_QUEUES,
        [*FAIR_RUNNING, workload("s2", "second", count=2)],
        want_not_admitted={"s2"},
    ),
]

CASES = ALLOCATE + RECLAIM + FAIR


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_a_lender_gets_its_share_back(case: Case) -> None:
    """The plan follows the lending rule its case names."""
    run_case(case)


def _next_cycle(case: Case, minutes: float = 10) -> Scenario:
    """The case's snapshot after its plan is applied, ``minutes`` later."""
    loaded = case.load()
    result = plan(loaded.snapshot, loaded.policy, loaded.now)
    snapshot = apply_plan(loaded.snapshot, result, loaded.now)
    return Scenario(snapshot, loaded.policy, loaded.now + minutes * 60)


def test_nothing_admitted_to_borrow_is_reclaimed_in_the_next_cycle() -> None:
    """The lender's waiting work ran first, so the next cycle kills no running job."""
    later = _next_cycle(WITHIN_FIRST)
    result = plan(later.snapshot, later.policy, later.now)
    check_invariants(later, result)
    assert result.evict == ()


def test_two_queues_do_not_trade_the_same_gpus_back_and_forth() -> None:
    """Once 3:1 has become 2:2, the queue that gave cannot take a node back: its share after
    the admission would be above the other's after the eviction."""
    equal = Case(
        "2:2 after a fair-share reclaim",
        pool(4),
        FAIR_QUEUES,
        [
            workload("f1", "first", on=[("n1", FULL)], started="07:00"),
            workload("f2", "first", on=[("n2", FULL)], started="08:00"),
            workload("s-run", "second", on=[("n4", FULL)], started="08:00"),
            workload("s2", "second", on=[("n3", FULL)], started="10:00"),
            workload("f3", "first", submitted="09:00"),
        ],
        now="10:10",
        want_not_admitted={"f3"},
    )
    run_case(equal)
