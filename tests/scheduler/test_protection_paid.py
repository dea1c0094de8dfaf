"""A protected window beyond the queue's cap is protection only when a budget paid for it
(DESIGN section 2, protected-runtime contract: "longer protection needs an elevated class and
is paid from its budget"), and a victim a disruption budget protected is left alone.

Running work at a class that costs budget says whether its admission reserved its window
(``WorkloadInfo.window_reserved``). Before it did, the core judged running work by how the
budget stood now: work admitted demoted (its window never reserved) got its whole declared
window uncapped as soon as the budget was positive again, and work that paid lost its window
to the queue's cap when its tenant's budget was spent to nothing -- by its own reservation,
for one.
"""

from __future__ import annotations

from typing import Any

from scheduler_builders import Case, at, pool, queue, run_case, scenario, workload

from gpupool.scheduler import plan
from gpupool.scheduler.lifecycle import apply_plan, next_change_at
from gpupool.scheduler.scenario import (
    ScenarioError,
    parse_time,
    scenario_from_dict,
    snapshot_to_dict,
)

FULL = list(range(8))
CAP_S = 1800
BUDGET_LEFT = [{"tenant": "team-a", "priority_class": "high", "gpu_hours": 100, "used": 0}]
BUDGET_SPENT = [{"tenant": "team-a", "priority_class": "high", "gpu_hours": 16, "used": 16}]


def reclaim_case(name: str, budgets: list[dict[str, Any]], **victim: Any) -> Case:
    """team-a borrows the whole node with an urgent gang started at 09:00 that declares two
    hours of protection (its queue caps free protection at 30 minutes); at 10:00 team-b,
    which deserves the node, asks for it."""
    return Case(
        name,
        pool(1),
        [
            queue("team-a", deserved=0, capability=8, max_protected_runtime_s=CAP_S),
            queue("team-b", deserved=8),
        ],
        [
            workload(
                "long",
                priority="high",
                on=[("n1", FULL)],
                started="09:00",
                protected_s=7200,
                **victim,
            ),
            workload("owner", queue="team-b", submitted="09:30"),
        ],
        budgets=budgets,
    )


def test_work_admitted_demoted_keeps_the_capped_window_when_its_budget_elevates_it() -> None:
    case = reclaim_case("demoted at admission", BUDGET_LEFT, window_reserved=False)
    case.want_evicted = {"long": "reclaim"}
    run_case(case)


def test_work_that_reserved_its_window_is_protected_past_the_cap() -> None:
    case = reclaim_case("paid", BUDGET_LEFT, window_reserved=True)
    case.want_reasons = {"owner": "capacity"}
    result = run_case(case)
    assert not result.evict


def test_a_paid_window_holds_when_the_budget_is_spent_to_nothing() -> None:
    case = reclaim_case("paid, budget spent", BUDGET_SPENT, window_reserved=True)
    result = run_case(case)
    assert not result.evict


def test_without_window_reserved_the_budget_now_decides_as_before() -> None:
    """Scenario files that do not say: elevated now is paid, demoted now is capped."""
    assert not run_case(reclaim_case("unknown, elevated", BUDGET_LEFT)).evict
    case = reclaim_case("unknown, demoted", BUDGET_SPENT)
    case.want_evicted = {"long": "reclaim"}
    run_case(case)


def refused_case(until: str, now: str = "10:00") -> Case:
    """A low-priority filler with no window, whose eviction a disruption budget refused;
    a high workload of the same team wants the node."""
    return Case(
        "refused",
        pool(1),
        [queue("team-a", deserved=8, max_protected_runtime_s=CAP_S)],
        [
            workload(
                "filler",
                priority="low",
                on=[("n1", FULL)],
                started="08:00",
                eviction_refused_until=at(until),
            ),
            workload("urgent", priority="high", submitted="09:59"),
        ],
        budgets=BUDGET_LEFT,
        now=now,
    )


def test_a_victim_whose_eviction_was_refused_is_left_alone_until_then() -> None:
    case = refused_case("10:01")
    result = run_case(case)
    assert not result.evict
    loaded = case.load()
    assert next_change_at(loaded.snapshot, loaded.policy, loaded.now) == parse_time(at("10:01"))
    later = refused_case("10:01", now="10:02")
    later.want_evicted = {"filler": "preempt"}
    run_case(later)


def test_apply_plan_says_whether_an_admission_reserved_its_window() -> None:
    """Two urgent gangs whose windows the budget covers only one of: the first reserves,
    the second is admitted demoted; work at a free class says nothing."""
    loaded = scenario_from_dict(
        scenario(
            pool(3),
            [queue("team-a", deserved=24)],
            [
                workload("first", priority="high", protected_s=3600, submitted="09:00"),
                workload("second", priority="high", protected_s=3600, submitted="09:01"),
                workload("free", submitted="09:02"),
            ],
            budgets=[{"tenant": "team-a", "priority_class": "high", "gpu_hours": 8, "used": 0}],
        )
    )
    result = plan(loaded.snapshot, loaded.policy, loaded.now)
    assert {a.workload for a in result.admit} == {"first", "second", "free"}
    after = {w.name: w for w in apply_plan(loaded.snapshot, result, loaded.now).workloads}
    assert (after["first"].window_reserved, after["second"].window_reserved) == (True, False)
    assert after["free"].window_reserved is None


def test_scenario_files_carry_both_fields_and_refuse_them_where_they_mean_nothing() -> None:
    loaded = reclaim_case("round trip", BUDGET_LEFT, window_reserved=False).load()
    again = scenario_from_dict(snapshot_to_dict(loaded.snapshot, loaded.policy, loaded.now))
    assert again.snapshot == loaded.snapshot
    refused = refused_case("10:01").load()
    again = scenario_from_dict(snapshot_to_dict(refused.snapshot, refused.policy, refused.now))
    assert again.snapshot == refused.snapshot
    for bad, words in (
        (workload("w", window_reserved=True), "only a running workload"),
        (workload("w", eviction_refused_until=at("10:01")), "only a running workload"),
        (workload("w", on=[("n1", FULL)], window_reserved=True), "costs no budget"),
    ):
        try:
            scenario_from_dict(scenario(pool(1), [queue("team-a", deserved=8)], [bad]))
        except ScenarioError as error:
            assert words in str(error), error
            assert "window_reserved" in str(error) or "eviction_refused_until" in str(error)
        else:
            raise AssertionError(f"accepted {bad}")
