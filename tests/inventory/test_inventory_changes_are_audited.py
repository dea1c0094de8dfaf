"""Flavor edits, node syncs, cordons and GPU health changes are audited with who, why, before
and after; the system (the cluster sync, health checks) acts as nobody; doing again what is
already so records nothing."""

from decimal import Decimal
from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone
from domain_builders import flavor, node, queue, quota, user

from gpupool.audit.models import AuditEvent
from gpupool.inventory.actions import (
    UNHEALTHY_AT_SYNC,
    do_add_nodes,
    do_delete_flavor,
    do_save_flavor,
    do_set_gpu_health,
    do_set_node_cordoned,
)
from gpupool.inventory.models import Flavor, Gpu, Node

pytestmark = pytest.mark.django_db


def test_a_flavor_change_is_audited_and_saving_it_unchanged_is_not() -> None:
    admin = user("root-admin", admin=True)
    h100 = flavor("h100")
    h100.hourly_price = Decimal("3")
    do_save_flavor(h100, acting_user=admin, reason="new contract")
    do_save_flavor(h100, acting_user=admin)
    created, changed = AuditEvent.objects.filter(action="inventory.save_flavor").order_by("id")
    assert created.before is None and created.actor is None
    assert changed.actor == admin and changed.reason == "new contract"
    assert changed.changed_fields() == ["hourly_price"]
    assert (changed.before["hourly_price"], changed.after["hourly_price"]) == ("2.5000", "3.0000")


def test_a_flavor_in_use_is_not_deleted_and_nothing_is_recorded() -> None:
    h100 = flavor("h100")
    quota(queue("team", parent=queue("root")), h100, 0, 1, 1)
    with pytest.raises(ValidationError) as error:
        do_delete_flavor(h100, acting_user=None)
    assert "queue quotas" in str(error.value)
    assert Flavor.objects.filter(name="h100").exists()
    assert not AuditEvent.objects.filter(action="inventory.delete_flavor").exists()


def test_an_unused_flavor_is_deleted_with_its_last_state_recorded() -> None:
    do_delete_flavor(flavor("l4", gpu_memory_gb=24), acting_user=None, reason="retired")
    event = AuditEvent.objects.get(action="inventory.delete_flavor")
    assert event.after is None and event.before["gpu_memory_gb"] == 24
    assert event.reason == "retired" and not Flavor.objects.exists()


def test_a_node_sync_is_audited_as_the_system_with_its_gpus_and_their_health() -> None:
    made = node("n1", flavor(), gpus=4, unhealthy_gpus={2: "XID 79"})
    event = AuditEvent.objects.get(action="inventory.sync_node")
    assert event.actor is None and event.actor_name == ""
    assert event.before is None and event.object_id == str(made.pk)
    assert event.after["gpus"] == 4 and event.after["unhealthy_gpus"] == {"2": "XID 79"}
    assert Gpu.objects.get(node=made, index=2).unhealthy_reason == "XID 79"


def test_new_nodes_added_at_once_with_their_gpus_and_one_audit_row_leaving_doubtful_ones(
    django_assert_max_num_queries: Any,
) -> None:
    h100, a100 = flavor("h100"), flavor("a100", gpu_memory_gb=40)
    node("old", h100, gpus=2, nvlink_domain="clique-1")
    at = timezone.now()

    def new(name: str, of: Flavor = h100, **fields: Any) -> Node:
        return Node(name=name, flavor=of, cpu=96, memory_gb=1024, **fields)

    nodes = [(new(f"n{i}"), 8, {7: "not allocatable"} if i == 0 else {}) for i in range(20)]
    doubtful = [
        (new("old"), 8, {}),  # exists: do_sync_node's
        (new("mixed", a100, nvlink_domain="clique-1"), 8, {}),  # a domain of h100 already
        (new("bad-labels", labels={"k": 1}), 8, {}),  # labels are strings
        (new("bad-index"), 2, {5: "gone"}),  # no GPU 5 on a 2-GPU node
    ]
    with django_assert_max_num_queries(8):  # not a query per node
        left = do_add_nodes([*nodes, *doubtful], at=at, reason="cluster sync")

    assert [n.name for n in left] == ["old", "mixed", "bad-labels", "bad-index"]
    added = Node.objects.filter(name__startswith="n").order_by("name")
    assert added.count() == 20 and {n.last_synced_at for n in added} == {at}
    assert {n.nvlink_domain for n in added} == {f"n{i}" for i in range(20)}  # its own domain
    assert Gpu.objects.filter(node__name="n3").count() == 8
    broken = Gpu.objects.get(node__name="n0", healthy=False)
    assert (broken.index, broken.unhealthy_reason) == (7, "not allocatable")
    (event,) = AuditEvent.objects.filter(action="inventory.add_nodes")
    assert event.actor is None and event.after["nodes"] == 20 and event.reason == "cluster sync"
    with pytest.raises(ValidationError, match="an NVLink domain has one flavor"):
        node("mixed", a100, nvlink_domain="clique-1")  # what the one-by-one path then says


