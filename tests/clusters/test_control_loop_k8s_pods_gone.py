"""The control loop on the local plane when pods of placed work vanish outside gpupool:
``kubectl delete`` of one member of a running gang, and of a running bare pod (DESIGN §4:
the cluster is the truth about what runs; no half-gangs; a delete is not a preemption)."""

from __future__ import annotations

from typing import Any

import pytest
from test_control_loop_k8s import Plane, plane  # noqa: F401 (the fixture)

from gpupool.accounting.models import PreemptionEvent, UsageInterval
from gpupool.workloads.models import Placement

pytestmark = [pytest.mark.k8s, pytest.mark.django_db(transaction=True)]


def bare_pod(on: Plane, name: str, workload: str | None = None, min_member: int = 1) -> None:
    """A pod made with kubectl for gpupool: 8 GPUs, queue team-a."""
    labels = {"gpupool.io/queue": "team-a"}
    annotations: dict[str, str] = {}
    if workload is not None:
        labels["gpupool.io/workload"] = workload
        annotations["gpupool.io/min-member"] = str(min_member)
    gpus = {"nvidia.com/gpu": "8"}
    body: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels, "annotations": annotations},
        "spec": {"schedulerName": "gpupool", "containers": [
            {"name": "main", "image": "registry.k8s.io/pause:3.10",
             "resources": {"limits": gpus, "requests": gpus}}]},
    }  # fmt: skip
    on.core.create_namespaced_pod(on.namespaces["team-a"], body)


def test_a_gang_member_deleted_with_kubectl_leaves_no_phantom_allocation(
    plane: Plane,  # noqa: F811
) -> None:
    for index in range(2):
        bare_pod(plane, f"walk-gang-{index}", "walk-gang", min_member=2)
    plane.until("the gang running", lambda: plane.state("walk-gang") == "running")
    assert Placement.objects.filter(workload=plane.workload("walk-gang")).count() == 2

    plane.core.delete_namespaced_pod("walk-gang-1", plane.namespaces["team-a"])

    plane.until("the gang gone", lambda: plane.state("walk-gang") == "cancelled")
    gang = plane.workload("walk-gang")
    assert not Placement.objects.filter(workload=gang).exists()
    assert UsageInterval.objects.get(workload=gang).ended_at is not None
    assert not PreemptionEvent.objects.filter(victim=gang).exists()
    plane.until("no half-gang left", lambda: not plane.pods(selector="gpupool.io/workload"))


def test_a_running_bare_pod_deleted_by_its_owner_is_cancelled_not_preempted(
    plane: Plane,  # noqa: F811
) -> None:
    bare_pod(plane, "solo")
    plane.until("the pod running", lambda: plane.state("solo") == "running")

    plane.core.delete_namespaced_pod("solo", plane.namespaces["team-a"])

    plane.until("the workload ended", lambda: plane.state("solo") not in ("running", None))
    solo = plane.workload("solo")
    assert solo.state == "cancelled"
    assert not PreemptionEvent.objects.filter(victim=solo).exists()
    assert UsageInterval.objects.get(workload=solo).ended_at is not None
