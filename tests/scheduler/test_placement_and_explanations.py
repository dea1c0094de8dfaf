"""Placement choices, explanation facts, queue positions, estimated starts and dry-runs."""

from __future__ import annotations

from typing import Any

from scheduler_builders import node, pool, queue, scenario, workload

from gpupool.scheduler import plan
from gpupool.scheduler.estimate import dry_run, estimate_starts
from gpupool.scheduler.scenario import Scenario, parse_time, scenario_from_dict
from gpupool.scheduler.types import Plan, PodRef


def planned(
    nodes: list[dict[str, Any]],
    queues: list[dict[str, Any]],
    workloads: list[dict[str, Any]],
    **extra: Any,
) -> tuple[Scenario, Plan]:
    """Load a scenario and plan it."""
    loaded = scenario_from_dict(scenario(nodes, queues, workloads, **extra))
    return loaded, plan(loaded.snapshot, loaded.policy, loaded.now)


def test_a_small_pod_goes_where_it_does_not_break_a_whole_node() -> None:
    """FGD: the 1-GPU pod takes n2's last GPU, so the 8-GPU workload still finds n1 whole."""
    _, result = planned(
        pool(2),
        [queue("team-a", deserved=16)],
        [
            workload("r1", gpus=7, on=[("n2", list(range(7)))]),
            workload("small", gpus=1, submitted="08:00"),
            workload("big", gpus=8, submitted="09:00"),
        ],
    )
    where = {a.workload: [pod.node for pod in a.placement] for a in result.admit}
    assert where == {"small": ["n2"], "big": ["n1"]}


def test_the_bestfit_policy_also_packs() -> None:
    """The best-fit baseline leaves the least free capacity on the chosen node."""
    _, result = planned(
        pool(2),
        [queue("team-a", deserved=16)],
        [workload("r1", gpus=6, on=[("n1", [0, 1, 2, 3, 4, 5])]), workload("w1", gpus=2)],
        policy={"placement": "bestfit"},
    )
    assert result.admit[0].placement[0].node == "n1"


def test_shared_fractions_are_placed_on_specific_gpus_with_their_milli() -> None:
    """A 470-milli pod lands on the one GPU with room for it, named in the plan."""
    _, result = planned(
        [node("s1", gpus=2, flavor="l4s")],
        [queue("team-a", deserved=2, flavor="l4s")],
        [
            workload("r0", gpus=1, flavor="l4s", gpu_milli=600, on=[("s1", [0])]),
            workload("r1", gpus=1, flavor="l4s", gpu_milli=530, on=[("s1", [1])]),
            workload("w1", gpus=1, flavor="l4s", gpu_milli=470),
        ],
    )
    pod = result.admit[0].placement[0]
    assert (pod.node, pod.gpus, pod.milli) == ("s1", (1,), 470)


def test_an_elastic_gang_runs_with_the_pods_that_fit() -> None:
    """min_member 2 of 3 pods of 4 GPUs on one 8-GPU node: two pods run."""
    _, result = planned(
        pool(1),
        [queue("team-a", deserved=16)],
        [workload("w1", gpus=4, count=3, min_member=2)],
    )
    assert len(result.admit[0].placement) == 2
    assert result.admit[0].pod_refs == (PodRef(0, 0), PodRef(0, 1))


def test_an_admission_names_the_pod_set_and_index_of_every_pod() -> None:
    """Two pod sets of different shapes: each placed pod says which pod it is."""
    gang = workload("w1")
    gang["pod_sets"] = [
        {"count": 2, "gpus": 4, "flavor": "h100", "cpu": 8},
        {"count": 1, "gpus": 0, "cpu": 4},
        {"count": 2, "gpus": 1, "flavor": "h100"},
    ]
    loaded, result = planned(pool(2), [queue("team-a", deserved=16)], [gang])
    (admission,) = result.admit
    assert admission.pod_refs == tuple(
        PodRef(pod_set, index) for pod_set, count in enumerate((2, 1, 2)) for index in range(count)
    )
    pod_sets = loaded.snapshot.workloads[0].pod_sets
    for pod, ref in zip(admission.placement, admission.pod_refs, strict=True):
        assert len(pod.gpus) == pod_sets[ref.pod_set].gpus


