"""Gangs with a minimum (issue 13, item 4).

A gang whose ``min_member`` is below its pod count is elastic: it runs with as many pods as
fit, never fewer than its minimum. That holds inside one NVLink domain too, and preemption
and reclaim look for room for the minimum, as allocate does. A starving gang that only a
``domain`` requirement keeps out gets its capacity held inside one domain.
"""

from __future__ import annotations

import pytest
from scheduler_builders import Case, pool, queue, run_case, workload

from gpupool.scheduler import plan

FULL = list(range(8))
HALF_A = [0, 1, 2, 3]
HIGH_BUDGET = [{"tenant": "team-a", "priority_class": "high", "gpu_hours": 100, "used": 0}]

CASES = [
    Case(
        "places a domain gang when its minimum fits inside one domain",
        pool(4, gpus=4, domain_size=2),  # n1, n2 in d1; n3, n4 in d2
        [queue("team-a", deserved=16)],
        [
            workload("busy", gpus=4, on=[("n1", HALF_A)]),
            workload("w1", gpus=4, count=3, min_member=2, topology="domain"),
        ],
        want_admitted={"w1"},
    ),
    Case(
        "preempts for a gang's minimum when its quota holds only the minimum",
        # Kueue and KAI both search for room for the part of an elastic job that must run
        # (KAI's elastic reclaim takes one task's room for a job of three with minimum one).
        pool(1),
        [queue("team-a", deserved=8)],
        [
            workload("old", on=[("n1", FULL)]),
            workload("urgent", count=2, min_member=1, priority="high"),
        ],
        budgets=HIGH_BUDGET,
        want_evicted={"old": "preempt"},
        want_reasons={"urgent": "waiting-for-preemption"},
    ),
    Case(
        "reclaims for a gang's minimum when the queue's share holds only the minimum",
        # KAI's "reclaim only the over-quota task from an elastic job": room for the
        # minimum of the reclaimer is enough.
        pool(2),
        [queue("first", deserved=8, capability=16), queue("second", deserved=8, capability=16)],
        [
            workload("f1", "first", on=[("n1", FULL)], started="08:00"),
            workload("f2", "first", on=[("n2", FULL)], started="09:00"),
            workload("s1", "second", count=2, min_member=1),
        ],
        want_evicted={"f2": "reclaim"},
        want_reasons={"s1": "waiting-for-preemption"},
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_a_gang_with_a_minimum_is_served_for_its_minimum(case: Case) -> None:
    """Placement, preemption and reclaim all work for the gang's minimum."""
    result = run_case(case)
    for admission in result.admit:
        nodes = {pod.node for pod in admission.placement}
        if admission.workload == "w1":
            assert len(admission.placement) == 2
            assert nodes == {"n3", "n4"}, "the two pods share domain d2"


def test_a_starving_domain_gang_holds_capacity_inside_one_domain() -> None:
    """A gang that would fit across domains but not in one is held nodes in one domain, and
    work that would take them goes elsewhere."""
    case = Case(
        "a starving domain gang holds one domain",
        pool(4, domain_size=2),  # n1, n2 in d1; n3, n4 in d2
        [queue("team-a", deserved=32)],
        [
            workload("busy-1", gpus=4, on=[("n1", HALF_A)], protected_s=86400),
            workload("busy-3", gpus=4, on=[("n3", HALF_A)], protected_s=86400),
            workload("gang", count=2, topology="domain", submitted="06:00"),
            workload("whole", submitted="09:00", protected_s=3600),
        ],
        policy={"placement": "gpupool", "starvation_limit_s": 3600},
        want_admitted={"whole"},
        want_reasons={"gang": "topology"},
    )
    loaded = case.load()
    result = run_case(case)
    gang = next(p for p in result.pending if p.workload == "gang")
    assert gang.facts.get("holding_capacity") is True
    held = gang.facts.get("held_nodes")
    assert isinstance(held, list) and sorted(held) in (["n1", "n2"], ["n3", "n4"]), held
    (whole,) = [a for a in result.admit if a.workload == "whole"]
    assert whole.placement[0].node not in held
    again = plan(loaded.snapshot, loaded.policy, loaded.now)
    assert again == result
