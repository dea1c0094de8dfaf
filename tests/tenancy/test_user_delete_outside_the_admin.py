"""Deleting a user anywhere (``manage.py shell``: ``user.delete()``, a queryset's ``delete()``)
takes the user's memberships and site roles away through the tenancy actions, as the admin's
user delete does: each is audited in the same words (``tenancy.remove_membership`` /
``tenancy.revoke_site_role``, reason ``user <name> deleted``), by the system, and a delete
that would leave a tenant with members but no lead is refused, deleting nothing."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.db import transaction
from django.test import Client
from django.urls import reverse
from domain_builders import tenant, user

from gpupool.audit.models import AuditEvent
from gpupool.tenancy.actions import do_grant_site_role
from gpupool.tenancy.models import Membership, SiteRole

pytestmark = pytest.mark.django_db

REMOVALS = ["tenancy.remove_membership", "tenancy.revoke_site_role"]


def removals() -> list[tuple[str, str, str, str]]:
    """(action, actor, object, reason) of the audit rows of removed memberships and roles."""
    return list(
        AuditEvent.objects.filter(action__in=REMOVALS)
        .order_by("id")
        .values_list("action", "actor_name", "object_repr", "reason")
    )


def usernames() -> set[str]:
    return set(get_user_model().objects.values_list("username", flat=True))


def test_a_user_deleted_in_the_shell_leaves_an_audit_row_per_membership_and_role() -> None:
    alice, bob = user("alice"), user("bob")
    tenant("nlp", lead=alice, members=(bob,))
    tenant("vision", lead=bob)
    do_grant_site_role(bob, role="finance", acting_user=None)
    bob.delete()
    assert usernames() == {"alice"}
    assert removals() == [
        ("tenancy.remove_membership", "", "bob in nlp (member)", "user bob deleted"),
        ("tenancy.remove_membership", "", "bob in vision (lead)", "user bob deleted"),
        ("tenancy.revoke_site_role", "", "bob (finance)", "user bob deleted"),
    ]
    assert not Membership.objects.filter(user__username="bob").exists()
    assert not SiteRole.objects.filter(user__username="bob").exists()


def test_the_shell_is_refused_the_last_lead_of_a_tenant_with_members() -> None:
    alice, bob = user("alice"), user("bob")
    tenant("nlp", lead=alice, members=(bob,))
    # (in the shell each delete is its own transaction; here, inside the test's, a savepoint)
    with pytest.raises(ValidationError) as refused, transaction.atomic():
        alice.delete()
    assert "alice is the only lead of nlp" in refused.value.message_dict["role"][0]
    # nothing deleted, nothing audited
    assert usernames() == {"alice", "bob"}
    assert Membership.objects.count() == 2
    assert removals() == []


def test_a_queryset_delete_is_judged_as_one_batch() -> None:
    alice, bob, carol = user("alice"), user("bob"), user("carol")
    tenant("nlp", lead=alice, members=(bob,))
    tenant("vision", lead=carol, members=(bob,))
    # alice and bob together leave nlp with nobody: allowed, members first
    get_user_model().objects.filter(username__in=["alice", "bob"]).delete()
    assert usernames() == {"carol"}
    assert [row[2] for row in removals()] == [
        "bob in nlp (member)",
        "bob in vision (member)",
        "alice in nlp (lead)",
    ]
    # carol alone leads vision, which has no other member left: she may go too
    get_user_model().objects.filter(username="carol").delete()
    assert not Membership.objects.exists()


def test_a_user_deleted_on_the_admin_site_is_audited_once_by_the_admin(
    admin_client: Client,
) -> None:
    alice, bob = user("alice"), user("bob")
    tenant("nlp", lead=alice, members=(bob,))
    response = admin_client.post(reverse("admin:auth_user_delete", args=[bob.pk]), {"post": "yes"})
    assert response.status_code == 302
    rows: list[Any] = removals()
    assert rows == [
        ("tenancy.remove_membership", "root-admin", "bob in nlp (member)", "user bob deleted")
    ]