def test_a_hold_for_a_starving_gang_keeps_others_off_its_node() -> None:
    """The starving 8-GPU workload holds n1; a smaller protected one goes to n2 instead."""
    _, result = planned(
        pool(2),
        [queue("team-a", deserved=32)],
        [
            workload("r1", gpus=4, on=[("n1", [0, 1, 2, 3])]),
            workload("r2", gpus=4, on=[("n2", [0, 1, 2, 3])]),
            workload("big", submitted="05:00"),
            workload("small", gpus=2, protected_s=600),
        ],
        policy={"placement": "gpupool", "starvation_limit_s": 3600},
    )
    assert [p.node for p in result.admit[0].placement] == ["n2"]
    big = next(p for p in result.pending if p.workload == "big")
    assert big.facts.get("holding_capacity") is True


def test_quota_explanation_names_queue_flavor_asked_and_available() -> None:
    """The quota reason carries the numbers behind it and a sentence."""
    _, result = planned(
        pool(2),
        [queue("team-a", deserved=8, capability=12), queue("team-b", deserved=8)],
        [workload("r1", gpus=8, on=[("n1", list(range(8)))]), workload("w1")],
    )
    (pending,) = result.pending
    assert pending.reason == "quota"
    assert pending.facts["queue"] == "team-a"
    assert pending.facts["flavor"] == "h100"
    assert pending.facts["asked_gpus"] == 8
    assert pending.facts["available_gpus"] == 4
    assert pending.facts["borrowing_capped"] is True
    assert "team-a" in pending.detail and "4" in pending.detail


def test_quota_room_taken_by_other_queues_reads_behind_with_the_quota_facts() -> None:
    """Room team-a could borrow when the cycle began, taken by team-b's work served first:
    ``behind`` on quota, with capacity-``behind``'s facts and the position; the decision (not
    admitted, 8 GPUs left free) is the one ``quota`` gave."""
    _, result = planned(
        pool(2),
        [
            queue("team-a", deserved=4, capability=16),
            queue("team-b", deserved=4, capability=16),
            queue("team-c", deserved=8, capability=16, lending_limit=0),
        ],
        [
            workload("a-run", gpus=4, on=[("n1", [0, 1, 2, 3])]),
            workload("a1", gpus=4, submitted="08:00"),
            workload("a2", gpus=2, submitted="08:30"),
            workload("b1", gpus=4, queue="team-b", submitted="09:00"),
        ],
    )
    assert {a.workload for a in result.admit} == {"b1"}
    pending = {p.workload: p for p in result.pending}
    first = pending["a1"]
    assert first.reason == "behind"
    assert first.facts == {
        "queue": "team-a",
        "flavor": "h100",
        "resource": "quota",
        "asked": 4,
        "free": 0,
    }
    assert first.position == 1
    assert first.detail == (
        "Work of other queues, served first, took the quota room it could use this cycle "
        "(queue team-a had it when the cycle began): 0 h100 GPUs of quota left, 4 asked; "
        "position 1 in queue team-a."
    )
    assert (pending["a2"].reason, pending["a2"].position) == ("behind", 2)


def test_fragmentation_explanation_gives_the_largest_placeable_gang() -> None:
    """Three 8-GPU pods, one whole free node: at most one pod fits."""
    _, result = planned(
        pool(3),
        [queue("team-a", deserved=24)],
        [
            workload("r1", gpus=4, on=[("n1", [0, 1, 2, 3])]),
            workload("r2", gpus=4, on=[("n2", [0, 1, 2, 3])]),
            workload("w1", count=2),
        ],
    )
    (pending,) = result.pending
    assert pending.reason == "fragmentation"
    assert pending.facts["largest_placeable"] == 1
    assert pending.detail == (
        "16 h100 GPUs are free in all, but no set of nodes holds the gang: at most 1 of its "
        "2 pods fits (minimum 2)."
    )


