"""One cycle, step by step, on a fake cluster: sync -> snapshot -> plan -> record -> apply."""

from __future__ import annotations

import pytest
from loop_builders import World, build_world

from gpupool.accounting.models import UsageInterval
from gpupool.control.models import SchedulingCycle
from gpupool.inventory.models import Node

pytestmark = pytest.mark.django_db


@pytest.fixture
def world(db: None) -> World:
    """Two teams, two 8-GPU nodes, a loop."""
    return build_world()


def test_new_nodes_appear_in_the_inventory_with_their_flavor(world: World) -> None:
    world.cycle()
    nodes = {n.name: n for n in Node.objects.select_related("flavor")}
    assert set(nodes) == {"n1", "n2"}
    assert {n.flavor.name for n in nodes.values()} == {"h100"}
    assert nodes["n1"].gpus.count() == 8


def test_a_submitted_workload_gets_its_pods_then_is_bound_and_runs(world: World) -> None:
    world.submit("train", gpus=4, count=2)
    world.cycle()  # creates the pods
    assert [p.name for p in world.cluster.pods_of("train")] == ["train-main-0", "train-main-1"]
    world.cycle()  # admits and binds them
    train = world.workload("train")
    assert train.state == "admitted"
    assert all(p.node_name for p in world.cluster.pods_of("train"))
    world.cluster.run()
    world.cycle()
    train = world.workload("train")
    assert train.state == "running"
    usage = UsageInterval.objects.get(workload=train)
    assert usage.gpus == 8 and usage.ended_at is None
    cycle = SchedulingCycle.objects.filter(status="succeeded").first()
    assert cycle is not None and cycle.plan_s >= 0 and cycle.record_s > 0
