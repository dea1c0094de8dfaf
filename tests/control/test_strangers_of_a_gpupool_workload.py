"""Pods made with kubectl that carry the name of a workload submitted through gpupool.

gpupool makes such a workload's pods itself (each with its pod-set annotation). Pods of the same
name made by someone else are not its pods: they were counted as its waiting pods, so gpupool
made none of its own and the workload, once admitted, held its GPUs with nothing bound, cycle
after cycle. Now they are neither counted nor bound, and a Warning Event tells their owner.
"""

from __future__ import annotations

import pytest
from loop_builders import World, build_world

from gpupool.control.cluster import made_by_gpupool

pytestmark = pytest.mark.django_db


@pytest.fixture
def world(db: None) -> World:
    """Two teams, two 8-GPU nodes (written by a first cycle), a loop."""
    world = build_world()
    world.cycle()
    return world


def test_kubectl_pods_with_a_gpupool_workloads_name_are_not_its_pods(world: World) -> None:
    world.submit("train", gpus=2)
    stranger = world.cluster.add_pod("train-by-hand", workload="train", gpus=2)

    for _ in range(3):
        world.cycle()
        world.cluster.run()

    train = world.workload("train")
    assert train.state == "running", (train.state, train.pending_reason, train.pending_detail)
    ours = [pod for pod in world.cluster.pods_of("train") if made_by_gpupool(pod)]
    assert len(ours) == 1 and ours[0].node_name is not None
    assert world.cluster.pods[stranger].node_name is None  # never bound as its pod
    # Told once why, and not given the workload's own explanation (its pods being created).
    assert [(reason, kind) for reason, _, kind in world.cluster.events_on(stranger)] == [
        ("FailedScheduling", "Warning")
    ]
    assert "give them another gpupool.io/workload label" in world.cluster.events_on(stranger)[0][1]
