"""Victim choice counts the progress an eviction throws away: since the last checkpoint.

docs/scheduler.md ("Preemption and reclaim"): a victim loses the progress since its start, or
since its last checkpoint if it reports one; victims are chosen fewest, lowest priority, most
recently started, least progress lost. A reported checkpoint moves the start of what would be
lost.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from scheduler_builders import Case, at, pool, queue, run_case, scenario, workload

from gpupool.scheduler.scenario import ScenarioError, scenario_from_dict

FULL = list(range(8))
HALF_A = [0, 1, 2, 3]
HALF_B = [4, 5, 6, 7]
HIGH_BUDGET = [{"tenant": "team-a", "priority_class": "high", "gpu_hours": 100, "used": 0}]


def checkpointed(hhmm: str) -> dict[str, Any]:
    """The extra field of a running workload that reported a checkpoint at ``hhmm``."""
    return {"last_checkpoint_at": at(hhmm)}


CASES = [
    Case(
        "preempts the most recently started victim when none reports a checkpoint",
        pool(1),
        [queue("team-a", deserved=8)],
        [
            workload("early", gpus=4, priority="low", on=[("n1", HALF_A)], started="06:00"),
            workload("late", gpus=4, priority="low", on=[("n1", HALF_B)], started="08:00"),
            workload("urgent", gpus=4, priority="high"),
        ],
        budgets=HIGH_BUDGET,
        want_evicted={"late": "preempt"},
    ),
    Case(
        "preempts the victim that checkpointed most recently: it loses the least",
        pool(1),
        [queue("team-a", deserved=8)],
        [
            workload(
                "early",
                gpus=4,
                priority="low",
                on=[("n1", HALF_A)],
                started="06:00",
                **checkpointed("09:55"),
            ),
            workload("late", gpus=4, priority="low", on=[("n1", HALF_B)], started="08:00"),
            workload("urgent", gpus=4, priority="high"),
        ],
        budgets=HIGH_BUDGET,
        want_evicted={"early": "preempt"},
    ),
    Case(
        "a checkpoint older than another victim's start does not change the choice",
        pool(1),
        [queue("team-a", deserved=8)],
        [
            workload(
                "early",
                gpus=4,
                priority="low",
                on=[("n1", HALF_A)],
                started="06:00",
                **checkpointed("07:00"),
            ),
            workload("late", gpus=4, priority="low", on=[("n1", HALF_B)], started="08:00"),
            workload("urgent", gpus=4, priority="high"),
        ],
        budgets=HIGH_BUDGET,
        want_evicted={"late": "preempt"},
    ),
    Case(
        "priority still comes before progress lost",
        pool(1),
        [queue("team-a", deserved=8)],
        [
            workload(
                "normal",
                gpus=4,
                on=[("n1", HALF_A)],
                started="06:00",
                **checkpointed("09:59"),
            ),
            workload("low", gpus=4, priority="low", on=[("n1", HALF_B)], started="08:00"),
            workload("urgent", gpus=4, priority="high"),
        ],
        budgets=HIGH_BUDGET,
        want_evicted={"low": "preempt"},
    ),
    Case(
        "reclaims the borrowed workload that checkpointed most recently",
        pool(3),
        [queue("first", deserved=8, capability=24), queue("second", deserved=8, capability=16)],
        [
            workload("f1", "first", on=[("n1", FULL)], started="07:00"),
            workload("f2", "first", on=[("n2", FULL)], started="08:30", **checkpointed("09:58")),
            workload("f3", "first", on=[("n3", FULL)], started="09:30"),
            workload("s1", "second"),
        ],
        want_evicted={"f2": "reclaim"},
        want_reasons={"s1": "waiting-for-preemption"},
    ),
    Case(
        "reclaims the most recently started borrowed workload without checkpoints",
        pool(3),
        [queue("first", deserved=8, capability=24), queue("second", deserved=8, capability=16)],
        [
            workload("f1", "first", on=[("n1", FULL)], started="07:00"),
            workload("f2", "first", on=[("n2", FULL)], started="08:30"),
            workload("f3", "first", on=[("n3", FULL)], started="09:30"),
            workload("s1", "second"),
        ],
        want_evicted={"f3": "reclaim"},
        want_reasons={"s1": "waiting-for-preemption"},
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_victims_are_chosen_by_the_progress_since_their_checkpoint(case: Case) -> None:
    """The plan evicts what the rule says, and keeps every invariant."""
    run_case(case)


# Kueue's greedy search (policy.victim_search, the B3 kueue-like baseline) knows no
# checkpoints: where a checkpoint changed the choice above, it evicts the later start.
GREEDY = {"victim_search": "greedy"}
GREEDY_CASES = [
    replace(
        CASES[1],
        name="greedy preempts the later start although the earlier one checkpointed",
        policy=GREEDY,
        want_evicted={"late": "preempt"},
    ),
    replace(
        CASES[4],
        name="greedy reclaims the later start although another checkpointed",
        policy=GREEDY,
        want_evicted={"f3": "reclaim"},
    ),
]


@pytest.mark.parametrize("case", GREEDY_CASES, ids=[c.name for c in GREEDY_CASES])
def test_greedy_victim_search_ignores_checkpoints(case: Case) -> None:
    """The same pools, searched as Kueue does: recency is the start time."""
    run_case(case)


def _running(**extra: Any) -> dict[str, Any]:
    return workload("r1", on=[("n1", FULL)], started="08:00", **extra)


BAD = [
    (
        "a checkpoint before the start",
        _running(last_checkpoint_at=at("07:00")),
        "workloads[0].last_checkpoint_at: before started_at",
    ),
    (
        "a checkpoint after now",
        _running(last_checkpoint_at=at("11:00")),
        "workloads[0].last_checkpoint_at: after now",
    ),
    (
        "a checkpoint on a pending workload",
        workload("w1", last_checkpoint_at=at("09:00")),
        "workloads[0].last_checkpoint_at: only a running workload has one",
    ),
]


@pytest.mark.parametrize(("name", "job", "message"), BAD, ids=[b[0] for b in BAD])
def test_a_misplaced_checkpoint_is_refused_naming_the_field(
    name: str, job: dict[str, Any], message: str
) -> None:
    """``last_checkpoint_at`` belongs to a running workload, between its start and now."""
    with pytest.raises(ScenarioError) as raised:
        scenario_from_dict(scenario(pool(1), [queue("team-a", deserved=8)], [job]))
    assert str(raised.value) == message


def test_a_running_workload_reads_its_checkpoint() -> None:
    """The scenario's ``last_checkpoint_at`` reaches the core's WorkloadInfo."""
    loaded = scenario_from_dict(
        scenario(
            pool(1),
            [queue("team-a", deserved=8)],
            [_running(last_checkpoint_at=at("09:30"))],
        )
    )
    (running,) = loaded.snapshot.workloads
    assert running.last_checkpoint_at == running.started_at + 5400
