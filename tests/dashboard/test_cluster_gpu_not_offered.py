"""A GPU the cluster does not offer (missing from the node's allocatable: the sync marks it
``CLUSTER_UNHEALTHY``) cannot be marked healthy: the cluster's allocatable wins, or gpupool
would count it and bind a pod the kubelet refuses. The action refuses, naming why; the
Cluster page and the nodes API offer no way round it. An admin's own mark stays theirs."""

from __future__ import annotations

from typing import Any

import pytest
from dashboard_pages import text
from django.core.exceptions import ValidationError

from gpupool.control.snapshot import CLUSTER_UNHEALTHY
from gpupool.inventory.actions import do_set_gpu_health
from gpupool.inventory.models import Gpu


def not_offered(node: str = "n2", index: int = 7) -> Gpu:
    """Mark the GPU as the cluster sync does when the device plugin leaves it out."""
    Gpu.objects.filter(node__name=node, index=index).update(
        healthy=False, unhealthy_reason=CLUSTER_UNHEALTHY
    )
    return Gpu.objects.get(node__name=node, index=index)


def test_the_action_refuses_to_mark_a_gpu_the_cluster_does_not_offer_healthy(pool: Any) -> None:
    gpu = not_offered()
    with pytest.raises(ValidationError) as refused:
        do_set_gpu_health(gpu, healthy=True, acting_user=None)
    assert "not allocatable in the cluster" in refused.value.message_dict["healthy"][0]
    gpu.refresh_from_db()
    assert (gpu.healthy, gpu.unhealthy_reason) == (False, CLUSTER_UNHEALTHY)
    # An admin's finding is theirs to lift.
    admins = Gpu.objects.get(node__name="n1", index=3)
    do_set_gpu_health(admins, healthy=True, acting_user=None)
    assert Gpu.objects.get(pk=admins.pk).healthy


def test_the_page_offers_no_healthy_button_and_the_post_is_refused(pool: Any, page_as: Any) -> None:
    not_offered()
    client = page_as("ada")
    row = text(client.get("/cluster/")).split('id="node-n2"', 1)[1].split("</tr>", 1)[0]
    assert "Mark GPU 7 healthy" not in row
    assert "GPU 7 is not in the node&#x27;s allocatable" in row or (
        "GPU 7 is not in the node's allocatable" in row
    )
    response = client.post(
        "/cluster/nodes/n2/gpu-health/", {"index": 7, "healthy": "on", "reason": ""}, follow=True
    )
    assert "not allocatable in the cluster" in text(response)
    assert not Gpu.objects.get(node__name="n2", index=7).healthy


def test_the_nodes_api_refuses_it_naming_the_field(pool: Any, page_as: Any) -> None:
    not_offered()
    response = page_as("ada").post(
        "/api/v1/nodes/n2/gpus/7/health/",
        {"healthy": True, "reason": ""},
        content_type="application/json",
    )
    assert response.status_code == 400, response.content
    assert response.json()["error"]["message"].startswith("healthy: GPU 7 of n2 is not")
    assert not Gpu.objects.get(node__name="n2", index=7).healthy
