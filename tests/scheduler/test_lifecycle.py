"""Between two cycles: a plan applied, work finishing, and when the next cycle could differ."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from scheduler_builders import at, pool, queue, scenario, snapshots, workload

from gpupool.scheduler import plan
from gpupool.scheduler.contracts import INSTANT_S, Contracts
from gpupool.scheduler.estimate import estimate_starts
from gpupool.scheduler.lifecycle import (
    apply_plan,
    due,
    finish,
    forget_history,
    next_change_at,
    requeue,
)
from gpupool.scheduler.scenario import Scenario, dump_plan, parse_time, scenario_from_dict
from gpupool.scheduler.types import (
    Admission,
    Plan,
    PodPlacement,
    PodRef,
    PolicyInfo,
    PreemptionEventInfo,
    WorkloadInfo,
)

FULL = list(range(8))
HIGH_BUDGET = [{"tenant": "team-a", "priority_class": "high", "gpu_hours": 100, "used": 0}]


def loaded(
    workloads: list[dict[str, Any]], nodes: int = 2, deserved: float = 16, **extra: Any
) -> Scenario:
    """One queue ``team-a`` on ``nodes`` 8-GPU nodes, and the given workloads."""
    return scenario_from_dict(
        scenario(pool(nodes), [queue("team-a", deserved=deserved)], workloads, **extra)
    )


def by_name(workloads: tuple[WorkloadInfo, ...]) -> dict[str, WorkloadInfo]:
    """The workloads of a snapshot by name."""
    return {w.name: w for w in workloads}


def preemption() -> tuple[Scenario, Plan]:
    """An urgent workload evicts the normal one filling the only node."""
    case = loaded(
        [
            workload("old", on=[("n1", FULL)], last_checkpoint_at=at("09:30")),
            workload("urgent", priority="high", submitted="09:00"),
        ],
        nodes=1,
        deserved=8,
        budgets=HIGH_BUDGET,
    )
    return case, plan(case.snapshot, case.policy, case.now)


def test_an_admitted_workload_runs_from_now_where_the_plan_put_it() -> None:
    """Running, started now, on the admission's placement, not nominated, no checkpoint."""
    case = loaded([workload("w1", gpus=4, count=2, nominated=True)])
    result = plan(case.snapshot, case.policy, case.now)
    after = by_name(apply_plan(case.snapshot, result, case.now).workloads)["w1"]
    assert (after.state, after.started_at, after.nominated) == ("running", case.now, False)
    assert after.placement == result.admit[0].placement
    assert after.last_checkpoint_at is None
    assert after.submitted_at == case.snapshot.workloads[0].submitted_at


def test_an_evicted_workload_is_pending_again_with_its_submit_time() -> None:
    """The victim is requeued bare; its preemptor is nominated; the eviction is recorded."""
    case, result = preemption()
    assert [e.workload for e in result.evict] == ["old"]
    after = apply_plan(case.snapshot, result, case.now)
    old = by_name(after.workloads)["old"]
    assert (old.state, old.placement, old.started_at) == ("pending", (), None)
    assert (old.last_checkpoint_at, old.evicting_for) == (None, None)
    assert old.submitted_at == by_name(case.snapshot.workloads)["old"].submitted_at
    assert by_name(after.workloads)["urgent"].nominated
    assert after.preemption_history == (
        PreemptionEventInfo(
            at=case.now, victim="old", preemptor="urgent", preemptor_tenant="team-a"
        ),
    )


def test_a_nominated_preemptor_takes_what_its_victims_freed_in_the_next_cycle() -> None:
    """Victims leave at once: planning again at the same instant admits the preemptor."""
    case, result = preemption()
    after = apply_plan(case.snapshot, result, case.now)
    again = plan(after, case.policy, case.now)
    assert [a.workload for a in again.admit] == ["urgent"]
    assert not again.evict


def test_victims_that_take_time_to_leave_stay_running_for_their_preemptor() -> None:
    """The control loop's case: the preemptor waits, nobody else is evicted, until requeue."""
    case, result = preemption()
    after = apply_plan(case.snapshot, result, case.now, evictions_take_time=True)
    old = by_name(after.workloads)["old"]
    assert (old.state, old.evicting_for) == ("running", "urgent")
    assert len(after.preemption_history) == 1
    waiting = plan(after, case.policy, case.now)
    assert not waiting.admit and not waiting.evict
    assert {p.workload: p.reason for p in waiting.pending} == {"urgent": "waiting-for-preemption"}
    gone = requeue(after, ["old"])
    assert by_name(gone.workloads)["old"].state == "pending"
    assert [a.workload for a in plan(gone, case.policy, case.now).admit] == ["urgent"]


