"""A pod's share of its GPU comes from the pod itself, as the cluster says it (its
``gpupool.io/gpu-milli``), whatever its name: a gang made with kubectl (DESIGN §4) whose two
pod sets hold different fractions of a shared GPU is recorded at each pod's own share, not
counted whole because its pods' names do not follow ``<workload>-<pod set>-``."""

from __future__ import annotations

import time
from typing import Any

import pytest
from django.conf import settings
from domain_builders import flavor, priority_class, queue, quota, tenant

from gpupool.clusters.node_profiles import gpu_node_manifest
from gpupool.clusters.simulated import SimulatedBackend, SimulatedCluster, VirtualClock
from gpupool.clusters.simulated_store import MemoryStore
from gpupool.control.loop import ControlLoop
from gpupool.utilization.activity import read_activity
from gpupool.utilization.models import ActivityWindow
from gpupool.utilization.simulated import Profile, SimulatedSource
from gpupool.workloads.choices import WorkloadState
from gpupool.workloads.models import Workload

pytestmark = pytest.mark.django_db

START = float((int(time.time()) // 3600 + 42 * 24) * 3600)
PRODUCT = "NVIDIA-L40S"
# The gang's pods, named as a person chose, each with its own share of a GPU.
MILLI = {"trainer-7f9c2": 470, "sidecar-q2x8d": 250}


def kubectl_pod(name: str, milli: int) -> dict[str, Any]:
    """A member of gang ``mixed`` asking one time-sliced GPU and ``milli`` of it."""
    labels = {"gpupool.io/queue": "team-a", "gpupool.io/workload": "mixed"}
    annotations = {"gpupool.io/min-member": "2", "gpupool.io/gpu-milli": str(milli)}
    resources = {"nvidia.com/gpu": "1", "cpu": "1", "memory": "1Gi"}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "team-a", "labels": labels,
                     "annotations": annotations},
        "spec": {"schedulerName": "gpupool", "containers": [
            {"name": "main", "image": "registry.invalid/train:1",
             "resources": {"requests": resources, "limits": resources}}]},
    }  # fmt: skip


def test_a_kubectl_gang_of_two_shares_is_recorded_at_each_pods_own_milli() -> None:
    shared = flavor(
        "l40s-shared",
        sharing="shared",
        gpu_memory_gb=48,
        node_labels={"nvidia.com/gpu.product": f"{PRODUCT}-SHARED"},
    )
    priority_class("normal", 0, default=True)
    team = queue("team-a", parent=queue("root"), tenant=tenant("a", namespaces=("team-a",)))
    quota(team, shared, 0, 2, 4)
    clock = VirtualClock(START)
    cluster = SimulatedCluster(MemoryStore(), clock)
    group = {"kind": "shared", "prefix": "l40s", "gpus": 2, "replicas": 4, "product": PRODUCT}
    cluster.add_nodes([gpu_node_manifest("l40s-1", group)])
    loop = ControlLoop(SimulatedBackend(cluster))
    for name, milli in MILLI.items():
        cluster.add_pod(kubectl_pod(name, milli))
    for _ in range(4):
        assert loop.run_cycle().status == "succeeded"
    gang = Workload.objects.get(namespace="team-a", name="mixed")
    assert gang.state == WorkloadState.RUNNING
    assert sorted(gang.pod_sets.values_list("gpu_milli", flat=True)) == [250, 470]
    source = SimulatedSource(cluster, chosen={"team-a/mixed": Profile.BUSY_TRAINING})
    loop.utilization.source = source

    clock.advance(300)
    assert loop.run_cycle().status == "succeeded"

    window = ActivityWindow.objects.filter(workload=gang).latest("ended_at")
    step = loop.utilization.step_s
    start, end = window.started_at.timestamp(), window.ended_at.timestamp()
    seen = read_activity(
        source, start + step, end, step, threshold=settings.GPUPOOL_IDLE_UTILIZATION_PERCENT
    ).activity
    pods = {pod.name: activity for pod, activity in seen.items()}
    assert set(pods) == set(MILLI)
    # Hand count: each pod's GPU-seconds at its own share (0.47 and 0.25), not whole.
    observed = sum(pods[name].observed_gpu_seconds * milli / 1000 for name, milli in MILLI.items())
    active = sum(pods[name].active_gpu_seconds * milli / 1000 for name, milli in MILLI.items())
    assert observed > 0 and active > 0
    assert window.gpus == 2
    assert window.observed_gpu_seconds == pytest.approx(observed)
    assert window.active_gpu_seconds == pytest.approx(active)
