"""Running elastic gangs grow back (the ``grow`` phase, docs/scheduler.md phase 6).

An elastic gang (``min_member`` below its pod count) admitted with fewer pods than it has adds
its next pods, in pod-set order, once capacity frees up: only within its queue's (and every
ancestor's) deserved share, only on capacity the cycle leaves free (not held for a starving
workload, not promised to a nominated one), after every pending workload was served, and
evicting nobody. KAI's elastic workloads add workers once resources free up, and Volcano's
elastic scheduling design places a job's pods beyond its minimum last, as its lowest-priority
part; both can evict such pods one by one. Here the core evicts whole workloads, so growth
stops at the deserved share instead of borrowing.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from scheduler_builders import (
    CLASSES,
    Case,
    at,
    check_invariants,
    node,
    pool,
    queue,
    run_case,
    scenario,
    workload,
)

from gpupool.cli.subcommands.plan import explain_tables
from gpupool.scheduler import plan
from gpupool.scheduler.lifecycle import apply_plan
from gpupool.scheduler.scenario import Scenario, dump_plan, scenario_from_dict
from gpupool.scheduler.scenario import plan_to_dict as plan_json
from gpupool.scheduler.types import (
    MILLI,
    Admission,
    FlavorInfo,
    NodeInfo,
    Plan,
    PodPlacement,
    PodRef,
    PodSetInfo,
    QueueInfo,
    QuotaInfo,
)
from gpupool.simulation.queueing.events import ClusterSetup, SimJob, SimPolicy, replay_jobs

FULL = list(range(8))
HALF_A = [0, 1, 2, 3]
HALF_B = [4, 5, 6, 7]


def elastic(
    name: str,
    queue_name: str = "team-a",
    *,
    on: list[tuple[str, list[int]]],
    count: int = 4,
    **extra: Any,
) -> dict[str, Any]:
    """A running elastic gang of ``count`` 4-GPU pods, minimum 1, on the pods ``on`` gives."""
    return workload(name, queue_name, gpus=4, count=count, min_member=1, on=on, **extra)


def grown(result: Plan) -> dict[str, int]:
    """Pods added per grown workload."""
    return {growth.workload: len(growth.pod_refs) for growth in result.grow}


def nodes_of(result: Plan, name: str) -> list[str]:
    """The nodes a grown workload's added pods go to, in pod order."""
    return [
        pod.node for growth in result.grow if growth.workload == name for pod in growth.placement
    ]


def planned(case: Case) -> tuple[Scenario, Plan]:
    """Plan the case (its wants checked, the invariants too) and return the scenario with it."""
    return case.load(), run_case(case)


# -- rules ---------------------------------------------------------------------------------------


def test_an_elastic_gang_grows_into_free_capacity() -> None:
    """Two of four pods run on n1; n2 is free: the next two pods go there, in pod-set order."""
    _, result = planned(
        Case(
            "grows",
            pool(2),
            [queue("team-a", deserved=16)],
            [elastic("el", on=[("n1", HALF_A), ("n1", HALF_B)])],
        )
    )
    assert grown(result) == {"el": 2}
    growth = result.grow[0]
    assert growth.pod_refs == (PodRef(0, 2), PodRef(0, 3))
    assert nodes_of(result, "el") == ["n2", "n2"]
    assert growth.backfill_for is None and growth.budget_reservation == 0.0


def test_growth_stops_at_the_deserved_share_and_never_borrows() -> None:
    """Deserved 12 of a capability of 32: one pod more (8 -> 12 GPUs), though n2 has room
    for two and the capability would allow them."""
    _, result = planned(
        Case(
            "stops at deserved",
            pool(2),
            [queue("team-a", deserved=12, capability=32)],
            [elastic("el", on=[("n1", HALF_A), ("n1", HALF_B)])],
        )
    )
    assert grown(result) == {"el": 1}


