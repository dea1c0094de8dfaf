"""Tenants own Kubernetes namespaces: set through do_save_tenant, a namespace belongs to at most
one tenant, and every change of a tenant and its namespaces is audited."""

import pytest
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from domain_builders import queue, tenant, user

from gpupool.audit.models import AuditEvent
from gpupool.tenancy.actions import do_delete_tenant, do_save_tenant
from gpupool.tenancy.models import Membership, Tenant, TenantNamespace

pytestmark = pytest.mark.django_db


def test_a_tenant_is_created_with_its_namespaces_and_audited() -> None:
    admin = user("root-admin", admin=True)
    made = do_save_tenant(
        Tenant(name="nlp", organization="research"),
        namespaces=["nlp", "nlp-eval"],
        acting_user=admin,
        reason="new team",
    )
    assert made.namespace_names() == ["nlp", "nlp-eval"]
    event = AuditEvent.objects.get(action="tenancy.save_tenant")
    assert event.actor == admin and event.before is None and event.reason == "new team"
    assert event.after["namespaces"] == ["nlp", "nlp-eval"]


def test_setting_namespaces_leaves_exactly_those_and_records_before_and_after() -> None:
    team = tenant("nlp", namespaces=("nlp", "nlp-old"))
    do_save_tenant(team, namespaces=["nlp", "nlp-eval"], acting_user=None)
    assert team.namespace_names() == ["nlp", "nlp-eval"]
    event = AuditEvent.objects.filter(action="tenancy.save_tenant").order_by("id").last()
    assert event is not None and event.changed_fields() == ["namespaces"]
    assert (event.before["namespaces"], event.after["namespaces"]) == (
        ["nlp", "nlp-old"],
        ["nlp", "nlp-eval"],
    )


def test_saving_a_tenant_unchanged_records_nothing() -> None:
    team = tenant("nlp", namespaces=("nlp",))
    do_save_tenant(team, acting_user=None)
    do_save_tenant(team, namespaces=["nlp"], acting_user=None)
    assert AuditEvent.objects.filter(action="tenancy.save_tenant").count() == 1


def test_a_namespace_belongs_to_at_most_one_tenant() -> None:
    tenant("nlp", namespaces=("shared",))
    vision = tenant("vision")
    with pytest.raises(ValidationError) as error:
        do_save_tenant(vision, namespaces=["vision", "shared"], acting_user=None)
    assert "'shared' belongs to tenant nlp" in error.value.message_dict["namespaces"][0]
    # nothing of the refused change is kept
    assert vision.namespace_names() == []
    assert AuditEvent.objects.filter(object_id=str(vision.pk)).count() == 1  # its creation
    with pytest.raises(IntegrityError), transaction.atomic():
        TenantNamespace.objects.create(tenant=vision, name="shared")


@pytest.mark.parametrize(
    ("names", "message"),
    [
        (["Upper"], "Kubernetes namespace name"),
        (["-dash"], "Kubernetes namespace name"),
        (["a" * 64], "Kubernetes namespace name"),
        (["nlp", "nlp"], "listed twice: nlp"),
    ],
    ids=["capital letters", "a leading dash", "longer than 63", "a repeat"],
)
def test_a_bad_namespace_list_is_refused_naming_the_namespaces_field(
    names: list[str], message: str
) -> None:
    with pytest.raises(ValidationError) as error:
        do_save_tenant(Tenant(name="nlp"), namespaces=names, acting_user=None)
    assert message in error.value.message_dict["namespaces"][0]
    assert not Tenant.objects.exists()


def test_a_tenant_with_queues_is_not_deleted() -> None:
    team = tenant("nlp", namespaces=("nlp",))
    queue("nlp", parent=queue("root"), tenant=team)
    with pytest.raises(ValidationError) as error:
        do_delete_tenant(team, acting_user=None)
    assert "still has queues" in error.value.message_dict["tenant"][0]
    assert team.namespace_names() == ["nlp"]


def test_deleting_a_tenant_removes_its_members_audited_and_frees_its_namespaces() -> None:
    admin = user("root-admin", admin=True)
    team = tenant("nlp", lead=user("alice"), namespaces=("nlp",))
    do_delete_tenant(team, acting_user=admin, reason="team dissolved")
    assert not Membership.objects.exists() and not TenantNamespace.objects.exists()
    removed = AuditEvent.objects.get(action="tenancy.remove_membership")
    assert removed.actor == admin and removed.reason == "tenant nlp deleted"
    deleted = AuditEvent.objects.get(action="tenancy.delete_tenant")
    assert deleted.before["namespaces"] == ["nlp"] and deleted.after is None
    # the namespace is free for another tenant
    tenant("vision", namespaces=("nlp",))
