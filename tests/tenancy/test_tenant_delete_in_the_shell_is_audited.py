"""A tenant deleted anywhere (``manage.py shell``: ``tenant.delete()``, a queryset's
``delete()``) leaves the audit row ``do_delete_tenant`` writes for the delete itself
(``tenancy.delete_tenant``: the tenant's last state and namespaces as ``before``, nothing
after), by the system, after its memberships' rows; the action's own delete is audited once,
with its acting user and reason; a refused delete audits nothing."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.core.exceptions import ValidationError
from django.db import transaction
from domain_builders import priority_class, tenant, this_month, user

from gpupool.audit.models import AuditEvent
from gpupool.quotas.models import PriorityBudget
from gpupool.tenancy.actions import do_delete_tenant
from gpupool.tenancy.models import Tenant

pytestmark = pytest.mark.django_db


def deletes() -> list[AuditEvent]:
    return list(AuditEvent.objects.filter(action="tenancy.delete_tenant").order_by("id"))


def test_a_tenant_deleted_in_the_shell_audits_its_delete_as_the_action_does() -> None:
    admin = user("root-admin", admin=True)
    by_the_shell = tenant("nlp", lead=user("alice"), namespaces=("nlp", "nlp-eval"))
    by_the_action = tenant("vision", namespaces=("vision",))
    shell_pk, action_pk = str(by_the_shell.pk), str(by_the_action.pk)
    by_the_shell.delete()
    do_delete_tenant(by_the_action, acting_user=admin)
    shell, action = deletes()
    assert (shell.object_id, action.object_id) == (shell_pk, action_pk)
    # the same row: its type, repr, last state (namespaces too) and no after, by the system
    assert (shell.object_type, shell.object_repr) == ("tenancy.tenant", "nlp")
    assert set(shell.before) == set(action.before)
    assert (shell.before["name"], shell.before["namespaces"]) == ("nlp", ["nlp", "nlp-eval"])
    assert shell.after is None and (shell.actor_name, shell.reason) == ("", "")
    # after the memberships it took away
    removal = AuditEvent.objects.get(action="tenancy.remove_membership")
    assert removal.reason == "tenant nlp deleted" and removal.pk < shell.pk


def test_a_queryset_delete_audits_each_tenant_once() -> None:
    tenant("nlp", lead=user("alice"))
    tenant("vision")
    Tenant.objects.all().delete()
    assert sorted(event.object_repr for event in deletes()) == ["nlp", "vision"]


def test_the_action_s_delete_is_audited_once_with_its_actor_and_reason() -> None:
    admin = user("root-admin", admin=True)
    do_delete_tenant(tenant("nlp", lead=user("alice")), acting_user=admin, reason="dissolved")
    [event] = deletes()
    assert (event.actor_name, event.reason) == ("root-admin", "dissolved")


def test_a_refused_delete_in_the_shell_audits_nothing() -> None:
    nlp = tenant("nlp", lead=user("alice"))
    start, end = this_month()
    PriorityBudget.objects.create(
        tenant=nlp,
        priority_class=priority_class("high", 100, budget_rate=Decimal(1)),
        period_start=start,
        period_end=end,
        gpu_hours=Decimal(10),
    )
    with pytest.raises(ValidationError), transaction.atomic():
        nlp.delete()
    assert Tenant.objects.count() == 1 and deletes() == []
