"""Finding 2: a GPU the cluster reports broken cannot be marked healthy, whatever recorded its
mark. The demo's broken GPUs carry a health source's reason ("XID 79 ...") while the node's
label ``gpupool.io/unhealthy-gpus`` names them and the device plugin leaves them out of
allocatable; marking one healthy was accepted, and the scheduler then counted it free while
the cluster kept refusing it. The action refuses (400 naming ``healthy``), the Cluster page
offers no such mark, and a GPU the cluster offers stays an admin's to lift."""

from __future__ import annotations

from typing import Any

import pytest
from dashboard_pages import text
from django.core.exceptions import ValidationError

from gpupool.clusters.inventory import UNHEALTHY_GPUS_LABEL
from gpupool.inventory.actions import do_set_gpu_health
from gpupool.inventory.models import Gpu, Node


def named_by_the_cluster(name: str = "n1", index: int = 3) -> Gpu:
    """As the sync records a node whose health checker names the GPU in the label."""
    node = Node.objects.get(name=name)
    Node.objects.filter(pk=node.pk).update(labels={**node.labels, UNHEALTHY_GPUS_LABEL: str(index)})
    return Gpu.objects.select_related("node").get(node__name=name, index=index)


def test_a_gpu_the_cluster_names_is_refused_healthy_though_its_reason_is_an_xid(
    pool: Any,
) -> None:
    gpu = named_by_the_cluster()
    assert gpu.unhealthy_reason == "XID 79"  # a health source's reason, not the sync's
    with pytest.raises(ValidationError) as refused:
        do_set_gpu_health(gpu, healthy=True, acting_user=None)
    assert "not allocatable in the cluster" in refused.value.message_dict["healthy"][0]
    assert (Gpu.objects.get(pk=gpu.pk).healthy, Gpu.objects.get(pk=gpu.pk).unhealthy_reason) == (
        False,
        "XID 79",
    )


def test_the_refusal_reads_the_labels_as_last_synced_not_the_callers_copy(pool: Any) -> None:
    gpu = Gpu.objects.select_related("node").get(node__name="n1", index=3)
    named_by_the_cluster()  # the sync records the label after the caller read the node
    with pytest.raises(ValidationError):
        do_set_gpu_health(gpu, healthy=True, acting_user=None)


def test_a_mark_on_a_gpu_the_cluster_offers_is_the_admins_to_lift(pool: Any) -> None:
    named_by_the_cluster("n1", 5)  # the label names another GPU
    gpu = Gpu.objects.select_related("node").get(node__name="n1", index=3)
    do_set_gpu_health(gpu, healthy=True, acting_user=None)
    assert Gpu.objects.get(pk=gpu.pk).healthy


def test_the_page_offers_no_mark_and_the_api_refuses_naming_healthy(
    pool: Any, page_as: Any
) -> None:
    named_by_the_cluster()
    client = page_as("ada")
    page = text(client.get("/cluster/?flavor=h100&show=problems"))
    row = page.split('id="node-n1"', 1)[1].split("</tr>", 1)[0]
    assert "Mark GPU 3 healthy" not in row
    assert "cannot be marked healthy here" in row
    response = client.post(
        "/api/v1/nodes/n1/gpus/3/health/",
        {"healthy": True, "reason": ""},
        content_type="application/json",
    )
    assert response.status_code == 400, response.content
    assert response.json()["error"]["message"].startswith("healthy: GPU 3 of n1 is not")
    assert client.get("/api/v1/nodes/n1/").json()["healthy_gpus"] == 7
