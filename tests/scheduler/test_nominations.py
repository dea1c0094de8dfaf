"""A nomination is a promise kept (issue 13, item 2).

While a nominated preemptor's victims leave, one by one, the capacity already freed is held
for it: no other workload is admitted onto it, from any queue (not even a victim coming
back), and their explanation says what the plan does. kube-scheduler keeps a nominated pod's
resources on its nominated node while its victims terminate, and Volcano pipelines a
preemptor onto the resources its victims release; here the promise binds every queue.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from scheduler_builders import check_invariants, pool, queue, scenario, workload

from gpupool.scheduler import plan
from gpupool.scheduler.lifecycle import apply_plan, requeue
from gpupool.scheduler.scenario import Scenario, scenario_from_dict
from gpupool.scheduler.types import Plan

FULL = list(range(8))
HALF_A = [0, 1, 2, 3]
HALF_B = [4, 5, 6, 7]
BUDGETS = [{"tenant": "team-a", "priority_class": "high", "gpu_hours": 100, "used": 0}]
QUEUES = [queue("team-a", deserved=8, capability=16), queue("team-b", deserved=16)]


def half_gone(extra: list[dict[str, Any]] | None = None) -> Scenario:
    """urgent evicted v1 and v2 on n1; v1 has left (pending again), v2 is still leaving.
    n2 is full of team-b's protected work; team-b's b1 would fit where v1 was."""
    return scenario_from_dict(
        scenario(
            pool(2),
            QUEUES,
            [
                workload("v1", gpus=4, submitted="07:00"),
                workload("v2", gpus=4, on=[("n1", HALF_B)], evicting_for="urgent"),
                workload("urgent", priority="high", nominated=True, submitted="09:00"),
                workload("b-run", "team-b", on=[("n2", FULL)], started="09:30", protected_s=7200),
                workload("b1", "team-b", gpus=4, submitted="08:00"),
                *(extra or []),
            ],
            budgets=BUDGETS,
        )
    )


def planned(loaded: Scenario) -> Plan:
    """The plan, with every invariant checked."""
    result = plan(loaded.snapshot, loaded.policy, loaded.now)
    check_invariants(loaded, result)
    return result


def test_capacity_freed_by_a_first_victim_is_kept_for_the_preemptor() -> None:
    """No workload of another queue, nor the victim itself, takes what v1 freed."""
    result = planned(half_gone())
    assert result.admit == ()
    reasons = {p.workload: p for p in result.pending}
    assert reasons["urgent"].reason == "waiting-for-preemption"
    assert reasons["b1"].reason == "behind"
    assert reasons["b1"].facts.get("held_for") == "urgent"
    assert "urgent" in reasons["b1"].detail
    assert reasons["v1"].reason == "quota"  # team-a's share is promised to urgent


def test_work_that_fits_beside_the_promise_still_runs() -> None:
    """A hold for a nomination blocks what the preemptor needs, not the rest of the pool."""
    loaded = scenario_from_dict(
        scenario(
            pool(3),
            QUEUES,
            [
                workload("v2", gpus=4, on=[("n1", HALF_B)], evicting_for="urgent"),
                workload("urgent", priority="high", nominated=True, submitted="09:00"),
                workload("b-run", "team-b", gpus=4, on=[("n2", HALF_A)], protected_s=86400),
                workload("b1", "team-b", gpus=4, submitted="08:00"),
            ],
            budgets=BUDGETS,
        )
    )
    result = planned(loaded)
    assert [a.workload for a in result.admit] == ["b1"]
    assert result.admit[0].placement[0].node != "n1"


def test_a_nomination_is_kept_until_the_last_victim_has_left() -> None:
    """Evictions that take time: the victims leave one cycle apart, and nothing admitted in
    between takes the preemptor's place; then the preemptor runs where they were."""
    loaded = scenario_from_dict(
        scenario(
            pool(2),
            QUEUES,
            [
                workload("v1", gpus=4, on=[("n1", HALF_A)]),
                workload("v2", gpus=4, on=[("n1", HALF_B)]),
                workload("b-run", "team-b", on=[("n2", FULL)], started="09:30", protected_s=7200),
                workload("urgent", priority="high", submitted="09:00"),
            ],
            budgets=BUDGETS,
        )
    )
    first = planned(loaded)
    assert {e.workload for e in first.evict} == {"v1", "v2"}
    now = loaded.now
    snapshot = apply_plan(loaded.snapshot, first, now, evictions_take_time=True)
    snapshot = requeue(snapshot, ["v1"])  # v1 has gone, v2 is still leaving
    arrived = scenario_from_dict(
        scenario(pool(2), QUEUES, [workload("b1", "team-b", gpus=4, submitted="09:50")])
    ).snapshot.workloads
    snapshot = dataclasses.replace(snapshot, workloads=snapshot.workloads + arrived)
    second = planned(Scenario(snapshot, loaded.policy, now + 60))
    assert second.admit == () and second.evict == ()
    snapshot = requeue(apply_plan(snapshot, second, now + 60, evictions_take_time=True), ["v2"])
    third = planned(Scenario(snapshot, loaded.policy, now + 120))
    assert [a.workload for a in third.admit] == ["urgent"]
    assert {p.node for p in third.admit[0].placement} == {"n1"}
