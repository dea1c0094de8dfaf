"""Pods of placed work that vanish outside gpupool, on the simulated cluster (DESIGN §4).

A member of a running gang deleted or evicted by someone else leaves the gang below its
minimum: the workload leaves as a whole (no half-gangs), its placements, GPUs and usage
released, and the members left are deleted. A pod deleted (``kubectl delete``) is not a
preemption: a bare pod's workload is cancelled; one evicted (the Eviction API's
``DisruptionTarget``: a drain, a manual eviction) is, as before.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from domain_builders import flavor, priority_class, queue, quota, tenant

from gpupool.accounting.models import PreemptionEvent, UsageInterval
from gpupool.clusters.base import PodRef
from gpupool.clusters.node_profiles import gpu_node_manifest
from gpupool.clusters.simulated import SimulatedBackend, SimulatedCluster, VirtualClock
from gpupool.clusters.simulated_store import MemoryStore
from gpupool.control.loop import ControlLoop
from gpupool.workloads.actions import PodSetSpec, do_submit_workload
from gpupool.workloads.models import Placement, Workload

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

    def bare(self, name: str, workload: str | None = None, min_member: int = 1) -> PodRef:
        """A pod made with kubectl: 8 GPUs, queue team-a."""
        labels = {"gpupool.io/queue": "team-a"}
        annotations: dict[str, str] = {}
        if workload is not None:
            labels["gpupool.io/workload"] = workload
            annotations["gpupool.io/min-member"] = str(min_member)
        resources = {"nvidia.com/gpu": "8", "cpu": "1", "memory": "1Gi"}
        manifest: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": "team-a", "labels": labels,
                         "annotations": annotations},
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

    def pods(self, workload: str) -> list[str]:
        """The names of the workload's pods the cluster still has (not being deleted)."""
        return [
            p.name
            for p in self.cluster.pods()
            if (p.labels.get("gpupool.io/workload") or p.name) == workload and not p.deleting
        ]


@pytest.fixture
def world(db: None) -> World:
    return World()


def gang(world: World) -> tuple[PodRef, PodRef]:
    """Two bare pods of one gang (min-member 2), 8 GPUs each, running on the two nodes."""
    pods = (
        world.bare("walk-gang-0", "walk-gang", min_member=2),
        world.bare("walk-gang-1", "walk-gang", min_member=2),
    )
    running = world.until_running("walk-gang")
    assert Placement.objects.filter(workload=running).count() == 2
    return pods


def test_a_gang_member_deleted_with_kubectl_ends_the_gang_and_leaves_no_phantom(
    world: World,
) -> None:
    _, second = gang(world)
    world.clock.advance(600)
    world.cluster.delete_pods([second], "kubectl delete pod walk-gang-1")
    world.cycle()
    gone = world.workload("walk-gang")
    assert gone.state == "cancelled"
    assert "walk-gang-1 was deleted (not evicted)" in gone.transitions.latest("id").reason
    assert not Placement.objects.filter(workload=gone).exists()  # no phantom placement
    assert UsageInterval.objects.get(workload=gone).ended_at is not None
    assert not PreemptionEvent.objects.filter(victim=gone).exists()  # not a preemption
    world.cycle()
    assert world.pods("walk-gang") == []  # no half-gang left running


def test_a_gang_member_evicted_by_an_admin_is_a_preemption_and_the_rest_goes_too(
    world: World,
) -> None:
    first, _ = gang(world)
    world.clock.advance(600)
    outcome = world.cluster.evict([first], "drain")  # the Eviction API, as a drain calls it
    assert [r.status for r in outcome.results] == ["evicted"]
    world.cycle()
    lost = world.workload("walk-gang")
    assert lost.state == "preempted"  # a bare pod's gang: nothing makes it again, it ends
    assert not Placement.objects.filter(workload=lost).exists()
    event = PreemptionEvent.objects.get(victim=lost)
    assert (event.reason, event.gpus_freed) == ("admin", 16)
    world.cycle()
    assert world.pods("walk-gang") == []


def test_a_bare_pod_deleted_by_its_owner_is_cancelled_not_preempted(world: World) -> None:
    solo = world.bare("solo")
    world.until_running("solo")
    world.clock.advance(600)
    world.cluster.delete_pods([solo], "kubectl delete pod solo")
    world.cycle()
    ended = world.workload("solo")
    assert ended.state == "cancelled"
    assert [t.to_state for t in ended.transitions.order_by("id")][-1:] == ["cancelled"]
    assert not PreemptionEvent.objects.filter(victim=ended).exists()
    assert UsageInterval.objects.get(workload=ended).ended_at is not None


def test_a_bare_pod_evicted_by_an_admin_is_still_an_admin_preemption(world: World) -> None:
    solo = world.bare("solo")
    world.until_running("solo")
    world.clock.advance(600)
    world.cluster.evict([solo], "drain")
    world.cycle()
    ended = world.workload("solo")
    assert ended.state == "preempted"
    assert PreemptionEvent.objects.get(victim=ended).reason == "admin"


def test_a_submitted_gangs_pod_deleted_requeues_it_whole_and_it_runs_again(
    world: World,
) -> None:
    do_submit_workload(
        "trainer",
        queue=world.queue,
        pod_sets=[PodSetSpec(2, gpus=8, flavor=world.h100)],
        min_member=2,
    )
    world.until_running("trainer")
    (victim, *_) = [p for p in world.cluster.pods() if p.name.startswith("trainer-")]
    world.cluster.delete_pods([victim.ref], "kubectl delete")
    world.cycle()
    requeued = world.workload("trainer")
    assert requeued.state == "pending"
    assert "was deleted (not evicted)" in requeued.transitions.latest("id").reason
    assert not Placement.objects.filter(workload=requeued).exists()
    assert not PreemptionEvent.objects.filter(victim=requeued).exists()
    assert world.until_running("trainer").state == "running"  # its pods made again, bound
    assert len(world.pods("trainer")) == 2