def test_syncing_a_node_again_unchanged_records_nothing() -> None:
    h100 = flavor()
    node("n1", h100, gpus=4, unhealthy_gpus={2: "XID 79"})
    node("n1", h100, gpus=4, unhealthy_gpus={2: "XID 79"})
    assert AuditEvent.objects.filter(action="inventory.sync_node").count() == 1


def test_a_resync_records_only_what_changed_on_the_node_and_its_gpus() -> None:
    h100 = flavor()
    node("n1", h100, gpus=4, unhealthy_gpus={2: "XID 79"})
    node("n1", h100, gpus=2, cpu=96)
    event = AuditEvent.objects.filter(action="inventory.sync_node").order_by("id").last()
    assert event is not None
    assert event.changed_fields() == ["cpu", "gpus", "unhealthy_gpus"]
    assert event.after["unhealthy_gpus"] == {}


def test_a_gpu_the_sync_reports_unhealthy_without_a_reason_keeps_the_one_it_has() -> None:
    h100 = flavor()
    node("n1", h100, gpus=2, unhealthy_gpus={0: "XID 48: double-bit ECC"})
    node("n1", h100, gpus=2, unhealthy_gpus=[0, 1])
    reasons = dict(Gpu.objects.values_list("index", "unhealthy_reason"))
    assert reasons == {0: "XID 48: double-bit ECC", 1: UNHEALTHY_AT_SYNC}


def test_cordoning_is_audited_once_with_the_actor_and_the_reason() -> None:
    admin = user("root-admin", admin=True)
    made = node("n1", flavor(), gpus=1)
    do_set_node_cordoned(made, cordoned=True, acting_user=admin, reason="draining for repair")
    do_set_node_cordoned(made, cordoned=True, acting_user=admin, reason="again")
    event = AuditEvent.objects.get(action="inventory.set_node_cordoned")
    assert event.actor == admin and event.reason == "draining for repair"
    assert (event.before, event.after) == (
        {"name": "n1", "cordoned": False},
        {"name": "n1", "cordoned": True},
    )


def test_a_gpu_is_not_marked_unhealthy_without_saying_why() -> None:
    gpu = node("n1", flavor(), gpus=1).gpus.get()
    with pytest.raises(ValidationError) as error:
        do_set_gpu_health(gpu, healthy=False, reason=" ", acting_user=None)
    assert "unhealthy_reason" in error.value.message_dict
    gpu.refresh_from_db()
    assert gpu.healthy
    assert not AuditEvent.objects.filter(action="inventory.set_gpu_health").exists()


def test_an_unhealthy_gpu_records_why_and_its_recovery_clears_the_reason() -> None:
    admin = user("root-admin", admin=True)
    gpu = node("n1", flavor(), gpus=1).gpus.get()
    # a health check (the system) marks it unhealthy, saying why
    do_set_gpu_health(gpu, healthy=False, reason="XID 79: fallen off the bus", acting_user=None)
    # an admin marks it healthy after the repair
    do_set_gpu_health(gpu, healthy=True, reason="card reseated", acting_user=admin)
    gpu.refresh_from_db()
    assert (gpu.healthy, gpu.unhealthy_reason) == (True, "")
    broke, recovered = AuditEvent.objects.filter(action="inventory.set_gpu_health").order_by("id")
    assert broke.actor is None and broke.after["unhealthy_reason"] == "XID 79: fallen off the bus"
    assert recovered.actor == admin and recovered.reason == "card reseated"
    assert recovered.changed_fields() == ["healthy", "unhealthy_reason"]


def test_the_database_refuses_an_unhealthy_gpu_without_a_reason_and_a_healthy_one_with() -> None:
    gpu = node("n1", flavor(), gpus=1).gpus.get()
    for healthy, reason in [(False, ""), (True, "XID 79")]:
        with pytest.raises(IntegrityError), transaction.atomic():
            Gpu.objects.filter(pk=gpu.pk).update(healthy=healthy, unhealthy_reason=reason)
