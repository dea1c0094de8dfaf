"""An eviction frees only what can be used (issue 13, item 1).

A victim on an unhealthy GPU, or on a cordoned or NotReady node, gives back nothing that can
be allocated: no preemption or reclaim evicts it unless the preemptor then fits on healthy,
schedulable GPUs. (kube-scheduler's preemption only counts a victim's resources on a node
that passes the preemptor's filters -- a cordoned node fails them; the same holds here for
the GPUs a failed device takes away.)
"""

from __future__ import annotations

import pytest
from scheduler_builders import Case, node, queue, run_case, workload

FULL = list(range(8))
HIGH_BUDGET = [{"tenant": "team-a", "priority_class": "high", "gpu_hours": 100, "used": 0}]

CASES = [
    Case(
        "does not evict a victim whose GPUs failed under it for a preemptor that needs them",
        # n1's GPUs 0-3 failed under old; only 4 healthy GPUs come back when it leaves.
        [node("n1", unhealthy=(0, 1, 2, 3)), node("n2")],
        [queue("team-a", deserved=16)],
        [
            workload("old", on=[("n1", FULL)]),
            workload("kept", on=[("n2", FULL)], started="09:30", protected_s=7200),
            workload("urgent", priority="high"),
        ],
        budgets=HIGH_BUDGET,
        want_not_admitted={"urgent"},
    ),
    Case(
        "does not evict a victim on a cordoned node for a preemptor that cannot go there",
        [node("n1", cordoned=True), node("n2")],
        [queue("team-a", deserved=16)],
        [
            workload("old", on=[("n1", FULL)]),
            workload("kept", on=[("n2", FULL)], started="09:30", protected_s=7200),
            workload("urgent", priority="high"),
        ],
        budgets=HIGH_BUDGET,
        want_not_admitted={"urgent"},
    ),
    Case(
        "still evicts a victim on a partly failed node when its healthy GPUs are enough",
        [node("n1", unhealthy=(0, 1, 2, 3)), node("n2")],
        [queue("team-a", deserved=16)],
        [
            workload("old", on=[("n1", FULL)]),
            workload("kept", on=[("n2", FULL)], started="09:30", protected_s=7200),
            workload("urgent", gpus=4, priority="high"),
        ],
        budgets=HIGH_BUDGET,
        want_evicted={"old": "preempt"},
        want_reasons={"urgent": "waiting-for-preemption"},
    ),
    Case(
        "does not reclaim from a borrower on a cordoned node",
        [node("n1", cordoned=True), node("n2"), node("n3")],
        [queue("first", deserved=8, capability=24), queue("second", deserved=8, capability=16)],
        [
            workload("f1", "first", on=[("n2", FULL)], started="09:30", protected_s=7200),
            workload("f2", "first", on=[("n3", FULL)], started="09:00", protected_s=7200),
            workload("f3", "first", on=[("n1", FULL)], started="09:00"),
            workload("s1", "second"),
        ],
        want_not_admitted={"s1"},
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_an_eviction_frees_only_what_can_be_used(case: Case) -> None:
    """The plan evicts only where the preemptor then fits on healthy, schedulable GPUs."""
    run_case(case)
