"""A blocked job does not spend another job's budget (issue 13, item 8).

A pending workload at a budgeted class reserves its protected window from its tenant's
budget when it is admitted or evicts for its place -- in the order that happens, not in
rank order up front -- so a workload that is not admitted in the cycle holds nothing back
from the next one. The explanation gives the budget's real remaining hours and what other
work reserved from it this cycle.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, cast

from scheduler_builders import Case, at, pool, queue, run_case, workload

from gpupool.scheduler.contracts import Contracts
from gpupool.scheduler.scenario import plan_to_dict

FULL = list(range(8))
HALF_A = [0, 1, 2, 3]
HALF_B = [4, 5, 6, 7]
BUDGET = [{"tenant": "team-a", "priority_class": "high", "gpu_hours": 10, "used": 0}]
QUEUES = [
    queue("team-a", deserved=16, tenant="team-a"),
    queue("team-a2", deserved=4, tenant="team-a"),
]


def blocked_then_ready(extra: list[dict[str, Any]] | None = None, **want: Any) -> Case:
    """big (8 GPUs for an hour: 8 GPU-hours) ranks first but no node can be freed for it;
    small (4 GPUs for an hour: 4) could preempt old. The tenant has 10 GPU-hours."""
    return Case(
        "a blocked job does not spend another job's budget",
        pool(2),
        QUEUES,
        [
            workload("kept", on=[("n1", FULL)], started="09:30", protected_s=7200),
            workload("old", "team-a2", gpus=4, on=[("n2", HALF_A)]),
            workload("kept2", gpus=4, on=[("n2", HALF_B)], started="09:30", protected_s=7200),
            workload("big", priority="high", protected_s=3600, submitted="08:00"),
            workload("small", "team-a2", gpus=4, priority="high", protected_s=3600),
            *(extra or []),
        ],
        budgets=BUDGET,
        **want,
    )


def test_a_workload_not_admitted_holds_no_budget_back_from_the_next_one() -> None:
    """big is blocked, so small is elevated with the whole budget and preempts old; big is
    then told that small reserved 4 of the 10 GPU-hours it would need 8 of."""
    result = run_case(
        blocked_then_ready(
            want_evicted={"old": "preempt"},
            want_reasons={"small": "waiting-for-preemption"},
        )
    )
    big = next(p for p in result.pending if p.workload == "big")
    assert (big.reason, big.facts.get("reserved_by")) == ("budget", ["small"])


def test_the_explanation_gives_the_real_remaining_hours_and_who_reserved_them() -> None:
    """first (8 GPU-hours) is admitted; second's 4 are no longer covered: it says the tenant
    has 10 GPU-hours, 8 of them reserved by first in this cycle."""
    case = Case(
        "budget reserved by other pending work",
        pool(2),
        [queue("team-a", deserved=16)],
        [
            workload("kept", on=[("n1", FULL)], started="09:30", protected_s=7200),
            workload("first", priority="high", protected_s=3600, submitted="08:00"),
            workload("second", gpus=4, priority="high", protected_s=3600),
        ],
        budgets=BUDGET,
        want_admitted={"first"},
        want_reasons={"second": "budget"},
    )
    result = run_case(case)
    second = next(p for p in result.pending if p.workload == "second")
    assert second.facts["remaining_gpu_hours"] == 10
    assert second.facts["reserved_by"] == ["first"]
    assert second.facts["reserved_gpu_hours"] == 8
    assert "10 GPU-hours left" in second.detail and "first" in second.detail


def test_a_workloads_standing_on_budget_does_not_depend_on_the_other_work() -> None:
    """The contracts decide each workload's standing on budget (demoted or not, what it would
    reserve) from its own class and window and its tenant's budget as the snapshot found it,
    whatever other work or preemption history the snapshot holds. (The control loop's budget
    book no longer reads standings at all: the cycle spends the budget as it admits, and the
    plan says what each admission reserved, ``Admission.budget_reservation``.)"""
    case = blocked_then_ready(
        [
            workload("tiny", gpus=1, priority="high", protected_s=600),
            workload("huge", gpus=8, count=2, priority="high", protected_s=36000),
        ],
        history=[
            {
                "at": at("09:5" + str(i)),
                "victim": "old",
                "preemptor": name,
                "preemptor_tenant": "team-a",
            }
            for i, name in enumerate(["small", "big", "small"])
        ],
        policy={
            "placement": "gpupool",
            "preemption_backoff": {"max_preemptions": 1, "window_s": 3600, "cooldown_s": 3600},
        },
    )
    loaded = case.load()
    whole = Contracts(loaded.snapshot, loaded.policy, loaded.now)
    for alone in loaded.snapshot.workloads:
        by_itself = Contracts(
            replace(loaded.snapshot, workloads=(alone,), preemption_history=()),
            loaded.policy,
            loaded.now,
        )
        got, want = by_itself.standing[alone.name], whole.standing[alone.name]
        assert (got.budget_demoted, got.budget_reservation, got.budget_remaining) == (
            want.budget_demoted,
            want.budget_reservation,
            want.budget_remaining,
        ), alone.name
    assert {w.name for w in loaded.snapshot.workloads if whole.standing[w.name].budget_demoted} == {
        "huge"
    }
    # the history did back the preemptors off in the whole snapshot (a standing's value)
    assert whole.standing["small"].backed_off and whole.standing["big"].backed_off


def test_the_plan_says_what_each_admission_reserved_of_its_budget() -> None:
    """Two workloads of one tenant at a budgeted class, both admitted in one cycle, the
    budget (10 GPU-hours) covering each alone but not both: first (4 GPUs x 1 h = 4) is
    admitted elevated and reserves 4; second (4 GPUs x 2 h = 8) finds 6 left and is admitted
    demoted (there is room at the default class too), reserving nothing; work at a class
    that costs no budget reserves nothing. The plan carries it (``Admission.
    budget_reservation``, in the JSON only where it is not 0): the loop's ledger reserves
    exactly that (tests/control/test_loop_budgets.py)."""
    result = run_case(
        Case(
            "one cycle spends the budget as it admits",
            pool(2),
            [queue("team-a", deserved=16)],
            [
                workload("first", gpus=4, priority="high", protected_s=3600, submitted="08:00"),
                workload("second", gpus=4, priority="high", protected_s=7200),
                workload("plain", gpus=4, protected_s=3600),
            ],
            budgets=BUDGET,
            want_admitted={"first", "second", "plain"},
        )
    )
    reserved = {a.workload: a.budget_reservation for a in result.admit}
    assert reserved == {"first": 4.0, "second": 0.0, "plain": 0.0}
    admits = cast("list[dict[str, object]]", plan_to_dict(result)["admit"])
    admitted = {a["workload"]: a for a in admits}
    assert admitted["first"]["budget_reservation_gpu_hours"] == 4
    assert "budget_reservation_gpu_hours" not in admitted["second"]
    assert "budget_reservation_gpu_hours" not in admitted["plain"]


def test_a_preemptor_whose_place_is_reserved_reserves_nothing_in_the_plan() -> None:
    """small spends the budget in the cycle as it evicts for its place (so nothing later in
    the cycle is elevated on it), but it is not admitted: the plan has no admission for it,
    so nothing is reserved on the ledger until the cycle that admits it."""
    result = run_case(
        blocked_then_ready(
            want_evicted={"old": "preempt"},
            want_reasons={"small": "waiting-for-preemption"},
        )
    )
    assert "small" not in {a.workload for a in result.admit}
    assert all(a.budget_reservation == 0 for a in result.admit)
