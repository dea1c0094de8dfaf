"""`make demo-k8s` breaks the demo's GPUs on the plane as a GPU node shows a broken GPU: left
out of allocatable and named in the label ``gpupool.io/unhealthy-gpus``
(``hack.k8s_plane.mark_unhealthy_gpus``), their reasons recorded as a health source would
(``demo.record_gpu_findings``). The loop's sync then marks GPU 3 of h100-07 with "XID 79",
where it marked GPU 7 "not allocatable in the cluster" before."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from domain_builders import flavor, node
from kubernetes.client.exceptions import ApiException

from gpupool.cli.subcommands.demo import record_gpu_findings
from gpupool.cli.subcommands.seed_demo import UNHEALTHY_GPUS
from gpupool.clusters.inventory import UNHEALTHY_GPUS_LABEL
from gpupool.control.actions import _unhealthy_indices
from gpupool.control.snapshot import CLUSTER_UNHEALTHY
from gpupool.inventory.models import Gpu
from hack.k8s_plane import mark_unhealthy_gpus

XID = UNHEALTHY_GPUS["h100-07"][3]


class FakeCore:
    """The three calls of ``CoreV1Api`` the function makes, on 8-GPU nodes kept as dicts."""

    def __init__(self, *names: str) -> None:
        self.nodes: dict[str, dict[str, Any]] = {
            name: {"labels": {"type": "kwok"}, "allocatable": {"nvidia.com/gpu": "8"}}
            for name in names
        }

    def read_node(self, name: str) -> Any:
        if name not in self.nodes:
            raise ApiException(status=404, reason="Not Found")
        return SimpleNamespace(status=SimpleNamespace(capacity={"nvidia.com/gpu": "8"}))

    def patch_node(self, name: str, body: dict[str, Any]) -> None:
        self.nodes[name]["labels"].update(body["metadata"]["labels"])

    def patch_node_status(self, name: str, body: dict[str, Any]) -> None:
        self.nodes[name]["allocatable"].update(body["status"]["allocatable"])


def test_the_plane_names_the_broken_gpus_in_the_label_and_leaves_them_out_of_allocatable() -> None:
    core = FakeCore("h100-07", "h100-23")
    assert mark_unhealthy_gpus(core, {"h100-07": [3], "h100-23": [5, 2], "gone": [1]}) == [
        "h100-07",
        "h100-23",
    ]
    assert core.nodes["h100-07"] == {
        "labels": {"type": "kwok", UNHEALTHY_GPUS_LABEL: "3"},
        "allocatable": {"nvidia.com/gpu": "7"},
    }
    assert core.nodes["h100-23"]["labels"][UNHEALTHY_GPUS_LABEL] == "2_5"
    assert core.nodes["h100-23"]["allocatable"] == {"nvidia.com/gpu": "6"}


def test_another_api_error_is_not_taken_for_a_missing_node() -> None:
    class Refusing(FakeCore):
        def read_node(self, name: str) -> Any:
            raise ApiException(status=403, reason="Forbidden")

    with pytest.raises(ApiException):
        mark_unhealthy_gpus(Refusing("h100-07"), {"h100-07": [3]})


@pytest.mark.django_db
def test_the_sync_marks_the_named_gpu_with_the_demos_reason() -> None:
    node("h100-07", flavor("h100"), gpus=8)
    core = FakeCore("h100-07")
    mark_unhealthy_gpus(core, {"h100-07": UNHEALTHY_GPUS["h100-07"]})
    labels = core.nodes["h100-07"]["labels"]
    in_cluster = 8 - int(core.nodes["h100-07"]["allocatable"]["nvidia.com/gpu"])

    # Without the label and the reason, the sync marked the highest GPU (the bug).
    assert _unhealthy_indices(list(Gpu.objects.all()), 8, in_cluster, {}) == {7: CLUSTER_UNHEALTHY}
    # With the label only, the right GPU, still without its reason.
    assert _unhealthy_indices(list(Gpu.objects.all()), 8, in_cluster, labels) == {
        3: CLUSTER_UNHEALTHY
    }

    assert record_gpu_findings({"h100-07": UNHEALTHY_GPUS["h100-07"]}) == ["h100-07/3"]
    assert _unhealthy_indices(list(Gpu.objects.all()), 8, in_cluster, labels) == {3: XID}
    # A second run changes nothing; a GPU the sync marked gets the reason, a finding stays.
    assert record_gpu_findings({"h100-07": UNHEALTHY_GPUS["h100-07"]}) == []
    Gpu.objects.filter(index=3).update(unhealthy_reason=CLUSTER_UNHEALTHY)
    assert record_gpu_findings({"h100-07": UNHEALTHY_GPUS["h100-07"]}) == ["h100-07/3"]
    assert Gpu.objects.get(index=3).unhealthy_reason == XID
    Gpu.objects.filter(index=3).update(unhealthy_reason="an admin's finding")
    assert record_gpu_findings({"h100-07": UNHEALTHY_GPUS["h100-07"]}) == []