def test_a_plan_naming_workloads_the_snapshot_does_not_hold_is_refused() -> None:
    """Admitting a running workload, evicting a pending one, or an unknown name: ValueError."""
    case, result = preemption()
    with pytest.raises(ValueError, match="cannot admit 'old'"):
        apply_plan(case.snapshot, Plan((Admission("old", (), ()),), (), ()), case.now)
    with pytest.raises(ValueError, match="cannot evict 'urgent'"):
        evict_urgent = dataclasses.replace(result.evict[0], workload="urgent")
        apply_plan(case.snapshot, Plan((), (evict_urgent,), ()), case.now)
    with pytest.raises(ValueError, match="does not hold"):
        apply_plan(case.snapshot, Plan((Admission("ghost", (), ()),), (), ()), case.now)


def test_placed_pods_are_stored_in_pod_set_order_whatever_the_admission_order() -> None:
    """The admission's pod references, not its order, decide which pod runs where."""
    gang = workload("w1")
    gang["pod_sets"] = [
        {"count": 1, "gpus": 2, "flavor": "h100"},
        {"count": 2, "gpus": 1, "flavor": "h100"},
    ]
    case = loaded([gang])
    first, second, third = (
        PodPlacement("n1", (0, 1)),
        PodPlacement("n1", (2,)),
        PodPlacement("n2", (0,)),
    )
    shuffled = Admission("w1", (third, first, second), (PodRef(1, 1), PodRef(0, 0), PodRef(1, 0)))
    after = apply_plan(case.snapshot, Plan((shuffled,), (), ()), case.now)
    assert after.workloads[0].placement == (first, second, third)
    not_first = Admission("w1", (third,), (PodRef(1, 1),))
    with pytest.raises(ValueError, match="first ones in pod-set order"):
        apply_plan(case.snapshot, Plan((not_first,), (), ()), case.now)


def test_finished_work_leaves_the_snapshot_and_due_names_what_ended() -> None:
    """``due`` is the running work whose expected end has come; ``finish`` removes it."""
    case = loaded(
        [
            workload("short", on=[("n1", FULL)], started="09:00", expected_runtime_s=1800),
            workload("long", on=[("n2", FULL)], started="09:00", expected_runtime_s=7200),
            workload("unknown", gpus=0, on=[("n2", [])], started="09:00"),
            workload("waiting"),
        ]
    )
    assert due(case.snapshot, case.now) == ("short",)
    assert due(case.snapshot, parse_time(at("11:00"))) == ("long", "short")
    left = finish(case.snapshot, due(case.snapshot, case.now))
    assert [w.name for w in left.workloads] == ["long", "unknown", "waiting"]


def test_history_older_than_any_contract_looks_back_is_forgotten() -> None:
    """Back-off looks back window + cool-down (1.5 h), victim protection 6 h: 6 h it is."""
    case = loaded(
        [workload("w1")],
        history=[
            {"at": at("03:59"), "victim": "w1"},
            {"at": at("04:00"), "victim": "w1"},
        ],
    )
    kept = forget_history(case.snapshot, case.policy, case.now)
    assert [event.at for event in kept.preemption_history] == [parse_time(at("04:00"))]


def test_with_nothing_pending_only_completions_change_the_world() -> None:
    """Protected windows matter only to pending work; with none, the next end is next."""
    case = loaded(
        [
            workload(
                "r1", on=[("n1", FULL)], started="09:30", protected_s=3600, expected_runtime_s=7200
            )
        ],
    )
    assert next_change_at(case.snapshot, case.policy, case.now) == parse_time(at("11:30"))
    idle = loaded([workload("r1", on=[("n1", FULL)])])
    assert next_change_at(idle.snapshot, idle.policy, idle.now) is None


def test_the_next_change_is_the_end_of_a_protected_window() -> None:
    """A pending workload could preempt once the running one's window ends."""
    case = loaded(
        [
            workload("r1", on=[("n1", FULL)], started="09:30", protected_s=3600),
            workload("w1"),
        ],
        nodes=1,
    )
    assert next_change_at(case.snapshot, case.policy, case.now) == parse_time(at("10:30"))


