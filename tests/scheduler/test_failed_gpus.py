"""A failed GPU never stops planning (issue 13, item 7).

Failed GPUs and cordoned nodes can leave the pool's healthy GPUs short of the guarantees
configured on it. The snapshot is still planned: the quota tree holds the guarantees scaled
down in proportion to what backs them (``quota.scale_guarantees``), the quota checks use
those, and pending work in an affected queue is told so.
"""

from __future__ import annotations

from typing import Any

from scheduler_builders import check_invariants, pool, queue, scenario, workload

from gpupool.scheduler import plan
from gpupool.scheduler.quota import QuotaTree, guarantee_groups, scale_guarantees
from gpupool.scheduler.scenario import Scenario, scenario_from_dict
from gpupool.scheduler.types import MILLI, Plan, QueueInfo, QuotaInfo


def two_teams_filling(guarantee: int) -> list[dict[str, Any]]:
    """Two teams whose guarantees together were the whole pool."""
    return [
        queue("team-a", deserved=guarantee, capability=2 * guarantee, guarantee=guarantee),
        queue("team-b", deserved=guarantee, capability=2 * guarantee, guarantee=guarantee),
    ]


def planned(data: dict[str, Any]) -> tuple[Scenario, Plan]:
    """Load, plan and check the invariants."""
    loaded = scenario_from_dict(data)
    result = plan(loaded.snapshot, loaded.policy, loaded.now)
    check_invariants(loaded, result)
    return loaded, result


def test_one_failed_gpu_under_guarantees_that_filled_the_pool_still_plans() -> None:
    """16 GPUs guaranteed 8 + 8, one GPU fails: team-b's 8-GPU job runs on the whole node,
    and team-a's job, which cannot fit, is told its guarantee is scaled to 7.5 of 15."""
    nodes = pool(2)
    nodes[0]["unhealthy_gpus"] = [3]
    data = scenario(
        nodes,
        two_teams_filling(8),
        [
            workload("running", queue="team-a", gpus=4, on=[("n1", [0, 1, 2, 4])]),
            workload("wa", queue="team-a", gpus=8),
            workload("wb", queue="team-b", gpus=8),
        ],
    )
    _, result = planned(data)
    assert [a.workload for a in result.admit] == ["wb"]
    (pending,) = result.pending
    assert pending.workload == "wa"
    assert pending.facts["scaled_guarantee"] == {
        "queue": "team-a",
        "flavor": "h100",
        "guarantee_gpus": 8.0,
        "scaled_gpus": 7.5,
        "backed_by": None,
        "backing_gpus": 15.0,
        "guaranteed_gpus": 16.0,
    }
    assert pending.detail.endswith(
        "Queue team-a's guarantee of 8 h100 GPUs is scaled down to 7.5 while the pool's 15 "
        "healthy h100 GPUs cannot back the 16 guaranteed."
    )


def test_a_cordoned_node_under_guarantees_that_filled_the_pool_still_plans() -> None:
    """24 GPUs guaranteed 12 + 12, a node cordoned: each team is guaranteed 8 of the 16 left,
    and a job that fits is admitted on the schedulable nodes only."""
    nodes = pool(3)
    nodes[2]["cordoned"] = True
    data = scenario(
        nodes,
        two_teams_filling(12),
        [
            workload("wa", queue="team-a", gpus=8),
            workload("wa-more", queue="team-a", gpus=8, submitted="09:10"),
            workload("wb", queue="team-b", gpus=8),
        ],
    )
    _, result = planned(data)
    assert {a.workload for a in result.admit} == {"wa", "wb"}
    assert {pod.node for a in result.admit for pod in a.placement} == {"n1", "n2"}
    (pending,) = result.pending
    assert pending.workload == "wa-more"
    scaled = pending.facts["scaled_guarantee"]
    assert isinstance(scaled, dict)
    assert (scaled["scaled_gpus"], scaled["backing_gpus"]) == (8.0, 16.0)


def test_work_in_a_queue_without_a_scaled_guarantee_is_not_told_about_scaling() -> None:
    """Only a guarantee scaled down on the workload's own path is mentioned: team-c holds
    none, so its job's explanation says nothing of team-a's and team-b's."""
    nodes = pool(2)
    nodes[0]["unhealthy_gpus"] = [0]
    queues = [*two_teams_filling(8), queue("team-c", deserved=0, capability=16)]
    _, result = planned(scenario(nodes, queues, [workload("wc", queue="team-c", gpus=8)]))
    (pending,) = result.pending
    assert pending.reason == "quota"
    assert "scaled_guarantee" not in pending.facts and "scaled" not in pending.detail


