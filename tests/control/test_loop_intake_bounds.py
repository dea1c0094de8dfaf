"""Pods made with kubectl meet the rule of submission (``workloads.actions.pod_sets_errors``):
a pod no node could hold -- past the decision core's bounds, or more GPUs than the largest
node of every flavor it may use -- is registered and left pending with the reason, and a
Warning Event on its pods says what is wrong, as for a malformed annotation; it never reaches
the core. And work submitted through gpupool waits for the pods gpupool is creating, not for
a gang. On the simulated cluster (in memory, on a virtual clock): team ``a`` (namespace
``team-a``) deserving 8 H100 GPUs, capable of 16; nodes of 8 GPUs."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from domain_builders import flavor, priority_class, queue, quota, tenant

from gpupool.clusters.base import PodRef
from gpupool.clusters.node_profiles import gpu_node_manifest
from gpupool.clusters.simulated import SimulatedBackend, SimulatedCluster, VirtualClock
from gpupool.clusters.simulated_store import MemoryStore
from gpupool.control.loop import ControlLoop, CycleResult
from gpupool.scheduler.scenario import MAX_GPUS_PER_NODE, MAX_NODE_CPU, MAX_POD_SETS
from gpupool.workloads.actions import PodSetSpec, do_submit_workload
from gpupool.workloads.models import Workload

pytestmark = pytest.mark.django_db

START = 1_800_000_000.0
PRODUCT = "NVIDIA-H100-80GB-HBM3"


class Intake:
    """The simulated cluster, a loop on it, and kubectl's hands."""

    def __init__(self, nodes: int = 2) -> None:
        self.h100 = flavor("h100", node_labels={"nvidia.com/gpu.product": PRODUCT})
        priority_class("normal", 0, default=True)
        self.queue = queue(
            "team-a", parent=queue("root"), tenant=tenant("a", namespaces=("team-a",))
        )
        quota(self.queue, self.h100, 0, 8, 16)
        self.clock = VirtualClock(START)
        self.cluster = SimulatedCluster(MemoryStore(), self.clock)
        group = {"kind": "hgx", "prefix": "u", "gpus": 8, "product": PRODUCT}
        self.cluster.add_nodes([gpu_node_manifest(f"u-{n}", group) for n in range(1, nodes + 1)])
        self.loop = self.new_loop()

    def new_loop(self) -> ControlLoop:
        """A loop on the cluster, as a restarted process starts one (nothing remembered)."""
        return ControlLoop(SimulatedBackend(self.cluster))

    def cycle(self) -> CycleResult:
        result = self.loop.run_cycle()
        assert result.status == "succeeded", result.error
        return result

    def kubectl(
        self,
        name: str,
        gpus: int,
        *,
        workload: str | None = None,
        cpu: str = "1",
        annotations: Mapping[str, str] | None = None,
    ) -> PodRef:
        """``kubectl create`` of a pod for gpupool in ``team-a``."""
        labels = {"gpupool.io/queue": "team-a"}
        if workload is not None:
            labels["gpupool.io/workload"] = workload
        resources = {"nvidia.com/gpu": str(gpus), "cpu": cpu, "memory": "1Gi"}
        container = {"name": "main", "image": "registry.invalid/train:1"}
        container["resources"] = {"requests": resources, "limits": resources}  # type: ignore[assignment]
        manifest: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name,
                "namespace": "team-a",
                "labels": labels,
                "annotations": dict(annotations or {}),
            },
            "spec": {"schedulerName": "gpupool", "containers": [container]},
        }
        return self.cluster.add_pod(manifest)

    def warnings(self, pod: PodRef) -> list[str]:
        """The Warning Events on a pod (``kubectl describe pod``)."""
        return [
            e["message"]
            for e in self.cluster.events_of(pod)
            if e["type"] == "Warning" and e["reason"] == "FailedScheduling"
        ]

    def node_of(self, pod: PodRef) -> str | None:
        facts = next(p for p in self.cluster.pods() if p.name == pod.name)
        return facts.node_name

    def planned(self) -> set[str]:
        """The workloads the last cycle's snapshot gave the decision core."""
        assert self.loop.latest is not None
        return {w.name for w in self.loop.latest.snapshot.workloads}


def workload(name: str) -> Workload:
    return Workload.objects.get(namespace="team-a", name=name)


@pytest.fixture
def intake(db: None) -> Intake:
    return Intake()


