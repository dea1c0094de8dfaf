"""A drain ends in *drained*: the loop marks a draining node drained once nothing of ours and
no other scheduler's GPU pod is left on it; it stays cordoned until an admin uncordons it."""

from __future__ import annotations

import pytest
from loop_builders import World, build_world

from gpupool.accounting.models import PreemptionEvent
from gpupool.audit.models import AuditEvent
from gpupool.clusters.base import ResourceAmounts
from gpupool.inventory.actions import do_drain_node, do_set_node_cordoned
from gpupool.inventory.choices import NodeState
from gpupool.inventory.models import Node
from gpupool.quotas.models import PriorityClass

pytestmark = pytest.mark.django_db


@pytest.fixture
def world(db: None) -> World:
    """Two teams, one 8-GPU node, a loop."""
    return build_world(nodes=1)


def run_filler(world: World) -> None:
    """A low-priority workload holding the whole node, running."""
    world.submit("filler", gpus=8, priority_class=PriorityClass.objects.get(name="low"))
    world.cycle()
    world.cycle()
    world.cluster.run()
    world.cycle()
    assert world.workload("filler").state == "running"


def state_of(name: str = "n1") -> NodeState:
    return Node.objects.get(name=name).state


def test_a_drained_node_whose_work_has_gone_is_drained_and_stays_cordoned(world: World) -> None:
    run_filler(world)
    do_drain_node(Node.objects.get(name="n1"), acting_user=None, reason="maintenance")
    world.cycle()  # the filler is evicted: its pods were still there when the cycle looked
    assert state_of() == NodeState.DRAINING
    # the preemption keeps the node it ran on, from the loop's own view of its placement
    assert list(PreemptionEvent.objects.values_list("reason", "nodes")) == [("admin", ["n1"])]
    world.cycle()
    world.cycle()
    node = Node.objects.get(name="n1")
    assert world.workload("filler").state == "pending"
    assert (node.state, node.cordoned) == (NodeState.DRAINED, True)
    assert node.drained_at is not None
    event = AuditEvent.objects.get(action="inventory.record_drained")
    assert (event.actor_name, event.reason) == ("", "nothing is left on it")
    world.cycle()
    assert state_of() == NodeState.DRAINED  # nothing moves back onto it
    assert AuditEvent.objects.filter(action="inventory.record_drained").count() == 1


def test_an_empty_node_is_drained_at_the_first_cycle_after_the_drain(world: World) -> None:
    world.cycle()
    do_drain_node(Node.objects.get(name="n1"), acting_user=None, reason="maintenance")
    world.cycle()
    assert state_of() == NodeState.DRAINED


def test_another_schedulers_gpu_pod_does_not_keep_the_node_draining(world: World) -> None:
    # gpupool never evicts other schedulers' pods, so its drain is done once its own work is
    # gone: "draining: its workloads are being evicted" read on for as long as they ran. The
    # node is drained; the node's foreign usage (and the Cluster page) says what they hold.
    world.cluster.foreign["n1"] = ResourceAmounts(cpu_milli=1000, memory_mib=1024, gpus=1)
    world.cycle()
    do_drain_node(Node.objects.get(name="n1"), acting_user=None, reason="maintenance")
    world.cycle()
    world.cycle()
    assert state_of() == NodeState.DRAINED
    assert Node.objects.get(name="n1").foreign_usage["gpus"] == 1


def test_a_daemonset_pod_without_gpus_does_not_keep_the_node_draining(world: World) -> None:
    world.cluster.foreign["n1"] = ResourceAmounts(cpu_milli=100, memory_mib=64)
    world.cycle()
    do_drain_node(Node.objects.get(name="n1"), acting_user=None, reason="maintenance")
    world.cycle()
    assert state_of() == NodeState.DRAINED


def test_a_foreign_gpu_pod_arriving_on_a_drained_node_leaves_it_drained(world: World) -> None:
    world.cycle()
    do_drain_node(Node.objects.get(name="n1"), acting_user=None, reason="maintenance")
    world.cycle()
    drained = Node.objects.get(name="n1")
    assert drained.state == NodeState.DRAINED
    world.cluster.foreign["n1"] = ResourceAmounts(gpus=2)  # one that tolerates the cordon
    world.cycle()
    node = Node.objects.get(name="n1")
    assert (node.state, node.drained_at) == (NodeState.DRAINED, drained.drained_at)


def test_uncordoning_a_drained_node_puts_it_back_in_service(world: World) -> None:
    world.cycle()
    do_drain_node(Node.objects.get(name="n1"), acting_user=None, reason="maintenance")
    world.cycle()
    do_set_node_cordoned(
        Node.objects.get(name="n1"), cordoned=False, acting_user=None, reason="repaired"
    )
    node = Node.objects.get(name="n1")
    assert (node.state, node.cordoned, node.drain_requested_at, node.drained_at) == (
        NodeState.READY,
        False,
        None,
        None,
    )
    world.submit("after", gpus=8)
    world.cycle()
    world.cycle()
    world.cluster.run()
    world.cycle()
    assert world.workload("after").state == "running"


def test_a_dry_run_marks_nothing_drained(world: World) -> None:
    world.cycle()
    do_drain_node(Node.objects.get(name="n1"), acting_user=None, reason="maintenance")
    world.cycle(dry_run=True)
    assert state_of() == NodeState.DRAINING