def test_a_lone_pod_that_no_node_holds_is_not_told_of_a_gang() -> None:
    """One 8-GPU pod, two half-full nodes: 8 GPUs free in all, none whole. Its sentence said
    "no set of nodes holds the gang: at most 0 of its 1 pods fit"."""
    _, result = planned(
        pool(2),
        [queue("team-a", deserved=16)],
        [
            workload("r1", gpus=4, on=[("n1", [0, 1, 2, 3])]),
            workload("r2", gpus=4, on=[("n2", [0, 1, 2, 3])]),
            workload("w1"),
        ],
    )
    (pending,) = result.pending
    assert pending.reason == "fragmentation" and "gpu_share" not in pending.facts
    assert pending.detail == (
        "8 h100 GPUs are free in all, but no node has room for its pod with its CPU and memory."
    )


def test_a_share_of_a_gpu_that_no_gpu_has_free_says_its_share() -> None:
    """Two shared GPUs with 0.5 free each: 1 GPU free in all, but a pod asking 0.8 of one GPU
    fits on neither."""
    _, result = planned(
        [node("s1", gpus=2, flavor="l4s")],
        [queue("team-a", deserved=2, flavor="l4s")],
        [
            workload("r1", gpus=1, flavor="l4s", gpu_milli=500, on=[("s1", [0])]),
            workload("r2", gpus=1, flavor="l4s", gpu_milli=500, on=[("s1", [1])]),
            workload("w1", gpus=1, flavor="l4s", gpu_milli=800),
        ],
    )
    (pending,) = result.pending
    assert pending.reason == "fragmentation" and pending.facts["gpu_share"] == 0.8
    assert pending.detail == (
        "1 l4s GPU is free in all, but no node has room for its pod (0.8 of one GPU) with its "
        "CPU and memory."
    )


def test_positions_follow_the_queue_order() -> None:
    """Pending workloads of one queue are numbered 1, 2, 3 in rank order."""
    _, result = planned(
        pool(1),
        [queue("team-a", deserved=8)],
        [
            workload("r1", on=[("n1", list(range(8)))]),
            workload("late", submitted="09:30"),
            workload("early", submitted="08:00"),
            workload("vip", priority="interactive", submitted="09:50"),
        ],
    )
    positions = {p.workload: p.position for p in result.pending}
    assert positions == {"vip": 1, "early": 2, "late": 3}


def test_every_pending_workload_gets_exactly_one_explanation() -> None:
    """The plan's pending list has each not-admitted workload once, sorted by name."""
    _, result = planned(
        pool(1),
        [queue("team-a", deserved=8)],
        [workload(f"w{i}", gpus=4, submitted=f"08:0{i}") for i in range(5)],
    )
    names = [p.workload for p in result.pending]
    assert names == sorted(names) == ["w2", "w3", "w4"]


def test_an_estimated_start_replays_expected_ends() -> None:
    """The queued workload starts when the running one is expected to end."""
    loaded = scenario_from_dict(
        scenario(
            pool(1),
            [queue("team-a", deserved=8)],
            [
                workload("r1", on=[("n1", list(range(8)))], expected_runtime_s=3 * 3600),
                workload("next", submitted="08:00"),
                workload("after", submitted="09:00", expected_runtime_s=3600),
            ],
        )
    )
    starts = estimate_starts(loaded.snapshot, loaded.policy, loaded.now)
    assert starts["next"] == parse_time("2026-11-29T11:00:00Z")
    assert starts["after"] is None  # "next" declares no runtime: nothing tells when it ends


