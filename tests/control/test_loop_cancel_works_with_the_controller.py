"""Cancelling work whose pods a controller made, on the simulated cluster (DESIGN §4).

A Job's workload is cancelled by suspending the Job (``spec.suspend``): its controller deletes
the pods and makes none again. Deleting them, as gpupool did, had the Job controller make them
again, gpupool delete them again ("has ended (cancelled)"), each counted a failed try, until
the Job ended Failed (``BackoffLimitExceeded``): the user's Job marked failed, not cancelled.
A bare pod's workload still has its pods deleted. Another controller's (a ReplicaSet's: none
gpupool can suspend) running pods are deleted, so their GPUs come back; a pod it makes again
is left waiting, never scheduled, told why -- not deleted in turn, cycle after cycle.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from domain_builders import flavor, priority_class, queue, quota, tenant

from gpupool.clusters.base import PodFacts, PodRef
from gpupool.clusters.node_profiles import gpu_node_manifest
from gpupool.clusters.simulated import SimulatedBackend, SimulatedCluster, VirtualClock
from gpupool.clusters.simulated_store import MemoryStore
from gpupool.control.loop import ControlLoop
from gpupool.workloads.actions import do_cancel_workload
from gpupool.workloads.models import Workload

pytestmark = pytest.mark.django_db

START = float((int(time.time()) // 3600 + 40 * 24) * 3600)
PRODUCT = "NVIDIA-H100-80GB-HBM3"


class World:
    """Team ``a`` (namespace ``team-a``, 16 H100 GPUs), two 8-GPU nodes, the loop."""

    def __init__(self) -> None:
        self.h100 = flavor("h100", node_labels={"nvidia.com/gpu.product": PRODUCT})
        priority_class("normal", 0, default=True)
        self.queue = queue(
            "team-a", parent=queue("root"), tenant=tenant("a", namespaces=("team-a",))
        )
        quota(self.queue, self.h100, 0, 16, 16)
        self.clock = VirtualClock(START)
        self.cluster = SimulatedCluster(MemoryStore(), self.clock)
        group = {"kind": "hgx", "prefix": "g", "gpus": 8, "product": PRODUCT}
        self.cluster.add_nodes([gpu_node_manifest(f"g-{n}", group) for n in (1, 2)])
        self.loop = ControlLoop(SimulatedBackend(self.cluster))

    def cycle(self) -> None:
        result = self.loop.run_cycle()
        assert result.status == "succeeded", result.error

    def pod(self, name: str, workload: str, owner: str | None = None) -> PodRef:
        """A pod for gpupool, 8 GPUs, queue team-a; ``owner`` "Kind/name" its controller."""
        resources = {"nvidia.com/gpu": "8", "cpu": "1", "memory": "1Gi"}
        metadata: dict[str, Any] = {
            "name": name,
            "namespace": "team-a",
            "labels": {"gpupool.io/queue": "team-a", "gpupool.io/workload": workload},
        }
        if owner is not None:
            kind, _, owner_name = owner.partition("/")
            metadata["ownerReferences"] = [
                {"apiVersion": "batch/v1" if kind == "Job" else "apps/v1", "kind": kind,
                 "name": owner_name, "uid": f"uid-{owner_name}", "controller": True}
            ]  # fmt: skip
        manifest = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": metadata,
            "spec": {"schedulerName": "gpupool", "containers": [
                {"name": "main", "image": "registry.invalid/train:1",
                 "resources": {"requests": resources, "limits": resources}}]},
        }  # fmt: skip
        return self.cluster.add_pod(manifest)

    def workload(self, name: str) -> Workload:
        return Workload.objects.get(namespace="team-a", name=name)

    def until_running(self, name: str) -> Workload:
        for _ in range(5):
            self.cycle()
            if self.workload(name).state == "running":
                return self.workload(name)
        pytest.fail(f"{name} is {self.workload(name).state}, not running")

    def live(self, workload: str) -> list[PodFacts]:
        """The workload's pods the cluster still has (not being deleted)."""
        return [
            p
            for p in self.cluster.pods()
            if p.labels.get("gpupool.io/workload") == workload and not p.deleting
        ]

    def reasons(self, pod: PodRef) -> list[str]:
        return [e["reason"] for e in self.cluster.events_of(pod)]

    def job_suspended(self, name: str) -> bool:
        with self.cluster.store.transaction() as tx:
            job = tx.get("Job", "team-a", name)
        return job is not None and bool(job.body["spec"].get("suspend"))


@pytest.fixture
def world(db: None) -> World:
    return World()


def test_cancelling_a_jobs_workload_suspends_the_job_instead_of_deleting_its_pods(
    world: World,
) -> None:
    pod = world.pod("job-c-x7k2p", "job-c", owner="Job/job-c")
    running = world.until_running("job-c")
    assert running.origin == "controller"

    do_cancel_workload(running, acting_user=None, reason="not needed")
    world.cycle()

    assert world.job_suspended("job-c")  # its controller deletes the pods, makes none again
    assert world.live("job-c") == []
    reasons = world.reasons(pod)
    assert "Cancelled" in reasons  # "gpupool suspends its Job team-a/job-c: ..."
    assert "Deleted" not in reasons  # gpupool did not delete it behind the controller's back
    cancelled = world.workload("job-c")
    assert cancelled.state == "cancelled"
    assert cancelled.transitions.latest("id").reason == "not needed"
    world.cycle()
    assert world.workload("job-c").state == "cancelled"


def test_a_bare_pods_workload_is_still_cancelled_by_deleting_its_pod(world: World) -> None:
    pod = world.pod("solo", "solo")
    do_cancel_workload(world.until_running("solo"), acting_user=None, reason="")
    world.cycle()
    assert world.live("solo") == []
    assert "Deleted" in world.reasons(pod)
    assert not world.job_suspended("solo")


def test_another_controllers_running_pod_is_deleted_and_the_one_it_makes_again_is_left(
    world: World,
) -> None:
    """A ReplicaSet cannot be suspended: its running pod is deleted (its GPUs come back);
    the pod it makes again waits, never scheduled, with the Event that its workload has
    ended -- not deleted again at each cycle, a fight with no end."""
    world.pod("serve-1", "serve", owner="ReplicaSet/serve")
    do_cancel_workload(world.until_running("serve"), acting_user=None, reason="")
    world.cycle()
    assert world.live("serve") == []
    again = world.pod("serve-2", "serve", owner="ReplicaSet/serve")  # the ReplicaSet's new one
    for _ in range(3):
        world.cycle()
    (left,) = world.live("serve")
    assert left.name == "serve-2" and left.node_name is None
    assert "FailedScheduling" in world.reasons(again)
    assert "Deleted" not in world.reasons(again)
    assert world.workload("serve").state == "cancelled"
