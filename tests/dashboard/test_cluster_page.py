"""The Cluster page: nodes and GPUs by flavor and NVLink domain with their health; admins
cordon, uncordon and set GPU health here through the inventory actions (audited)."""

from __future__ import annotations

from typing import Any

import pytest
from dashboard_pages import live, text
from django.db import connection
from django.test.utils import CaptureQueriesContext
from domain_builders import flavor, node

from gpupool.audit.models import AuditEvent
from gpupool.inventory.models import Gpu, Node


def test_the_page_shows_each_node_its_gpus_and_why_a_gpu_is_out(pool: Any, page_as: Any) -> None:
    page = text(page_as("max").get("/cluster/"))
    assert '<th scope="row">n1' in page and '<th scope="row">n2' in page
    assert "gpu 3: XID 79" in page
    assert "its own NVLink domain" in page
    # a member reads, but is offered no change
    assert "Cordon" not in page and "Mark unhealthy" not in page


def test_nodes_of_one_nvlink_domain_are_grouped_under_it(pool: Any, page_as: Any) -> None:
    for index in range(3):
        node(f"rack-{index}", pool.h100, gpus=4, nvlink_domain="nvl-a")
    page = text(page_as("ada").get("/cluster/"))
    assert "NVLink domain nvl-a · 3 nodes" in page


def test_the_summary_counts_healthy_capacity_and_broken_gpus(pool: Any, page_as: Any) -> None:
    part = text(live(page_as("ada"), "/cluster/"))
    assert "<html" not in part
    assert "15 GPUs" in part and "1 broken" in part and "16 physical GPUs" in part


def test_an_admin_cordons_and_uncordons_a_node_with_a_reason_kept_in_the_audit_log(
    pool: Any, page_as: Any
) -> None:
    client = page_as("ada")
    response = client.post(
        "/cluster/nodes/n2/cordon/",
        {"cordoned": "on", "reason": "firmware update", "query": "flavor=h100"},
    )
    assert response.status_code == 302 and response["Location"] == "/cluster/?flavor=h100"
    assert Node.objects.get(name="n2").cordoned
    event = AuditEvent.objects.get(action="inventory.set_node_cordoned")
    assert (event.actor_name, event.reason) == ("ada", "firmware update")
    page = text(client.get("/cluster/?flavor=h100"))
    assert "n2 is cordoned" in page and "cordoned: no new placements" in page
    client.post("/cluster/nodes/n2/cordon/", {"reason": "done"})
    assert not Node.objects.get(name="n2").cordoned


def test_an_admin_marks_a_gpu_unhealthy_saying_why_and_healthy_again(
    pool: Any, page_as: Any
) -> None:
    client = page_as("ada")
    client.post("/cluster/nodes/n2/gpu-health/", {"index": "5", "reason": "XID 48"})
    gpu = Gpu.objects.get(node__name="n2", index=5)
    assert (gpu.healthy, gpu.unhealthy_reason) == (False, "XID 48")
    client.post("/cluster/nodes/n2/gpu-health/", {"index": "5", "healthy": "on"})
    gpu.refresh_from_db()
    assert (gpu.healthy, gpu.unhealthy_reason) == (True, "")
    assert AuditEvent.objects.filter(action="inventory.set_gpu_health").count() == 2


def test_marking_a_gpu_unhealthy_without_a_reason_changes_nothing(pool: Any, page_as: Any) -> None:
    response = page_as("ada").post(
        "/cluster/nodes/n2/gpu-health/", {"index": "5", "reason": " "}, follow=True
    )
    assert "n2 was not changed: Unhealthy because: say why the GPU is unhealthy" in text(response)
    assert Gpu.objects.get(node__name="n2", index=5).healthy


def test_a_gpu_the_node_does_not_have_is_named(pool: Any, page_as: Any) -> None:
    response = page_as("ada").post(
        "/cluster/nodes/n2/gpu-health/", {"index": "9", "reason": "x"}, follow=True
    )
    assert "n2 has no GPU 9." in text(response)


@pytest.mark.parametrize("name", ["fin", "lena", "max"])
def test_only_admins_change_nodes(pool: Any, page_as: Any, name: str) -> None:
    client = page_as(name)
    cordon = client.post("/cluster/nodes/n2/cordon/", {"cordoned": "on", "reason": "mine"})
    health = client.post("/cluster/nodes/n2/gpu-health/", {"index": "1", "reason": "mine"})
    assert cordon.status_code == health.status_code == 403
    assert not Node.objects.get(name="n2").cordoned
    assert Gpu.objects.get(node__name="n2", index=1).healthy
    assert not AuditEvent.objects.filter(actor_name=name).exists()


def test_the_filters_show_only_nodes_with_problems(pool: Any, page_as: Any) -> None:
    page = text(page_as("ada").get("/cluster/?show=problems"))
    assert '<th scope="row">n1' in page and '<th scope="row">n2' not in page


def test_no_node_matching_says_so_and_offers_every_node(pool: Any, page_as: Any) -> None:
    flavor("nothing")  # a flavor of no node (an unknown one is "not understood": every node)
    page = text(page_as("ada").get("/cluster/?flavor=nothing"))
    assert "No node matches" in page and "Show all nodes" in page


def test_the_page_reads_a_fixed_number_of_queries_whatever_the_number_of_nodes(
    pool: Any, page_as: Any
) -> None:
    client = page_as("ada")
    with CaptureQueriesContext(connection) as few:
        assert client.get("/cluster/").status_code == 200
    for index in range(12):
        node(f"more-{index:02d}", pool.h100, gpus=8, unhealthy_gpus={0: "XID 79"})
    with CaptureQueriesContext(connection) as many:
        assert client.get("/cluster/").status_code == 200
    assert len(many) == len(few)


def test_an_admin_drains_a_node_and_the_page_says_it_is_draining(pool: Any, page_as: Any) -> None:
    client = page_as("ada")
    response = client.post("/cluster/nodes/n2/drain/", {"reason": "RMA"}, follow=True)
    node_row = Node.objects.get(name="n2")
    assert node_row.cordoned and node_row.drain_requested_at is not None
    assert "n2 is draining" in text(response)
    assert "draining: its workloads are being evicted" in text(response)
    assert "Draining since" in text(response)
    event = AuditEvent.objects.get(action="inventory.drain_node")
    assert (event.actor_name, event.reason) == ("ada", "RMA")
    assert page_as("max").post("/cluster/nodes/n1/drain/").status_code == 403
    assert Node.objects.get(name="n1").drain_requested_at is None


def test_an_admin_ends_a_drain_and_the_node_is_back_in_service(pool: Any, page_as: Any) -> None:
    client = page_as("ada")
    client.post("/cluster/nodes/n2/drain/", {"reason": "RMA"})
    response = client.post("/cluster/nodes/n2/cordon/", {"reason": "repaired"}, follow=True)
    node_row = Node.objects.get(name="n2")
    assert not node_row.cordoned and node_row.drain_requested_at is None
    assert "n2 is no longer draining" in text(response)
    assert "Draining since" not in text(response)
    event = AuditEvent.objects.get(action="inventory.end_drain")
    assert (event.actor_name, event.reason) == ("ada", "repaired")
    assert event.before["drain_requested"] and not event.after["drain_requested"]
