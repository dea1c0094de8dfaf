"""A starvation hold survives backfill (issue 13, item 3; DESIGN section 3, backfill).

On capacity held for a starving workload, backfill places only work expected to end before
that workload could start -- Slurm's backfill rule: a lower-priority job may start early
only if it does not delay the reservation of the highest-priority one -- or work with no
protected window that the held workload may then evict, whatever its queue. Such an
admission says whom it backfilled for, the running workload carries it
(``backfilled_for``), and the held workload evicts it (reason ``preempt``) once that makes
room for it.
"""

from __future__ import annotations

from typing import Any

import pytest
from scheduler_builders import check_invariants, pool, queue, scenario, workload

from gpupool.scheduler import plan
from gpupool.scheduler.lifecycle import apply_plan, finish
from gpupool.scheduler.scenario import (
    Scenario,
    ScenarioError,
    plan_to_dict,
    scenario_from_dict,
)
from gpupool.scheduler.types import Plan

FULL = list(range(8))
HALF_A = [0, 1, 2, 3]
QUEUES = [queue("team-a", deserved=16), queue("team-b", deserved=8, capability=16)]
POLICY = {"placement": "gpupool", "starvation_limit_s": 3600}


def held_pool(
    *pending: dict[str, Any], r1_runtime: float | None = None, budgets: list[Any] | None = None
) -> Scenario:
    """team-a's 8-GPU gang has starved since 07:00 behind r1 (4 GPUs on n1); n2 is full of
    team-b's protected work, so team-a is served first and holds n1."""
    r1 = workload("r1", gpus=4, on=[("n1", HALF_A)], started="09:00")
    if r1_runtime is not None:
        r1["expected_runtime_s"] = r1_runtime
    b_run = workload("b-run", "team-b", on=[("n2", FULL)], started="09:30", protected_s=86400)
    return scenario_from_dict(
        scenario(
            pool(2),
            QUEUES,
            [r1, b_run, workload("starving", submitted="06:00"), *pending],
            policy=POLICY,
            budgets=budgets,
        )
    )


def planned(loaded: Scenario) -> Plan:
    """The plan, with every invariant checked."""
    result = plan(loaded.snapshot, loaded.policy, loaded.now)
    check_invariants(loaded, result)
    return result


def test_work_of_another_queue_that_backfills_a_hold_is_evicted_by_the_held_workload() -> None:
    """team-b's evict-any-time job backfills the held GPUs; once r1 ends, the starving gang
    evicts it, though it is of another queue and of the same priority."""
    loaded = held_pool(workload("b1", "team-b", gpus=4, submitted="09:30"))
    first = planned(loaded)
    assert [a.workload for a in first.admit] == ["b1"]
    snapshot = finish(apply_plan(loaded.snapshot, first, loaded.now), ["r1"])
    second = planned(Scenario(snapshot, loaded.policy, loaded.now + 600))
    assert [(e.workload, e.reason, e.preemptor) for e in second.evict] == [
        ("b1", "preempt", "starving")
    ]
    assert [a.backfill_for for a in first.admit] == ["starving"]
    assert plan_to_dict(first)["admit"][0]["backfill_for"] == "starving"  # type: ignore[index]
    (b1,) = [w for w in snapshot.workloads if w.name == "b1"]
    assert b1.backfilled_for == "starving"


def test_the_held_workload_does_not_evict_backfilled_work_that_would_not_make_room() -> None:
    """While r1 still runs, evicting b1 would not let the gang start: b1 keeps running."""
    loaded = held_pool(workload("b1", "team-b", gpus=4, submitted="09:30"))
    snapshot = apply_plan(loaded.snapshot, planned(loaded), loaded.now)
    assert planned(Scenario(snapshot, loaded.policy, loaded.now + 600)).evict == ()


def test_protected_work_backfills_a_hold_only_if_it_ends_before_the_held_workload_starts() -> None:
    """r1 is expected to end at 11:00: a protected job of an hour fits before, one of two
    hours does not (Slurm's rule); neither may be evicted, so neither is marked."""
    short = workload("short", "team-b", gpus=4, submitted="09:30", protected_s=3600)
    short["expected_runtime_s"] = 3600
    result = planned(held_pool(short, r1_runtime=7200))
    assert [a.workload for a in result.admit] == ["short"]
    assert result.admit[0].backfill_for is None
    long = workload("long", "team-b", gpus=4, submitted="09:30", protected_s=3600)
    long["expected_runtime_s"] = 7200
    result = planned(held_pool(long, r1_runtime=7200))
    assert result.admit == ()
    assert {p.workload: p.reason for p in result.pending}["long"] == "behind"


def test_work_the_held_workload_could_not_evict_does_not_backfill() -> None:
    """A higher-priority job with no protected window: the starving gang could never evict
    it, so it does not take the held GPUs."""
    budgets = [{"tenant": "team-b", "priority_class": "high", "gpu_hours": 100, "used": 0}]
    high = workload("b-high", "team-b", gpus=4, priority="high", submitted="09:30")
    assert planned(held_pool(high, budgets=budgets)).admit == ()


def test_a_scenario_names_a_real_holder_for_backfilled_work() -> None:
    """``backfilled_for`` is read on running work only, and must name a workload."""
    data = scenario(
        pool(1),
        QUEUES,
        [workload("b1", "team-b", gpus=4, on=[("n1", HALF_A)], backfilled_for="nobody")],
    )
    with pytest.raises(ScenarioError, match=r"^workloads\[0\]\.backfilled_for: unknown"):
        scenario_from_dict(data)
    data["workloads"] = [workload("b1", "team-b", gpus=4, backfilled_for="b1")]
    with pytest.raises(ScenarioError, match=r"^workloads\[0\]\.backfilled_for: only a running"):
        scenario_from_dict(data)
