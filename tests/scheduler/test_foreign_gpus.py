"""GPUs other schedulers' pods hold (``NodeInfo.foreign_gpus``, DESIGN §4: "pods of other
schedulers on the same nodes count as occupied capacity").

They are taken, not gone: no gpupool pod is placed on them this cycle, the pool's share
capacity leaves them out as it leaves out what cannot be allocated, but "never fits" -- which
sets work aside with no place in line, no estimate and no pods -- is judged against the nodes'
healthy size, which counts them, since those pods end (as cordons do). The loop encoded them
as failed GPUs before, so a node full of another scheduler's pods made an 8-GPU request
"never fits" until they left.
"""

from __future__ import annotations

import pytest
from scheduler_builders import Case, node, queue, run_case, scenario, workload

from gpupool.scheduler.scenario import ScenarioError, scenario_from_dict, snapshot_to_dict
from gpupool.scheduler.types import NodeInfo, PendingExplanation, Plan

FOREIGN_ALL = tuple(range(8))


def pending(result: Plan, name: str) -> PendingExplanation:
    return next(p for p in result.pending if p.workload == name)


def test_gpus_another_scheduler_holds_are_not_placed_on() -> None:
    """n1's GPUs 4-7 are another scheduler's: a 4-GPU pod takes 0-3, a second waits behind
    it with its place in line."""
    result = run_case(
        Case(
            "foreign GPUs taken",
            [node("n1", foreign=(4, 5, 6, 7))],
            [queue("team-a", deserved=8, capability=8)],
            [
                workload("first", gpus=4, submitted="09:00"),
                workload("second", gpus=4, submitted="09:01"),
            ],
            want_admitted={"first"},
            want_reasons={"second": "behind"},
        )
    )
    (placed,) = [a for a in result.admit if a.workload == "first"]
    assert [p.gpus for p in placed.placement] == [(0, 1, 2, 3)]
    second = pending(result, "second")
    assert not second.facts.get("never_fits"), second


def test_work_only_other_schedulers_keep_out_waits_in_line_and_is_not_set_aside() -> None:
    """Both nodes are full of another scheduler's pods: an 8-GPU pod and a 16-GPU gang fit
    the pool once those pods end, so they wait (capacity, with a place in line), not "never
    fits". A pod larger than any node, and a gang larger than the pool, still never fit, and
    the sentence gives the pool's healthy size (16), not what is free today (0)."""
    result = run_case(
        Case(
            "foreign is not never",
            [node("n1", foreign=FOREIGN_ALL), node("n2", foreign=FOREIGN_ALL)],
            [queue("team-a", deserved=16, capability=64)],
            [
                workload("w1", submitted="09:00"),
                workload("w2", gpus=8, count=2, submitted="09:01"),
                workload("too-big-pod", gpus=16, submitted="09:02"),
                workload("too-big-gang", gpus=8, count=3, submitted="09:03"),
            ],
        )
    )
    assert not result.admit
    for name in ("w1", "w2"):
        explained = pending(result, name)
        assert explained.reason == "capacity", explained
        assert not explained.facts.get("never_fits"), explained
    big_pod = pending(result, "too-big-pod")
    assert big_pod.facts["never_fits"] and big_pod.facts["largest_pod_gpus"] == 8
    big_gang = pending(result, "too-big-gang")
    assert big_gang.facts["never_fits"] and big_gang.facts["healthy"] == 16
    assert "The pool has only 16 healthy h100 GPUs; 24 asked." in big_gang.detail


def test_a_failed_gpu_still_shrinks_the_node_for_never_fits() -> None:
    """The difference with failed GPUs: one failed GPU and seven of another scheduler's on
    the only node make an 8-GPU pod "never fits" (the failed one stays gone until an admin
    marks it healthy), while seven of another scheduler's alone do not."""
    failed = run_case(
        Case(
            "one failed",
            [node("n1", unhealthy=(0,), foreign=(1, 2, 3, 4, 5, 6, 7))],
            [queue("team-a", deserved=8, capability=8)],
            [workload("w", gpus=8)],
        )
    )
    assert pending(failed, "w").facts["largest_pod_gpus"] == 7
    taken = run_case(
        Case(
            "seven taken",
            [node("n1", foreign=(1, 2, 3, 4, 5, 6, 7))],
            [queue("team-a", deserved=8, capability=8)],
            [workload("w", gpus=8)],
        )
    )
    assert not pending(taken, "w").facts.get("never_fits")


def test_the_share_capacity_leaves_other_schedulers_gpus_out() -> None:
    """What gpupool may allocate now (the quota tree's pool, DRF's capacity) is the healthy
    GPUs less another scheduler's; the node's healthy size counts them."""
    held = NodeInfo("n1", "h100", 8, 0, 0, "d1", frozenset({0}), foreign_gpus=frozenset({1, 2}))
    assert (held.healthy_gpus, held.sound_gpus) == (5, 7)
    cordoned = NodeInfo("n2", "h100", 8, 0, 0, "d2", cordoned=True, foreign_gpus=frozenset({1}))
    assert (cordoned.healthy_gpus, cordoned.sound_gpus) == (0, 8)


def test_a_scenario_keeps_foreign_gpus_and_refuses_contradictions() -> None:
    """``foreign_gpus`` is read and written back; an index also listed unhealthy, one out of
    range, or a running pod placed on one is refused with its path."""
    data = scenario([node("n1", foreign=(6, 7))], [queue("team-a", deserved=8)], [])
    loaded = scenario_from_dict(data)
    (n1,) = loaded.snapshot.nodes
    assert n1.foreign_gpus == frozenset({6, 7})
    written = snapshot_to_dict(loaded.snapshot, loaded.policy, loaded.now)
    assert written["nodes"][0]["foreign_gpus"] == [6, 7]

    both = scenario([node("n1", unhealthy=(7,), foreign=(7,))], [queue("team-a")], [])
    with pytest.raises(ScenarioError, match=r"nodes\[0\]\.foreign_gpus\[0\]: GPU 7 is listed"):
        scenario_from_dict(both)
    outside = scenario([node("n1", gpus=4, foreign=(4,))], [queue("team-a")], [])
    with pytest.raises(ScenarioError, match=r"nodes\[0\]\.foreign_gpus\[0\]: must be a GPU"):
        scenario_from_dict(outside)
    placed = scenario(
        [node("n1", foreign=(3,))],
        [queue("team-a", deserved=8)],
        [workload("r", gpus=4, on=[("n1", [0, 1, 2, 3])])],
    )
    with pytest.raises(ScenarioError, match="GPU 3 of 'n1' is another scheduler's"):
        scenario_from_dict(placed)