def test_a_kubectl_pod_larger_than_any_node_is_registered_never_planned_and_told_why(
    intake: Intake,
) -> None:
    """Made before the first cycle: the nodes become rows in the same sync that registers
    the pod, and the largest node is judged then, not skipped as a flavor without nodes."""
    big = intake.kubectl("big", gpus=16)
    good = intake.kubectl("good", gpus=8)
    intake.cycle()
    intake.cycle()
    assert intake.node_of(good) is not None and intake.node_of(big) is None
    row = workload("big")
    assert (row.state, row.origin) == ("pending", "bare")
    assert "team-a/big" not in intake.planned()  # never reaches the core
    why = "pod big: 16 GPUs per pod, and a pod runs on one node: the largest h100 node has 8"
    assert row.pending_reason == "capacity" and why in row.pending_detail
    assert row.pending_facts["never_fits"] is True and row.queue_position is None
    (warning,) = intake.warnings(big)  # said once, not every cycle
    assert warning == f"gpupool will not schedule these pods: {why}"


def test_a_pod_past_the_cores_bounds_is_refused_by_name_and_the_others_still_scheduled(
    intake: Intake,
) -> None:
    intake.cycle()
    gpus = intake.kubectl("huge", gpus=MAX_GPUS_PER_NODE + 1)
    cpu = intake.kubectl("hungry", gpus=1, cpu=str(MAX_NODE_CPU + 1))
    good = intake.kubectl("good", gpus=1)
    intake.cycle()
    assert intake.node_of(good) is not None
    assert not {"team-a/huge", "team-a/hungry"} & intake.planned()
    (said,) = intake.warnings(gpus)
    # past the core's bound on an h100 pod: the flavor's rule, as at submission
    assert (
        f"pod huge: {MAX_GPUS_PER_NODE + 1} GPUs per pod, and a pod runs on one node: the "
        "largest h100 node has 8"
    ) in said
    (said,) = intake.warnings(cpu)
    assert f"pod hungry: {MAX_NODE_CPU + 1} CPU cores per pod: at most {MAX_NODE_CPU}" in said
    assert workload("hungry").state == workload("huge").state == "pending"


def test_a_gang_of_more_pod_sets_than_the_core_takes_is_refused(intake: Intake) -> None:
    intake.cycle()
    pods = [
        intake.kubectl(f"mixed-{n}", gpus=1, workload="mixed", cpu=str(n + 1))
        for n in range(MAX_POD_SETS + 1)
    ]
    intake.cycle()
    assert "team-a/mixed" not in intake.planned()
    assert all(intake.node_of(pod) is None for pod in pods)
    (said,) = intake.warnings(pods[0])
    assert f"the pods make {MAX_POD_SETS + 1} pod sets: at most {MAX_POD_SETS}" in said
    assert workload("mixed").pod_sets.count() == MAX_POD_SETS + 1


def test_a_refused_workload_stays_out_when_its_pods_change_and_after_a_restart(
    intake: Intake,
) -> None:
    intake.cycle()
    intake.kubectl("grow-0", gpus=16, workload="grow")
    intake.cycle()
    assert "team-a/grow" not in intake.planned()
    intake.kubectl("grow-1", gpus=2, workload="grow")  # its pods change: decided again
    intake.cycle()
    assert "team-a/grow" not in intake.planned()
    assert sorted(p.gpus for p in workload("grow").pod_sets.all()) == [2, 16]
    intake.loop.close()
    intake.loop = intake.new_loop()  # forgets its overlays: the first sync judges again
    intake.cycle()
    assert "team-a/grow" not in intake.planned()
    assert workload("grow").state == "pending"


def test_a_refused_workload_whose_large_pod_goes_is_scheduled(intake: Intake) -> None:
    intake.cycle()
    big = intake.kubectl("shrink-0", gpus=16, workload="shrink")
    small = intake.kubectl("shrink-1", gpus=2, workload="shrink")
    intake.cycle()
    assert "team-a/shrink" not in intake.planned()
    intake.cluster.delete_pods([big], "the user deleted it")
    intake.cycle()
    assert workload("shrink").state == "admitted"
    assert intake.node_of(small) is not None


def test_work_submitted_through_gpupool_waits_for_the_pods_it_is_creating_not_a_gang(
    intake: Intake,
) -> None:
    intake.cycle()
    do_submit_workload(
        "solo", queue=intake.queue, pod_sets=[PodSetSpec(1, gpus=1, flavor=intake.h100)]
    )
    intake.kubectl("ring-0", gpus=1, workload="ring", annotations={"gpupool.io/min-member": "3"})
    intake.cycle()  # gpupool creates solo's pod; ring's other members are really missing
    solo, ring = workload("solo"), workload("ring")
    assert solo.pending_reason == ring.pending_reason == "gang"
    assert solo.pending_detail.startswith("Its pods are being created: gpupool makes the 1 ")
    assert "do not exist yet" not in solo.pending_detail
    assert solo.pending_facts["pods_being_created"] is True
    assert ring.pending_detail == "2 of its pods do not exist yet."
    assert "pods_being_created" not in ring.pending_facts
    intake.cycle()
    assert workload("solo").state == "admitted"
