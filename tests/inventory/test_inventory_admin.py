"""The inventory admin writes only through the inventory actions: flavors are edited, nodes
are cordoned, GPUs are marked unhealthy with a reason or recovered, and each change is audited
with the admin as actor."""

from typing import Any

import pytest
from django.test import Client
from django.urls import reverse
from domain_builders import flavor, node

from gpupool.audit.models import AuditEvent
from gpupool.inventory.actions import do_set_gpu_health
from gpupool.inventory.models import Flavor, Gpu, Node

pytestmark = pytest.mark.django_db


def events(action: str) -> list[AuditEvent]:
    """The audit rows of one action, oldest first."""
    return list(AuditEvent.objects.filter(action=action).order_by("id"))


def test_a_flavor_added_changed_and_deleted_in_the_admin_is_audited_each_time(
    admin_client: Client, submit_admin_form: Any
) -> None:
    # when an admin adds a flavor
    response = submit_admin_form(
        reverse("admin:inventory_flavor_add"),
        {"name": "l4", "sharing": "exclusive", "gpu_memory_gb": 24, "hourly_price": "0.8"},
    )
    assert response.status_code == 302
    made = Flavor.objects.get(name="l4")
    # then changes its price
    change = reverse("admin:inventory_flavor_change", args=[made.pk])
    assert submit_admin_form(change, {"hourly_price": "0.9"}).status_code == 302
    # and saves it again unchanged
    assert submit_admin_form(change).status_code == 302
    # and deletes it
    delete = reverse("admin:inventory_flavor_delete", args=[made.pk])
    assert admin_client.post(delete, {"post": "yes"}).status_code == 302
    # then each change is one audit row by the admin, and the unchanged save none
    saved = events("inventory.save_flavor")
    assert [(e.before is None, e.changed_fields()) for e in saved] == [
        (True, sorted(f.attname for f in Flavor._meta.concrete_fields)),
        (False, ["hourly_price"]),
    ]
    assert {e.actor_name for e in saved} == {"root-admin"}
    (deleted,) = events("inventory.delete_flavor")
    assert deleted.after is None and deleted.before is not None
    assert deleted.before["hourly_price"] == "0.9000"
    assert not Flavor.objects.filter(name="l4").exists()


def test_a_node_is_cordoned_on_its_page_and_only_the_cordon_is_editable(
    submit_admin_form: Any,
) -> None:
    made = node("n1", flavor(), gpus=2)
    url = reverse("admin:inventory_node_change", args=[made.pk])
    response = submit_admin_form(url, {"cordoned": True, "cpu": 1})
    assert response.status_code == 302
    made.refresh_from_db()
    assert made.cordoned and made.cpu == 192  # the sync owns the CPU count
    (event,) = events("inventory.set_node_cordoned")
    assert event.actor_name == "root-admin" and event.changed_fields() == ["cordoned"]


def test_the_bulk_cordon_and_uncordon_audit_each_node_they_change(admin_client: Client) -> None:
    h100 = flavor()
    nodes = [node(f"n{i}", h100, gpus=1) for i in range(3)]
    url = reverse("admin:inventory_node_changelist")
    selected = [str(n.pk) for n in nodes]
    admin_client.post(url, {"action": "cordon", "_selected_action": selected[:2]})
    # cordoning all three changes only the third
    response = admin_client.post(
        url, {"action": "cordon", "_selected_action": selected}, follow=True
    )
    assert "1 nodes cordoned" in response.content.decode()
    assert Node.objects.filter(cordoned=True).count() == 3
    assert len(events("inventory.set_node_cordoned")) == 3
    admin_client.post(url, {"action": "uncordon", "_selected_action": selected})
    assert not Node.objects.filter(cordoned=True).exists()
    cordons = events("inventory.set_node_cordoned")
    assert len(cordons) == 6 and {e.actor_name for e in cordons} == {"root-admin"}


def test_a_gpu_is_not_marked_unhealthy_without_a_reason(submit_admin_form: Any) -> None:
    gpu = node("n1", flavor(), gpus=1).gpus.get()
    url = reverse("admin:inventory_gpu_change", args=[gpu.pk])
    response = submit_admin_form(url, {"healthy": False})
    assert response.status_code == 200
    assert "say why the GPU is unhealthy" in response.content.decode()
    gpu.refresh_from_db()
    assert gpu.healthy and not events("inventory.set_gpu_health")


def test_a_gpu_marked_unhealthy_on_its_node_page_records_why(submit_admin_form: Any) -> None:
    made = node("n1", flavor(), gpus=2)
    url = reverse("admin:inventory_node_change", args=[made.pk])
    response = submit_admin_form(
        url, {"gpus-1-healthy": False, "gpus-1-unhealthy_reason": "fans failing"}
    )
    assert response.status_code == 302
    gpu = Gpu.objects.get(node=made, index=1)
    assert (gpu.healthy, gpu.unhealthy_reason) == (False, "fans failing")
    (event,) = events("inventory.set_gpu_health")
    assert event.reason == "fans failing" and event.actor_name == "root-admin"
    assert event.changed_fields() == ["healthy", "unhealthy_reason"]


def test_a_recovered_gpu_is_marked_healthy_on_its_page_and_its_reason_cleared(
    submit_admin_form: Any,
) -> None:
    gpu = node("n1", flavor(), gpus=1, unhealthy_gpus={0: "XID 48"}).gpus.get()
    url = reverse("admin:inventory_gpu_change", args=[gpu.pk])
    assert submit_admin_form(url, {"healthy": True}).status_code == 302
    gpu.refresh_from_db()
    assert (gpu.healthy, gpu.unhealthy_reason) == (True, "")
    (event,) = events("inventory.set_gpu_health")
    assert event.reason.startswith("recovered") and event.before["unhealthy_reason"] == "XID 48"


def test_recovered_gpus_are_marked_healthy_in_bulk(admin_client: Client) -> None:
    made = node("n1", flavor(), gpus=4, unhealthy_gpus={1: "XID 79", 2: "XID 79"})
    do_set_gpu_health(made.gpus.get(index=3), healthy=False, reason="ECC", acting_user=None)
    picked = [str(pk) for pk in made.gpus.filter(index__in=[0, 1, 2]).values_list("pk", flat=True)]
    url = reverse("admin:inventory_gpu_changelist")
    response = admin_client.post(
        url, {"action": "mark_healthy", "_selected_action": picked}, follow=True
    )
    assert "2 GPUs marked healthy" in response.content.decode()
    assert list(made.gpus.filter(healthy=False).values_list("index", flat=True)) == [3]
    recoveries = [e for e in events("inventory.set_gpu_health") if e.actor_name == "root-admin"]
    assert len(recoveries) == 2


@pytest.mark.parametrize(
    "url_name",
    ["inventory_node_add", "inventory_gpu_add", "inventory_node_delete", "inventory_gpu_delete"],
    ids=["adding a node", "adding a GPU", "deleting a node", "deleting a GPU"],
)
def test_nodes_and_gpus_come_and_go_with_the_sync_not_the_admin(
    admin_client: Client, url_name: str
) -> None:
    made = node("n1", flavor(), gpus=1)
    args = (
        [] if url_name.endswith("_add") else [made.pk if "node" in url_name else made.gpus.get().pk]
    )
    assert admin_client.get(reverse(f"admin:{url_name}", args=args)).status_code == 403