def test_a_queue_at_its_deserved_share_does_not_grow() -> None:
    """Already at its deserved share (borrowing room left): nothing added."""
    _, result = planned(
        Case(
            "at deserved",
            pool(2),
            [queue("team-a", deserved=8, capability=32)],
            [elastic("el", on=[("n1", HALF_A), ("n1", HALF_B)])],
        )
    )
    assert result.grow == ()


def test_growth_keeps_every_ancestor_within_its_deserved_share() -> None:
    """team-a is within its own share, but its org is at its share (team-b borrows inside
    the org): the gang does not grow, since the org would then be above its share."""
    _, result = planned(
        Case(
            "ancestor at deserved",
            pool(3),
            [
                queue("org", deserved=12, capability=24),
                queue("team-a", deserved=8, capability=24, parent="org"),
                queue("team-b", deserved=4, capability=24, parent="org"),
            ],
            [
                elastic("el", "team-a", on=[("n1", HALF_A)]),
                workload("b1", "team-b", on=[("n2", FULL)]),
            ],
        )
    )
    assert result.grow == ()


def test_growth_never_takes_nodes_held_for_a_starving_workload() -> None:
    """A starving gang of two whole nodes holds the two nodes closest to fitting it (n1 with
    four free GPUs, n2 with eight): the elastic gang on n1 does not grow onto either."""
    nodes = pool(3)
    case = Case(
        "hold",
        nodes,
        [queue("team-a", deserved=16), queue("team-b", deserved=24)],
        [
            elastic("el", on=[("n1", HALF_A)]),
            workload("busy", "team-b", on=[("n3", FULL)], started="06:00"),
            workload("big", "team-b", count=2, submitted="06:00"),
        ],
        policy={"placement": "gpupool", "starvation_limit_s": 600},
        want_reasons={"big": "capacity"},
    )
    _, result = planned(case)
    big = next(p for p in result.pending if p.workload == "big")
    assert big.facts.get("holding_capacity") is True
    assert set(big.facts["held_nodes"]) == {"n1", "n2"}  # type: ignore[arg-type]
    assert result.grow == ()
    # Without the starvation limit nothing is held, and the gang grows.
    free = dataclasses.replace(case, policy={"placement": "gpupool"}, want_reasons={})
    assert grown(run_case(free)) == {"el": 3}


def test_growth_never_takes_capacity_promised_to_a_nominated_workload() -> None:
    """A nominated preemptor whose victim still leaves n2 keeps n2's free half: the gang
    grows only on n1 (one pod), not onto n2."""
    _, result = planned(
        Case(
            "promise",
            pool(2),
            [queue("team-a", deserved=32), queue("team-b", deserved=8)],
            [
                elastic("el", on=[("n1", HALF_A)]),
                workload("v", "team-b", gpus=4, on=[("n2", HALF_A)], evicting_for="pre"),
                workload("pre", "team-b", gpus=8, nominated=True),
            ],
            want_reasons={"pre": "waiting-for-preemption"},
        )
    )
    assert grown(result) == {"el": 1}
    assert nodes_of(result, "el") == ["n1"]


def test_a_domain_gang_grows_only_inside_its_domain() -> None:
    """n1, n2 are domain d1 and n3, n4 d2: the gang on n1 adds one pod on n2 and stops, though
    d2 is free (its pods stay the first ones in pod-set order)."""
    _, result = planned(
        Case(
            "domain",
            pool(4, gpus=4, domain_size=2),
            [queue("team-a", deserved=32)],
            [elastic("el", on=[("n1", HALF_A)], topology="domain")],
        )
    )
    assert grown(result) == {"el": 1}
    assert nodes_of(result, "el") == ["n2"]


def test_a_domain_gang_whose_domain_is_full_does_not_grow() -> None:
    """Its domain is full: nothing, while a gang with no topology takes d2."""
    nodes = pool(4, gpus=4, domain_size=2)
    workloads = [workload("other", gpus=4, on=[("n2", HALF_A)])]
    bound = Case(
        "domain full",
        nodes,
        [queue("team-a", deserved=32)],
        [*workloads, elastic("el", on=[("n1", HALF_A)], topology="domain")],
    )
    assert run_case(bound).grow == ()
    loose = dataclasses.replace(bound, workloads=[*workloads, elastic("el", on=[("n1", HALF_A)])])
    assert nodes_of(run_case(loose), "el") == ["n3", "n4"]


