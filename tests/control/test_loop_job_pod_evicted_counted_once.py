"""A Job's pod evicted outside gpupool is one preemption (the tester's issue 1).

The Job controller waits out its back-off before it makes the next pod. Before, the workload
requeued after the eviction was planned at once with no pod to bind: admitted with nothing,
the next sync read it as "its pods were removed outside gpupool" -- one more preemption each
cycle until the new pod came (three for one eviction, "Preempted 8 times" after a drain). It
now waits as a gang for its missing pod (reason ``gang``), as after its pod failed.
"""

from __future__ import annotations

import pytest
from loop_builders import World, build_world

from gpupool.accounting.models import PreemptionEvent
from gpupool.clusters.api_objects import DISRUPTED_BY
from gpupool.inventory.actions import do_drain_node
from gpupool.workloads.models import Workload

JOB = "trainer-owner"  # FakeCluster.add_pod names a pod's owner <workload>-owner

pytestmark = pytest.mark.django_db


@pytest.fixture
def world(db: None) -> World:
    return build_world(nodes=1)


def running_job(world: World) -> Workload:
    world.cluster.set_job(JOB, active=1)
    world.cluster.add_pod("trainer-a", workload="trainer", gpus=8, owner="Job")
    world.cycle()
    world.cluster.run()
    world.cycle()
    trainer = world.workload("trainer")
    assert trainer.state == "running"
    return trainer


def evict_outside_gpupool(world: World, pod: str) -> None:
    """The Eviction API deletes the pod; its last state carries the DisruptionTarget."""
    key = next(k for k in world.cluster.pods if k.name == pod)
    world.cluster.annotate(key, **{DISRUPTED_BY: "EvictionByEvictionAPI"})
    world.cluster.sync()  # the informer saw the condition before the delete
    world.cluster.remove(key)


def test_a_jobs_evicted_pod_is_one_preemption_while_the_job_backs_off(world: World) -> None:
    trainer = running_job(world)
    evict_outside_gpupool(world, "trainer-a")
    world.cluster.set_job(JOB, active=0)
    for _ in range(4):  # the Job controller's back-off: several cycles, no pod of it
        world.cycle()
        waiting = world.workload("trainer")
        assert (waiting.state, waiting.pending_reason) == ("pending", "gang")
        assert not waiting.placements.exists()
    (event,) = PreemptionEvent.objects.filter(victim=trainer)
    assert event.reason == "admin"
    states = [t.to_state for t in waiting.transitions.order_by("id")]
    assert states == ["pending", "admitted", "running", "preempted", "pending"]

    retry = world.cluster.add_pod("trainer-b", workload="trainer", gpus=8, owner="Job")
    world.cluster.set_job(JOB, active=1)
    world.cycle()
    world.cycle()
    assert world.cluster.pods[retry].node_name == "n1"
    world.cluster.run()
    world.cycle()
    again = world.workload("trainer")
    assert (again.pk, again.state) == (trainer.pk, "running")
    assert PreemptionEvent.objects.filter(victim=trainer).count() == 1


def test_a_jobs_pod_drained_by_gpupool_is_one_preemption_and_waits_for_its_next_pod(
    db: None,
) -> None:
    """A drain through gpupool evicts the Job's pod; another node is free. Before, the
    requeued workload was admitted there at once with no pod to bind, and each cycle after
    read it as removed outside gpupool: a preemption a cycle until the Job's new pod came."""
    world = build_world(nodes=2)
    trainer = running_job(world)
    node = trainer.placements.get().node
    world.cluster.set_job(JOB, active=1)
    do_drain_node(node, acting_user=None, reason="maintenance")
    world.cycle()  # the drain evicts the pod (gone at once on the fake cluster)
    world.cluster.set_job(JOB, active=0)
    for _ in range(4):
        world.cycle()
        waiting = world.workload("trainer")
        assert (waiting.state, waiting.pending_reason) == ("pending", "gang")
        assert not waiting.placements.exists()
    assert PreemptionEvent.objects.filter(victim=trainer).count() == 1
    retry = world.cluster.add_pod("trainer-b", workload="trainer", gpus=8, owner="Job")
    world.cluster.set_job(JOB, active=1)
    world.cycle()
    world.cycle()
    other = "n2" if node.name == "n1" else "n1"
    assert world.cluster.pods[retry].node_name == other
    assert PreemptionEvent.objects.filter(victim=trainer).count() == 1