def test_the_next_change_is_when_a_workload_starts_to_starve() -> None:
    """Starving is strict (waited more than the limit): one instant after the boundary."""
    case = loaded(
        [workload("r1", on=[("n1", FULL)]), workload("w1", submitted="09:30")],
        nodes=1,
        policy={"placement": "gpupool", "starvation_limit_s": 3600},
    )
    change = next_change_at(case.snapshot, case.policy, case.now)
    assert change == parse_time(at("10:30")) + INSTANT_S
    w1 = by_name(case.snapshot.workloads)["w1"]
    assert not Contracts(case.snapshot, case.policy, parse_time(at("10:30"))).starving(w1)
    assert Contracts(case.snapshot, case.policy, change).starving(w1)


def test_the_next_change_is_when_a_back_off_ends() -> None:
    """Four preemptions caused within the hour: backed off until 30 min after the last."""
    caused = [{"at": at(t), "victim": "v", "preemptor": "w1"} for t in ("09:10", "09:20", "09:30")]
    caused.append({"at": at("09:40"), "victim": "v", "preemptor": "w1"})
    case = loaded([workload("w1")], history=caused)
    w1 = by_name(case.snapshot.workloads)["w1"]
    assert Contracts(case.snapshot, case.policy, case.now).standing["w1"].backed_off
    end = parse_time(at("10:10"))
    assert next_change_at(case.snapshot, case.policy, case.now) == end
    assert not Contracts(case.snapshot, case.policy, end).standing["w1"].backed_off
    assert Contracts(case.snapshot, case.policy, end - INSTANT_S).standing[w1.name].backed_off


def test_the_next_change_is_when_a_victims_extra_protection_lapses() -> None:
    """Evicted twice within 6 h: protected 30 min after its start until the first eviction
    leaves the window (04:30 + 6 h), though its own window is zero."""
    case = loaded(
        [workload("r1", on=[("n1", FULL)], started="09:50"), workload("w1", priority="high")],
        nodes=1,
        budgets=HIGH_BUDGET,
        history=[{"at": at("04:30"), "victim": "r1"}, {"at": at("05:00"), "victim": "r1"}],
    )
    r1 = by_name(case.snapshot.workloads)["r1"]
    assert Contracts(case.snapshot, case.policy, case.now).protected_until(r1) == parse_time(
        at("10:20")
    )
    lapse = parse_time(at("10:30")) + INSTANT_S
    assert next_change_at(case.snapshot, case.policy, case.now) == parse_time(at("10:20"))
    assert Contracts(case.snapshot, case.policy, case.now).victim_protection_ends_at(r1) == lapse


def test_an_estimate_counts_a_preemption_a_protected_window_allows() -> None:
    """The urgent workload starts when the old one's window ends, though the old one has no
    expected end: the replay wakes at the contracts' timers too."""
    case = loaded(
        [
            workload("old", on=[("n1", FULL)], started="09:30", protected_s=3600),
            workload("urgent", priority="high"),
        ],
        nodes=1,
        deserved=8,
        budgets=HIGH_BUDGET,
    )
    starts = estimate_starts(case.snapshot, case.policy, case.now)
    assert starts == {"urgent": parse_time(at("10:30"))}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(snapshots())
def test_before_the_next_change_the_plan_is_the_same(data: dict[str, Any]) -> None:
    """Just before ``next_change_at`` (or a week on, when nothing will change) ``plan``
    decides exactly as it does now."""
    for i, item in enumerate(data["workloads"]):
        if item["state"] == "running" and i % 2:
            item["expected_runtime_s"] = 900 * (i + 1)
    case = scenario_from_dict(data)
    change = next_change_at(case.snapshot, case.policy, case.now)
    later = case.now + 7 * 86400 if change is None else change - INSTANT_S
    if later <= case.now:
        return
    now_plan = dump_plan(plan(case.snapshot, case.policy, case.now))
    assert dump_plan(plan(case.snapshot, case.policy, later)) == now_plan


def test_no_change_is_due_on_an_empty_pool() -> None:
    """No workloads, nothing to wait for."""
    case = loaded([])
    assert next_change_at(case.snapshot, PolicyInfo(), case.now) is None