def test_a_preferred_gang_grows_in_its_domain_first() -> None:
    """The gang runs on m1 (domain dm); n1 (domain dn) has four free GPUs, the placer's
    cheaper node where 8-GPU pods are common: a ``preferred`` gang's next pod still goes to
    m2 in its own domain, while a gang with no topology takes n1."""
    nodes = [
        node("n1", domain="dn"),
        node("m1", domain="dm"),
        node("m2", domain="dm"),
        node("x1", domain="dx"),
        node("x2", domain="dx"),
    ]
    others = [
        workload("other", gpus=4, on=[("n1", HALF_A)]),
        workload("big1", on=[("x1", FULL)]),
        workload("big2", on=[("x2", FULL)]),
    ]

    def gang(**extra: Any) -> dict[str, Any]:
        return elastic("el", count=3, on=[("m1", HALF_A), ("m1", HALF_B)], **extra)

    queues = [queue("team-a", deserved=64)]
    preferred = run_case(Case("preferred", nodes, queues, [*others, gang(topology="preferred")]))
    assert nodes_of(preferred, "el") == ["m2"]
    assert nodes_of(run_case(Case("spread", nodes, queues, [*others, gang()])), "el") == ["n1"]


def test_pending_work_is_served_before_growth() -> None:
    """One free node: another queue's pending job takes it; the gang, within its share and
    served before by no order, adds nothing (without that job it takes the node)."""
    case = Case(
        "pending first",
        pool(2),
        [queue("team-a", deserved=16), queue("team-b", deserved=8)],
        [
            elastic("el", on=[("n1", HALF_A), ("n1", HALF_B)]),
            workload("w1", "team-b"),
        ],
        want_admitted={"w1"},
    )
    _, result = planned(case)
    assert result.grow == ()
    alone = dataclasses.replace(case, workloads=case.workloads[:1], want_admitted=set())
    assert grown(run_case(alone)) == {"el": 2}


def test_the_queue_with_the_smaller_dominant_share_grows_first() -> None:
    """Room for one pod (n2's second half): the gang of the queue using less of the pool gets
    it, whichever queue's name comes first (allocate's order: the smallest dominant share)."""
    queues = [queue("team-a", deserved=16), queue("team-b", deserved=16)]
    heavier_a = run_case(
        Case(
            "team-a holds more",
            pool(2),
            queues,
            [
                elastic("a", on=[("n1", HALF_A), ("n1", HALF_B)]),
                elastic("b", "team-b", on=[("n2", HALF_A)]),
            ],
        )
    )
    assert grown(heavier_a) == {"b": 1}
    heavier_b = run_case(
        Case(
            "team-b holds more",
            pool(2),
            queues,
            [
                elastic("a", on=[("n1", HALF_A)]),
                elastic("b", "team-b", on=[("n1", HALF_B), ("n2", HALF_A)]),
            ],
        )
    )
    assert grown(heavier_b) == {"a": 1}


def test_within_a_queue_higher_priority_then_earlier_start_grows_first() -> None:
    """Room for one pod: of two gangs of one queue the higher-priority one grows; at equal
    priority, the one that started earlier."""
    two = [
        elastic("early", on=[("n1", HALF_A)], started="07:00"),
        elastic("late", on=[("n1", HALF_B)], started="08:00", priority="low"),
        workload("filler", gpus=4, on=[("n2", HALF_A)]),
    ]
    by_priority = run_case(Case("priority", pool(2), [queue("team-a", deserved=16)], two))
    assert grown(by_priority) == {"early": 1}
    raised = [two[0], {**two[1], "priority_class": "normal"}, two[2]]
    by_start = run_case(Case("start", pool(2), [queue("team-a", deserved=16)], raised))
    assert grown(by_start) == {"early": 1}
    later = [{**two[0], "started_at": at("08:30")}, raised[1], two[2]]
    assert grown(run_case(Case("start 2", pool(2), [queue("team-a", deserved=16)], later))) == {
        "late": 1
    }


