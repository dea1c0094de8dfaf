"""The loop's tests' fake cluster plays the Job controller's part in a cancel too: cancelling a
Job's workload suspends its Job (``ClusterBackend.suspend_job``), whose pods go and are not made
again, and the workload ends cancelled (the same path the simulated and Kubernetes backends
take: ``control.apply.cancel_pods``)."""

from __future__ import annotations

import pytest
from loop_builders import World, build_world

from gpupool.clusters.base import JobKey
from gpupool.workloads.actions import do_cancel_workload

pytestmark = pytest.mark.django_db

JOB = "trainer-owner"  # FakeCluster.add_pod names a pod's owner <workload>-owner


@pytest.fixture
def world(db: None) -> World:
    return build_world(nodes=1)


def test_cancelling_a_jobs_workload_suspends_the_job_on_the_fake_cluster(world: World) -> None:
    world.cluster.set_job(JOB, active=1)
    world.cluster.add_pod("trainer-a", workload="trainer", gpus=8, owner="Job")
    world.cycle()
    world.cluster.run()
    world.cycle()
    trainer = world.workload("trainer")
    assert trainer.state == "running"
    do_cancel_workload(trainer, acting_user=None, reason="not needed")
    world.cycle()
    assert world.cluster.suspended == {JobKey("team-a", JOB)}
    assert world.cluster.calls["suspend_job"] == 1
    assert not world.cluster.pods  # the controller removed its pod; none made again
    world.cycle()
    assert world.workload("trainer").state == "cancelled"
    assert world.cluster.calls["delete_pods"] == 0  # never a fight with the controller
