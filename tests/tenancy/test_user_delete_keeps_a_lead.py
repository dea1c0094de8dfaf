"""Deleting users on the admin site keeps the tenancy rules: a delete that would leave a
tenant with members but no lead is refused, naming the tenant (one user or the selected ones),
and the memberships and site roles a delete does remove are removed through the tenancy
actions, each with its audit row."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.test import Client
from django.urls import reverse
from domain_builders import tenant, user

from gpupool.audit.models import AuditEvent
from gpupool.tenancy.admin import remove_from_tenancy
from gpupool.tenancy.models import Membership, SiteRole

pytestmark = pytest.mark.django_db


def delete_one(client: Client, account: Any) -> Any:
    """Confirm the admin's delete page of ``account``."""
    return client.post(reverse("admin:auth_user_delete", args=[account.pk]), {"post": "yes"})


def delete_selected(client: Client, *accounts: Any) -> Any:
    """Confirm the admin's "delete selected" action on ``accounts``."""
    return client.post(
        reverse("admin:auth_user_changelist"),
        {
            "action": "delete_selected",
            "_selected_action": [account.pk for account in accounts],
            "post": "yes",
        },
    )


def usernames() -> set[str]:
    return set(get_user_model().objects.values_list("username", flat=True))


def removals() -> list[tuple[str, str, str]]:
    """(action, actor, object) of the audit rows of removed memberships and site roles."""
    return list(
        AuditEvent.objects.filter(
            action__in=["tenancy.remove_membership", "tenancy.revoke_site_role"]
        )
        .order_by("id")
        .values_list("action", "actor_name", "object_repr")
    )


def test_deleting_a_tenants_last_lead_is_refused_naming_the_tenant(admin_client: Client) -> None:
    alice, bob = user("alice"), user("bob")
    tenant("nlp", lead=alice, members=(bob,))
    page = admin_client.get(reverse("admin:auth_user_delete", args=[alice.pk]))
    assert "alice in nlp (lead), the only lead of tenant nlp" in page.content.decode()
    response = delete_one(admin_client, alice)
    assert response.status_code == 200  # the page that says why, not a redirect
    assert "alice in nlp (lead), the only lead of tenant nlp" in response.content.decode()
    assert {"alice", "bob"} <= usernames()
    assert Membership.objects.filter(user=alice, tenant__name="nlp", role="lead").exists()
    assert removals() == []


def test_deleting_selected_users_that_are_a_tenants_leads_is_refused_for_all(
    admin_client: Client,
) -> None:
    alice, dora, bob, carol = user("alice"), user("dora"), user("bob"), user("carol")
    tenant("nlp", lead=alice, members=(bob,))
    tenant("vision", lead=dora, members=(carol,))
    Membership.objects.filter(user=carol).update(role="lead")  # vision keeps carol as lead
    response = delete_selected(admin_client, alice, dora)
    assert response.status_code == 200
    text = response.content.decode()
    assert "alice in nlp (lead), the only lead of tenant nlp" in text
    assert "tenant vision" not in text
    assert {"alice", "dora", "bob", "carol"} <= usernames()
    assert Membership.objects.filter(user__in=[alice, dora]).count() == 2
    assert removals() == []


def test_deleting_all_the_leads_of_a_tenant_together_is_refused(admin_client: Client) -> None:
    alice, dora, bob = user("alice"), user("dora"), user("bob")
    tenant("nlp", lead=alice, members=(bob, dora))
    Membership.objects.filter(user=dora).update(role="lead")
    response = delete_selected(admin_client, alice, dora)
    assert response.status_code == 200
    assert (
        "Memberships: alice in nlp (lead) and dora in nlp (lead), the only leads of tenant nlp"
        in response.content.decode()
    )
    assert {"alice", "dora"} <= usernames()
    assert removals() == []


def test_deleting_a_lead_whose_tenant_has_another_lead_removes_it_audited(
    admin_client: Client,
) -> None:
    alice, dora, bob = user("alice", admin=True), user("dora"), user("bob")
    tenant("nlp", lead=alice, members=(bob,))
    tenant("vision", lead=dora, members=(alice,))
    Membership.objects.filter(user=bob).update(role="lead")
    response = delete_one(admin_client, alice)
    assert response.status_code == 302
    assert "alice" not in usernames()
    assert not Membership.objects.filter(user__username="alice").exists()
    assert not SiteRole.objects.filter(user__username="alice").exists()
    assert removals() == [
        ("tenancy.remove_membership", "root-admin", "alice in vision (member)"),
        ("tenancy.remove_membership", "root-admin", "alice in nlp (lead)"),
        ("tenancy.revoke_site_role", "root-admin", "alice (admin)"),
    ]


def test_deleting_every_member_of_a_tenant_together_may_take_its_lead(
    admin_client: Client,
) -> None:
    alice, bob, carol = user("alice"), user("bob"), user("carol")
    tenant("nlp", lead=alice, members=(bob,))
    response = delete_selected(admin_client, alice, bob, carol)
    assert response.status_code == 302
    assert not {"alice", "bob", "carol"} & usernames()
    assert not Membership.objects.filter(tenant__name="nlp").exists()
    assert [row[2] for row in removals()] == ["bob in nlp (member)", "alice in nlp (lead)"]


def test_the_delete_itself_still_refuses_a_last_lead_and_keeps_everything() -> None:
    """What the confirmation page checks, the removal before the delete checks again under
    the tenant's lock (the tenant may have changed between the two)."""
    alice, bob = user("alice"), user("bob")
    tenant("nlp", lead=alice, members=(bob,))
    with pytest.raises(ValidationError) as refused:
        remove_from_tenancy([alice], acting_user=None)
    assert "only lead of nlp" in " ".join(refused.value.messages)
    assert {"alice", "bob"} <= usernames()
    assert Membership.objects.filter(tenant__name="nlp").count() == 2


def test_the_user_admin_still_adds_and_changes_users(admin_client: Client) -> None:
    """The rest of Django's user admin is as it was (a regression guard)."""
    added = admin_client.post(
        reverse("admin:auth_user_add"),
        {
            "username": "erin",
            "usable_password": "true",
            "password1": "a long pass phrase 77",
            "password2": "a long pass phrase 77",
        },
    )
    assert added.status_code == 302
    erin = get_user_model().objects.get(username="erin")
    assert added["Location"] == reverse("admin:auth_user_change", args=[erin.pk])
    page = admin_client.get(added["Location"])
    assert page.status_code == 200 and "erin" in page.content.decode()