@pytest.mark.parametrize(
    "extra",
    [{"leaving": True}, {"evicting_for": "pre"}, {"backfilled_for": "pre"}],
    ids=["leaving", "evicting", "backfilled-on-a-hold"],
)
def test_a_leaving_evicted_or_backfilled_gang_does_not_grow(extra: dict[str, Any]) -> None:
    """Being evicted, or placed by backfill on a hold that may take it back: nothing added."""
    result = run_case(
        Case(
            "not a candidate",
            pool(3),
            [queue("team-a", deserved=32), queue("team-b", deserved=8)],
            [
                elastic("el", on=[("n1", HALF_A)], **extra),
                workload("pre", "team-b", gpus=8, nominated="evicting_for" in extra),
            ],
        )
    )
    assert "el" not in grown(result)


def test_a_victim_of_this_cycle_does_not_grow() -> None:
    """The gang is preempted in this cycle for higher-priority work of its queue: it is not
    grown, though the cycle leaves a node free."""
    result = run_case(
        Case(
            "victim",
            pool(3),
            [queue("team-a", deserved=24)],
            [
                elastic("el", on=[("n1", HALF_A), ("n1", HALF_B)], priority="low"),
                workload("busy", on=[("n2", FULL)], started="06:00", protected_s=36000),
                workload("other", on=[("n3", FULL)], started="06:00", protected_s=36000),
                workload("urgent", priority="high", count=1),
            ],
            budgets=[{"tenant": "team-a", "priority_class": "high", "gpu_hours": 100}],
            want_evicted={"el": "preempt"},
        )
    )
    assert result.grow == ()


def test_an_idle_alerted_gang_does_not_grow() -> None:
    """A gang whose GPUs sit idle past its alert timeout gets no more of them."""
    data = scenario(
        pool(2),
        [queue("team-a", deserved=16)],
        [elastic("el", on=[("n1", HALF_A)], idle_since=at("09:00"))],
    )
    alerting = [{**c, "idle_alert_after_s": 600} if c["name"] == "normal" else c for c in CLASSES]
    loaded = scenario_from_dict({**data, "priority_classes": alerting})
    result = plan(loaded.snapshot, loaded.policy, loaded.now)
    check_invariants(loaded, result)
    assert [a.workload for a in result.idle_alerts] == ["el"]
    assert result.grow == ()
    quiet = scenario_from_dict(data)  # the classes alert about nothing: it grows
    assert grown(plan(quiet.snapshot, quiet.policy, quiet.now)) == {"el": 3}


def test_a_policy_without_the_grow_phase_does_not_grow() -> None:
    """The phase is in the default phases; a policy that names phases without it: nothing."""
    case = Case(
        "no phase",
        pool(2),
        [queue("team-a", deserved=16)],
        [elastic("el", on=[("n1", HALF_A)])],
        policy={"phases": ["idle", "enqueue", "allocate", "preempt", "reclaim", "backfill"]},
    )
    assert run_case(case).grow == ()
    assert grown(run_case(dataclasses.replace(case, policy=None))) == {"el": 3}


# -- applying a plan, the plan's JSON and the CLI -------------------------------------------------


def test_apply_plan_extends_a_grown_workloads_placement() -> None:
    """The grown gang keeps running from its start, its placement now its first four pods."""
    loaded, result = planned(
        Case("apply", pool(2), [queue("team-a", deserved=16)], [elastic("el", on=[("n1", HALF_A)])])
    )
    after = apply_plan(loaded.snapshot, result, loaded.now)
    before = next(w for w in loaded.snapshot.workloads if w.name == "el")
    now = next(w for w in after.workloads if w.name == "el")
    assert now.state == "running" and now.started_at == before.started_at
    assert now.placement == before.placement + result.grow[0].placement
    assert len(now.placement) == 4
    # The next cycle has nothing left to add.
    assert plan(after, loaded.policy, loaded.now).grow == ()


