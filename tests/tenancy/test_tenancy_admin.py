"""The tenancy admin writes only through the tenancy actions: tenants with their namespaces and
members, memberships and site roles are each audited with the admin as actor."""

from typing import Any

import pytest
from django.test import Client
from django.urls import reverse
from domain_builders import tenant, user

from gpupool.audit.models import AuditEvent
from gpupool.tenancy.models import Membership, SiteRole, Tenant

pytestmark = pytest.mark.django_db


def actions_recorded() -> list[tuple[str, str]]:
    """(action, actor) of every audit row, oldest first."""
    return list(AuditEvent.objects.order_by("id").values_list("action", "actor_name"))


def test_a_tenant_added_with_namespaces_and_a_lead_is_audited(
    submit_admin_form: Any,
) -> None:
    alice = user("alice")
    before = len(actions_recorded())
    response = submit_admin_form(
        reverse("admin:tenancy_tenant_add"),
        {
            "name": "nlp",
            "organization": "research",
            "namespaces-TOTAL_FORMS": "2",
            "namespaces-0-name": "nlp",
            "namespaces-1-name": "nlp-eval",
            "memberships-TOTAL_FORMS": "1",
            "memberships-0-user": alice.pk,
            "memberships-0-role": "lead",
        },
    )
    assert response.status_code == 302
    made = Tenant.objects.get(name="nlp")
    assert made.namespace_names() == ["nlp", "nlp-eval"]
    assert Membership.objects.get(tenant=made).role == "lead"
    assert actions_recorded()[before:] == [
        ("tenancy.save_tenant", "root-admin"),  # the tenant
        ("tenancy.save_tenant", "root-admin"),  # its namespaces
        ("tenancy.set_membership", "root-admin"),
    ]


def test_a_namespace_of_another_tenant_is_refused_on_the_tenant_page(
    submit_admin_form: Any,
) -> None:
    tenant("nlp", namespaces=("shared",))
    vision = tenant("vision")
    url = reverse("admin:tenancy_tenant_change", args=[vision.pk])
    response = submit_admin_form(
        url, {"namespaces-TOTAL_FORMS": "1", "namespaces-0-name": "shared"}
    )
    assert response.status_code == 200
    assert "This namespace already belongs to a tenant." in response.content.decode()
    assert vision.namespace_names() == []


def test_namespaces_removed_and_renamed_on_the_tenant_page_are_one_audited_change(
    submit_admin_form: Any,
) -> None:
    team = tenant("nlp", namespaces=("nlp", "nlp-old", "nlp-tmp"))
    url = reverse("admin:tenancy_tenant_change", args=[team.pk])
    # rows are in name order: nlp, nlp-old, nlp-tmp
    response = submit_admin_form(
        url, {"namespaces-1-name": "nlp-eval", "namespaces-2-DELETE": True}
    )
    assert response.status_code == 302
    assert team.namespace_names() == ["nlp", "nlp-eval"]
    event = AuditEvent.objects.filter(action="tenancy.save_tenant").order_by("id").last()
    assert event is not None and event.actor_name == "root-admin"
    assert event.changed_fields() == ["namespaces"]


def test_deleting_a_tenant_in_the_admin_removes_its_members_audited(
    admin_client: Client,
) -> None:
    team = tenant("nlp", members=(user("alice"),), namespaces=("nlp",))
    url = reverse("admin:tenancy_tenant_delete", args=[team.pk])
    assert admin_client.post(url, {"post": "yes"}).status_code == 302
    assert not Tenant.objects.exists()
    assert actions_recorded()[-2:] == [
        ("tenancy.remove_membership", "root-admin"),
        ("tenancy.delete_tenant", "root-admin"),
    ]


def test_memberships_are_added_changed_and_removed_on_their_own_pages(
    admin_client: Client, submit_admin_form: Any
) -> None:
    team = tenant("nlp")
    alice = user("alice")
    add = reverse("admin:tenancy_membership_add")
    response = submit_admin_form(add, {"user": alice.pk, "tenant": team.pk, "role": "member"})
    assert response.status_code == 302
    membership = Membership.objects.get()
    change = reverse("admin:tenancy_membership_change", args=[membership.pk])
    assert submit_admin_form(change, {"role": "lead"}).status_code == 302
    delete = reverse("admin:tenancy_membership_delete", args=[membership.pk])
    assert admin_client.post(delete, {"post": "yes"}).status_code == 302
    assert not Membership.objects.exists()
    assert actions_recorded()[-3:] == [
        ("tenancy.set_membership", "root-admin"),
        ("tenancy.set_membership", "root-admin"),
        ("tenancy.remove_membership", "root-admin"),
    ]


def test_site_roles_are_granted_and_revoked_in_the_admin(
    admin_client: Client, submit_admin_form: Any
) -> None:
    bob = user("bob")
    response = submit_admin_form(
        reverse("admin:tenancy_siterole_add"), {"user": bob.pk, "role": "finance"}
    )
    assert response.status_code == 302
    role = SiteRole.objects.get(user=bob)
    delete = reverse("admin:tenancy_siterole_delete", args=[role.pk])
    assert admin_client.post(delete, {"post": "yes"}).status_code == 302
    assert not SiteRole.objects.filter(user=bob).exists()
    assert actions_recorded()[-2:] == [
        ("tenancy.grant_site_role", "root-admin"),
        ("tenancy.revoke_site_role", "root-admin"),
    ]
