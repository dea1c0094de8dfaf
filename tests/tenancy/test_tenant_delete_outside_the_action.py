"""Deleting a tenant anywhere (``manage.py shell``: ``tenant.delete()``, a queryset's
``delete()``) takes its memberships away through the tenancy action, as ``do_delete_tenant``
does: each is audited (``tenancy.remove_membership``, reason ``tenant <name> deleted``), by
the system; and a tenant the action would not delete (budgets, requests, ...) is refused,
deleting nothing."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.core.exceptions import ValidationError
from django.db import transaction
from domain_builders import priority_class, tenant, this_month, user

from gpupool.audit.models import AuditEvent
from gpupool.quotas.models import PriorityBudget
from gpupool.tenancy.actions import do_delete_tenant
from gpupool.tenancy.models import Membership, Tenant

pytestmark = pytest.mark.django_db


def removals() -> list[tuple[str, str, str, str]]:
    """(action, actor, object, reason) of the audit rows of removed memberships."""
    return list(
        AuditEvent.objects.filter(action="tenancy.remove_membership")
        .order_by("id")
        .values_list("action", "actor_name", "object_repr", "reason")
    )


def test_a_tenant_deleted_in_the_shell_leaves_an_audit_row_per_membership() -> None:
    alice, bob = user("alice"), user("bob")
    nlp = tenant("nlp", lead=alice, members=(bob,))
    nlp.delete()
    assert not Tenant.objects.exists() and not Membership.objects.exists()
    assert removals() == [
        ("tenancy.remove_membership", "", "alice in nlp (lead)", "tenant nlp deleted"),
        ("tenancy.remove_membership", "", "bob in nlp (member)", "tenant nlp deleted"),
    ]


def test_a_queryset_delete_of_tenants_audits_each_membership() -> None:
    alice, bob = user("alice"), user("bob")
    tenant("nlp", lead=alice)
    tenant("vision", lead=bob)
    Tenant.objects.all().delete()
    assert sorted(row[2] for row in removals()) == ["alice in nlp (lead)", "bob in vision (lead)"]


def test_the_shell_is_refused_a_tenant_with_a_budget() -> None:
    alice = user("alice")
    nlp = tenant("nlp", lead=alice)
    start, end = this_month()
    PriorityBudget.objects.create(
        tenant=nlp,
        priority_class=priority_class("high", 100, budget_rate=Decimal(1)),
        period_start=start,
        period_end=end,
        gpu_hours=Decimal(10),
    )
    with pytest.raises(ValidationError) as refused, transaction.atomic():
        nlp.delete()
    assert refused.value.message_dict["tenant"] == ["nlp still has budgets"]
    assert Tenant.objects.count() == 1 and Membership.objects.count() == 1
    assert PriorityBudget.objects.count() == 1 and removals() == []


def test_the_action_audits_each_membership_once() -> None:
    alice = user("alice")
    do_delete_tenant(tenant("nlp", lead=alice), acting_user=None)
    assert removals() == [
        ("tenancy.remove_membership", "", "alice in nlp (lead)", "tenant nlp deleted")
    ]
    assert AuditEvent.objects.filter(action="tenancy.delete_tenant").count() == 1