def test_apply_plan_refuses_a_growth_it_cannot_carry_out() -> None:
    """Growing a pending workload, growing one the plan admits too, or adding pods out of
    pod-set order is refused."""
    loaded = Case(
        "refuse",
        pool(2),
        [queue("team-a", deserved=16)],
        [elastic("el", on=[("n1", HALF_A)]), workload("w1")],
    ).load()
    pod = PodPlacement("n2", (0, 1, 2, 3))
    with pytest.raises(ValueError, match="cannot grow 'w1'"):
        apply_plan(loaded.snapshot, _plan(grow=(Admission("w1", (pod,), (PodRef(0, 0),)),)), 0.0)
    skipped = Admission("el", (pod,), (PodRef(0, 2),))
    with pytest.raises(ValueError, match="next ones in pod-set order"):
        apply_plan(loaded.snapshot, _plan(grow=(skipped,)), 0.0)
    twice = Admission("el", (pod,), (PodRef(0, 1),))
    with pytest.raises(ValueError, match="also admits or evicts"):
        apply_plan(loaded.snapshot, _plan(admit=(twice,), grow=(twice,)), 0.0)
    with pytest.raises(ValueError, match="does not hold"):
        apply_plan(loaded.snapshot, _plan(grow=(Admission("gone", (pod,), (PodRef(0, 0),)),)), 0.0)


def test_the_plan_json_and_the_cli_show_grown_workloads() -> None:
    """``grow`` in the JSON (only when something grows), a "Grown (n)" table in --explain."""
    loaded, result = planned(
        Case("json", pool(2), [queue("team-a", deserved=16)], [elastic("el", on=[("n1", HALF_A)])])
    )
    placement = [{"node": pod.node, "gpus": list(pod.gpus)} for pod in result.grow[0].placement]
    assert len(placement) == 3
    assert plan_json(result)["grow"] == [{"workload": "el", "placement": placement}]
    assert '"grow"' in dump_plan(result)
    tables = explain_tables(loaded, result)
    assert "Grown (1)" in tables
    assert "1 -> 4" in tables
    assert "grow" not in plan_json(dataclasses.replace(result, grow=()))
    check_invariants(loaded, result)


def test_the_trace_replay_grows_a_running_elastic_job() -> None:
    """The replay carries out ``plan.grow``: an elastic job started with two of its four pods
    holds all four once the blocker ends, and still ends when its run time is done."""
    cluster = ClusterSetup(
        flavors=(FlavorInfo("v100"),),
        nodes=(NodeInfo("n1", "v100", 8, 64_000, 512 * 1024, "d1"),),
        queues=(
            QueueInfo("root", None),
            QueueInfo("a", "root", quota={"v100": QuotaInfo(0, 8 * MILLI, 8 * MILLI)}),
        ),
    )
    one = (PodSetInfo(count=1, gpus=4, flavors=("v100",)),)
    four = (PodSetInfo(count=4, gpus=2, flavors=("v100",)),)
    jobs = [
        SimJob("a-blocker", "a", one, submitted_at=0.0, duration_s=100.0),
        SimJob("a-elastic", "a", four, submitted_at=1.0, duration_s=300.0, min_member=1),
    ]
    outcome = replay_jobs(jobs, cluster, SimPolicy("default"))
    elastic_job = next(r for r in outcome.records if r.job.name == "a-elastic")
    assert elastic_job.first_started_at == 1.0 and elastic_job.finished_at == 301.0
    held = [(s.start, s.end, s.gpus) for s in outcome.segments if s.end > 1.0 and s.start >= 1.0]
    assert held == [(1.0, 100.0, 4.0), (100.0, 301.0, 8.0)]


def _plan(admit: tuple[Admission, ...] = (), grow: tuple[Admission, ...] = ()) -> Plan:
    """A hand-made plan that admits and grows as given."""
    return Plan(admit=admit, evict=(), pending=(), grow=grow)