def test_scaled_guarantees_are_what_the_quota_checks_use() -> None:
    """org-a's teams were guaranteed 4 + 4 of its 8; with half the pool cordoned, org-a is
    guaranteed 4 and each team 2, so a1 may borrow its sister's idle share up to 6 GPUs (held
    back at 4 if a2 kept its full guarantee) -- no queue is promised more than exists."""
    nodes = pool(2)
    nodes[1]["cordoned"] = True
    queues = [
        queue("org-a", deserved=8, capability=16, guarantee=8),
        queue("a1", deserved=4, capability=16, guarantee=4, parent="org-a"),
        queue("a2", deserved=4, capability=16, guarantee=4, parent="org-a"),
        queue("org-b", deserved=8, capability=16, guarantee=8),
    ]
    loaded, result = planned(scenario(nodes, queues, [workload("big", queue="a1", gpus=6)]))
    assert [a.workload for a in result.admit] == ["big"]
    tree = QuotaTree(loaded.snapshot.queues, {"h100": 8 * MILLI})
    held = {name: tree.queues[name].quota["h100"].guarantee for name in ("org-a", "a1", "a2")}
    assert held == {"org-a": 4 * MILLI, "a1": 2 * MILLI, "a2": 2 * MILLI}
    assert tree.available("a1", "h100") == 6 * MILLI


def levels(guarantee: int) -> dict[str, QuotaInfo]:
    """One h100 quota entry with this guarantee (milli-GPU), deserved and capability alike."""
    return {"h100": QuotaInfo(guarantee, guarantee, guarantee)}


def test_guarantees_are_scaled_in_proportion_and_rounded_so_the_sum_fits() -> None:
    """4 + 4 + 4 GPUs on 11 healthy: 11 x 4 / 12 = 3.666.. each; the two milli-GPU left over
    by rounding down go to the largest remainders, ties by name."""
    queues = (
        QueueInfo("root", None),
        *(QueueInfo(name, "root", quota=levels(4 * MILLI)) for name in ("c", "b", "a")),
    )
    scaled = scale_guarantees(queues, {"h100": 11 * MILLI})
    assert {name: s.scaled for (name, _), s in scaled.items()} == {
        "a": 3667,
        "b": 3667,
        "c": 3666,
    }
    assert sum(s.scaled for s in scaled.values()) == 11 * MILLI


def test_guarantees_that_fit_are_left_as_they_are() -> None:
    """A group that fits what backs it keeps its guarantees, even under a scaled parent."""
    queues = (
        QueueInfo("root", None),
        QueueInfo("org", "root", quota=levels(8 * MILLI)),
        QueueInfo("team", "org", quota=levels(2 * MILLI)),
    )
    assert scale_guarantees(queues, {"h100": 8 * MILLI}) == {}
    scaled = scale_guarantees(queues, {"h100": 4 * MILLI})
    assert [(key, s.scaled) for key, s in scaled.items()] == [(("org", "h100"), 4 * MILLI)]


def test_guarantees_are_grouped_under_the_nearest_queue_with_a_quota_for_the_flavor() -> None:
    """A queue without quota for the flavor passes its children's guarantees up to the
    nearest ancestor that has one, or to the pool."""
    queues = (
        QueueInfo("root", None),
        QueueInfo("org", "root", quota=levels(8 * MILLI)),
        QueueInfo("dept", "org"),
        QueueInfo("team", "dept", quota=levels(2 * MILLI)),
        QueueInfo("lab", "root"),
        QueueInfo("bench", "lab", quota=levels(MILLI)),
    )
    assert guarantee_groups(queues, "h100") == {None: ["org", "bench"], "org": ["team"]}


def test_all_gpus_of_a_flavor_failed_leaves_no_guarantee_and_still_plans() -> None:
    """Every guarantee of a flavor with no healthy GPU is scaled to zero."""
    nodes = pool(1)
    nodes[0]["unhealthy_gpus"] = list(range(8))
    queues = [queue("team-a", deserved=8, guarantee=8)]
    _, result = planned(scenario(nodes, queues, [workload("wa", queue="team-a", gpus=1)]))
    (pending,) = result.pending
    assert pending.reason == "capacity"
    scaled = pending.facts["scaled_guarantee"]
    assert isinstance(scaled, dict) and scaled["scaled_gpus"] == 0