def test_dry_run_names_the_first_layer_that_fails() -> None:
    """Quota passes, capacity exists, but no placement exists: placement is named."""
    loaded = scenario_from_dict(
        scenario(
            pool(2),
            [queue("team-a", deserved=16)],
            [
                workload("r1", gpus=4, on=[("n1", [0, 1, 2, 3])]),
                workload("r2", gpus=4, on=[("n2", [0, 1, 2, 3])]),
            ],
        )
    )
    probe = scenario_from_dict(
        scenario(pool(1), [queue("team-a", deserved=16)], [workload("probe")])
    ).snapshot.workloads[0]
    answer = dry_run(loaded.snapshot, loaded.policy, loaded.now, probe)
    assert [(layer.layer, layer.passes) for layer in answer.layers] == [
        ("quota", True),
        ("capacity", True),
        ("placement", False),
    ]
    assert answer.first_failure == "placement"
    small = scenario_from_dict(
        scenario(pool(1), [queue("team-a", deserved=16)], [workload("p2", gpus=2)])
    ).snapshot.workloads[0]
    assert dry_run(loaded.snapshot, loaded.policy, loaded.now, small).first_failure is None


def test_protected_runtime_defaults_from_the_queue() -> None:
    """A workload that declares none gets its queue's default protected runtime."""
    loaded = scenario_from_dict(
        scenario(
            pool(1),
            [queue("team-a", deserved=8, default_protected_runtime_s=900)],
            [{**workload("w1"), "protected_runtime_s": None}, workload("w2", protected_s=60)],
        )
    )
    runtimes = {w.name: w.protected_runtime_s for w in loaded.snapshot.workloads}
    assert runtimes == {"w1": 900, "w2": 60}


def test_equal_gangs_of_two_queues_each_name_their_own_queue() -> None:
    """A failure remembered for one gang shape is reported with each workload's own queue."""
    _, result = planned(
        pool(2),
        [queue("team-a", deserved=8, capability=16), queue("team-b", deserved=8, capability=16)],
        [
            workload("r1", gpus=4, on=[("n1", [0, 1, 2, 3])]),
            workload("r2", "team-b", gpus=4, on=[("n2", [0, 1, 2, 3])]),
            workload("a1", submitted="08:00"),
            workload("b1", "team-b", submitted="08:30"),
        ],
    )
    facts = {p.workload: (p.reason, p.facts.get("queue")) for p in result.pending}
    assert facts == {"a1": ("fragmentation", "team-a"), "b1": ("fragmentation", "team-b")}


def test_work_kept_off_held_nodes_names_the_starving_workload() -> None:
    """'behind' says which starving workload the capacity is held for."""
    _, result = planned(
        pool(1),
        [queue("team-a", deserved=16)],
        [
            workload("r1", gpus=4, on=[("n1", [0, 1, 2, 3])]),
            workload("big", submitted="05:00"),
            workload("small", gpus=2, protected_s=600),
        ],
        policy={"placement": "gpupool", "starvation_limit_s": 3600},
    )
    small = next(p for p in result.pending if p.workload == "small")
    assert (small.reason, small.facts.get("held_for")) == ("behind", "big")
    assert "big" in small.detail


def test_budget_explanation_tells_the_class_and_what_then_stopped_it() -> None:
    """Out of budget: the sentence names the class, the budget, and the next layer's reason."""
    _, result = planned(
        pool(1),
        [queue("team-a", deserved=8)],
        [workload("old", on=[("n1", list(range(8)))]), workload("urgent", priority="high")],
        budgets=[{"tenant": "team-a", "priority_class": "high", "gpu_hours": 10, "used": 10}],
    )
    (pending,) = result.pending
    assert pending.reason == "budget"
    assert pending.facts["then"] == "quota"
    assert "Out of high budget" in pending.detail
    assert "default class" in pending.detail and "quota available" in pending.detail
