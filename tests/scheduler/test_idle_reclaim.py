"""The idle filter: running work idle past its idle timeout is reclaimed, outside its protected
window; work idle past its alert timeout is reported (docs/scheduler.md, "Idle work").

A class sets ``idle_alert_after_s`` and ``idle_reclaim_after_s`` (None: never; the default);
a queue may override either for its workloads. A workload's ``idle_since`` says since when its
GPUs have done nothing (None: they work, or no source saw them).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from scheduler_builders import CLASSES, Case, at, check_invariants, pool, queue, run_case, workload
from scheduler_builders import scenario as scenario_dict

from gpupool.scheduler import plan
from gpupool.scheduler.lifecycle import apply_plan, next_change_at
from gpupool.scheduler.scenario import (
    ScenarioError,
    plan_to_dict,
    scenario_from_dict,
    snapshot_to_dict,
)

HOUR = 3600.0
FULL = list(range(8))
HALF_A = [0, 1, 2, 3]
HALF_B = [4, 5, 6, 7]
# The interactive class alerts after 20 minutes idle and reclaims after an hour.
IDLE_CLASSES: list[dict[str, Any]] = [
    {**c, "idle_alert_after_s": 1200, "idle_reclaim_after_s": 3600}
    if c["name"] == "interactive"
    else c
    for c in CLASSES
]


def notebook(name: str, idle_since: str | None, **extra: Any) -> dict[str, Any]:
    """A running interactive notebook on half of n1 (or as ``extra`` says), idle since then."""
    options: dict[str, Any] = {
        "gpus": 4,
        "priority": "interactive",
        "on": [("n1", HALF_A)],
        "started": "07:00",
    }
    options.update(extra)
    out = workload(name, **options)
    if idle_since is not None:
        out["idle_since"] = at(idle_since)
    return out


def idle_case(name: str, *args: Any, classes: list[dict[str, Any]] | None = None, **kw: Any):
    """A Case whose scenario uses ``classes`` (default: the interactive class with a policy)."""
    case = Case(name, *args, **kw)
    chosen = IDLE_CLASSES if classes is None else classes

    def load() -> Any:
        data = scenario_dict(
            case.nodes, case.queues, case.workloads, now=case.now, policy=case.policy
        )
        data["priority_classes"] = chosen
        return scenario_from_dict(data)

    case.load = load  # type: ignore[method-assign]
    return case


CASES = [
    idle_case(
        "reclaims a notebook idle for longer than its class's reclaim timeout",
        pool(1),
        [queue("team-a", deserved=8)],
        [notebook("nb", idle_since="08:30")],
        want_evicted={"nb": "idle"},
    ),
    idle_case(
        "does not reclaim a busy notebook",
        pool(1),
        [queue("team-a", deserved=8)],
        [notebook("nb", idle_since=None)],
    ),
    idle_case(
        "does not reclaim a notebook idle for less than its timeout",
        pool(1),
        [queue("team-a", deserved=8)],
        [notebook("nb", idle_since="09:30")],
    ),
    idle_case(
        "does not reclaim an idle notebook inside its protected window",
        pool(1),
        [queue("team-a", deserved=8)],
        [notebook("nb", idle_since="07:00", protected_s=4 * HOUR)],
    ),
    idle_case(
        "reclaims nothing by default: no class sets an idle policy",
        pool(1),
        [queue("team-a", deserved=8)],
        [notebook("nb", idle_since="02:00", started="01:00")],
        classes=CLASSES,
    ),
    idle_case(
        "reclaims only work of a class with a policy",
        pool(1),
        [queue("team-a", deserved=8)],
        [
            notebook("nb", idle_since="08:00"),
            workload("train", gpus=4, on=[("n1", HALF_B)], started="07:00", idle_since=at("08:00")),
        ],
        want_evicted={"nb": "idle"},
    ),
    idle_case(
        "a queue's longer reclaim timeout overrides its class's",
        pool(1),
        [queue("team-a", deserved=8, idle_reclaim_after_s=4 * HOUR)],
        [notebook("nb", idle_since="08:30")],
    ),
    idle_case(
        "a queue's reclaim timeout applies where its class sets none",
        pool(1),
        [queue("team-a", deserved=8, idle_reclaim_after_s=600)],
        [workload("train", gpus=4, on=[("n1", HALF_B)], started="07:00", idle_since=at("09:45"))],
        classes=CLASSES,
        want_evicted={"train": "idle"},
    ),
    idle_case(
        "does not evict again a notebook already leaving",
        pool(1),
        [queue("team-a", deserved=8)],
        [notebook("nb", idle_since="08:00", leaving=True)],
    ),
    idle_case(
        "the GPUs an idle reclaim frees are not admitted on in the same cycle",
        pool(1),
        [queue("team-a", deserved=8)],
        [
            notebook("nb", idle_since="08:00", gpus=8, on=[("n1", FULL)]),
            workload("next", gpus=8),
        ],
        want_evicted={"nb": "idle"},
        want_not_admitted={"next"},
        # its quota stays charged until its pods are gone, as for every eviction
        want_reasons={"next": "quota"},
    ),
    idle_case(
        "a preemptor does not count an idle-reclaimed workload as its victim too",
        pool(1),
        [queue("team-a", deserved=8)],
        [
            notebook("nb", idle_since="08:00", gpus=8, on=[("n1", FULL)], priority="low"),
            workload("urgent", gpus=8, priority="normal"),
        ],
        classes=[
            {**c, "idle_alert_after_s": 1200, "idle_reclaim_after_s": 3600}
            if c["name"] == "low"
            else c
            for c in CLASSES
        ],
        want_evicted={"nb": "idle"},
        want_not_admitted={"urgent"},
    ),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_idle_rule(case: Case) -> None:
    run_case(case)


def _loaded(workloads: list[dict[str, Any]], queues: list[dict[str, Any]] | None = None) -> Any:
    data = scenario_dict(pool(1), queues or [queue("team-a", deserved=8)], workloads)
    data["priority_classes"] = IDLE_CLASSES
    return scenario_from_dict(data)


def test_alerts_idle_work_past_its_alert_timeout_with_when_it_is_reclaimed() -> None:
    loaded = _loaded(
        [
            notebook("alerted", idle_since="09:30"),
            workload(
                "fresh",
                gpus=4,
                priority="interactive",
                on=[("n1", HALF_B)],
                started="07:00",
                idle_since=at("09:50"),
            ),
        ]
    )
    result = plan(loaded.snapshot, loaded.policy, loaded.now)
    assert not result.evict
    assert [(a.workload, a.idle_since, a.reclaim_at) for a in result.idle_alerts] == [
        ("alerted", loaded.snapshot.workloads[0].idle_since, at_posix("10:30"))
    ]
    assert plan_to_dict(result)["idle_alerts"] == [
        {"workload": "alerted", "idle_since": at("09:30"), "reclaim_at": at("10:30")}
    ]


def test_an_alert_says_a_protected_notebook_is_reclaimed_when_its_window_ends() -> None:
    loaded = _loaded([notebook("nb", idle_since="09:00", protected_s=4 * HOUR)])
    result = plan(loaded.snapshot, loaded.policy, loaded.now)
    assert [a.reclaim_at for a in result.idle_alerts] == [at_posix("11:00")]


def test_a_reclaimed_workload_is_not_alerted_about() -> None:
    loaded = _loaded([notebook("nb", idle_since="08:00")])
    result = plan(loaded.snapshot, loaded.policy, loaded.now)
    assert [e.workload for e in result.evict] == ["nb"]
    assert result.idle_alerts == ()


def test_an_idle_reclaimed_workload_ends_rather_than_being_requeued() -> None:
    loaded = _loaded([notebook("nb", idle_since="08:00"), workload("other", gpus=1)])
    result = plan(loaded.snapshot, loaded.policy, loaded.now)
    check_invariants(loaded, result)
    after = apply_plan(loaded.snapshot, result, loaded.now)
    assert "nb" not in {w.name for w in after.workloads}
    assert [e.victim for e in after.preemption_history] == ["nb"]
    leaving = apply_plan(loaded.snapshot, result, loaded.now, evictions_take_time=True)
    nb = next(w for w in leaving.workloads if w.name == "nb")
    assert nb.state == "running" and nb.leaving and nb.evicting_for is None
    again = plan(leaving, loaded.policy, loaded.now + 60)
    assert not again.evict


def test_the_next_change_is_when_idle_work_becomes_reclaimable() -> None:
    loaded = _loaded([notebook("nb", idle_since="09:30")])
    assert next_change_at(loaded.snapshot, loaded.policy, loaded.now) == at_posix("10:30")
    busy = dataclasses.replace(
        loaded.snapshot,
        workloads=tuple(dataclasses.replace(w, idle_since=None) for w in loaded.snapshot.workloads),
    )
    assert next_change_at(busy, loaded.policy, loaded.now) is None


def test_the_scenario_writer_keeps_the_idle_facts() -> None:
    loaded = _loaded(
        [notebook("nb", idle_since="09:30")],
        [queue("team-a", deserved=8, idle_alert_after_s=600)],
    )
    again = scenario_from_dict(snapshot_to_dict(loaded.snapshot, loaded.policy, loaded.now))
    assert again.snapshot == loaded.snapshot


@pytest.mark.parametrize(
    ("where", "change", "message"),
    [
        ("class", {"idle_reclaim_after_s": 0}, "idle_reclaim_after_s: must be a positive"),
        ("class", {"idle_reclaim_after_s": 600}, "must be after idle_alert_after_s"),
        ("queue", {"idle_alert_after_s": -5}, "idle_alert_after_s"),
        ("workload", {"idle_since": at("06:00")}, "idle_since: before started_at"),
        ("workload", {"idle_since": at("11:00")}, "idle_since: after now"),
    ],
    ids=lambda v: str(v),
)
def test_bad_idle_facts_are_refused_naming_the_field(
    where: str, change: dict[str, Any], message: str
) -> None:
    data = scenario_dict(pool(1), [queue("team-a", deserved=8)], [notebook("nb", "09:00")])
    data["priority_classes"] = [dict(c) for c in IDLE_CLASSES]
    target = {
        "class": data["priority_classes"][2],
        "queue": data["queues"][1],
        "workload": data["workloads"][0],
    }[where]
    target.update(change)
    with pytest.raises(ScenarioError, match=message):
        scenario_from_dict(data)


def test_a_pending_workload_has_no_idle_since() -> None:
    data = scenario_dict(pool(1), [queue("team-a", deserved=8)], [workload("w", gpus=1)])
    data["workloads"][0]["idle_since"] = at("09:00")
    with pytest.raises(ScenarioError, match="only a running workload"):
        scenario_from_dict(data)


def at_posix(hhmm: str) -> float:
    """A time on the test day as POSIX seconds."""
    from gpupool.scheduler.scenario import parse_time

    return parse_time(at(hhmm))
