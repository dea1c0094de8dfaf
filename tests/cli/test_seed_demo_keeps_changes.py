"""`gpupool seed-demo` again (`make demo` resuming the pool) makes only what is missing: the
changes made since -- an approved quota, a budget added to, a new price, a revoked role, a
repaired GPU, a queue's settings -- stay, and a second run writes no audit rows."""

from __future__ import annotations

from datetime import date
from decimal import Decimal
from typing import Any

import pytest
from django.contrib.auth import get_user_model

from gpupool.audit.models import AuditEvent
from gpupool.cli.subcommands.seed_demo import month_period, seed
from gpupool.inventory.actions import do_save_flavor
from gpupool.inventory.models import Flavor, Gpu
from gpupool.quotas.actions import (
    do_add_to_budget,
    do_delete_queue,
    do_save_priority_class,
    do_save_queue,
    do_set_queue_quota,
)
from gpupool.quotas.models import PriorityBudget, PriorityClass, Queue, QueueQuota
from gpupool.tenancy.actions import do_revoke_site_role, do_set_membership
from gpupool.tenancy.models import Membership, SiteRole, Tenant

pytestmark = pytest.mark.django_db

TODAY = date(2026, 12, 6)


@pytest.fixture(autouse=True)
def fast_passwords(settings: Any) -> None:
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


def levels(queue: str, flavor: str = "h100") -> tuple[Decimal, Decimal, Decimal]:
    quota = QueueQuota.objects.get(queue__name=queue, flavor__name=flavor)
    return quota.guarantee, quota.deserved, quota.capability


def test_a_quota_changed_since_stays_when_seeding_again() -> None:
    seed(today=TODAY)
    do_set_queue_quota(
        Queue.objects.get(name="nlp"),
        Flavor.objects.get(name="h100"),
        guarantee=36,
        deserved=53,
        capability=160,
        acting_user=None,
        reason="approved request",
    )
    seed(today=TODAY)
    assert levels("nlp") == (Decimal(36), Decimal(53), Decimal(160))


def test_seeding_twice_writes_no_audit_rows() -> None:
    seed(today=TODAY)
    written = AuditEvent.objects.count()
    seed(today=TODAY)
    assert written > 0 and AuditEvent.objects.count() == written


def test_a_budget_added_to_since_stays_when_seeding_again() -> None:
    seed(today=TODAY)
    start, end = month_period(TODAY)
    nlp, high = Tenant.objects.get(name="nlp"), PriorityClass.objects.get(name="high")
    do_add_to_budget(nlp, high, period_start=start, period_end=end, gpu_hours=100, acting_user=None)
    seed(today=TODAY)
    budget = PriorityBudget.objects.get(tenant=nlp, priority_class=high, period_start=start)
    assert budget.gpu_hours == Decimal(600)
    assert budget.remaining_gpu_hours() == Decimal(600)


def test_a_new_month_gets_its_budget() -> None:
    seed(today=TODAY)
    seed(today=date(2027, 1, 3))
    assert PriorityBudget.objects.filter(period_start=date(2027, 1, 1)).count() == 6


def test_settings_prices_roles_and_gpus_changed_since_stay() -> None:
    seed(today=TODAY)
    h100 = Flavor.objects.get(name="h100")
    h100.hourly_price = Decimal("3.10")
    do_save_flavor(h100, acting_user=None)
    nlp = Queue.objects.get(name="nlp")
    nlp.weight = Decimal(5)
    do_save_queue(nlp, acting_user=None)
    high = PriorityClass.objects.get(name="high")
    high.budget_rate = Decimal(2)
    do_save_priority_class(high, acting_user=None)
    finance = get_user_model().objects.get(username="finance")
    do_revoke_site_role(SiteRole.objects.get(user=finance), acting_user=None)
    member = get_user_model().objects.get(username="ads-member")
    do_set_membership(member, Tenant.objects.get(name="ads"), role="lead", acting_user=None)
    broken = Gpu.objects.filter(healthy=False).count()
    written = AuditEvent.objects.count()

    seed(today=TODAY)

    assert Flavor.objects.get(name="h100").hourly_price == Decimal("3.10")
    assert Queue.objects.get(name="nlp").weight == Decimal(5)
    assert PriorityClass.objects.get(name="high").budget_rate == Decimal(2)
    assert not SiteRole.objects.filter(user=finance).exists()
    assert Membership.objects.get(user=member).role == "lead"
    assert Gpu.objects.filter(healthy=False).count() == broken
    assert AuditEvent.objects.count() == written


def test_a_queue_deleted_since_is_made_again_with_its_quotas() -> None:
    seed(today=TODAY)
    spare = Queue.objects.get(name="recsys")
    for quota in spare.quotas.all():
        quota.delete()  # the test's shortcut: the demo's queue had no work yet
    do_delete_queue(Queue.objects.get(name="recsys"), acting_user=None)
    seed(today=TODAY)
    assert levels("recsys") == (Decimal(32), Decimal(52), Decimal(160))
