"""A budget request adds its GPU-hours to the period's grant; it never replaces the grant
(what was spent stays spent, the ledger shows the addition)."""

from __future__ import annotations

from datetime import date, timedelta
from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.utils import timezone
from domain_builders import this_month
from two_teams import budget_request

from gpupool.quotas.actions import (
    do_approve_and_apply_quota_request,
    do_grant_budget,
    do_spend_budget,
)
from gpupool.quotas.models import PriorityBudget

pytestmark = pytest.mark.django_db


def month() -> dict[str, date]:
    """This month's period, as the actions take it."""
    start, end = this_month()
    return {"period_start": start, "period_end": end}


def ask_for(pool: Any, gpu_hours: int, **period: date) -> Any:
    """lena's submitted request adding ``gpu_hours`` for this month (``period`` changes it)."""
    asked = month() | period
    return budget_request(
        pool,
        gpu_hours,
        period=(asked["period_start"], asked["period_end"]),
        justification="the deadline moved up",
        submit=True,
    )


def test_an_approved_budget_request_adds_to_what_was_granted(pool: Any) -> None:
    # given 100 GPU-hours granted for this month, 30 of them spent
    budget = do_grant_budget(
        pool.nlp, pool.high, gpu_hours=100, acting_user=pool.users["ada"], **month()
    )
    do_spend_budget(budget, gpu_hours=30, workload=None, at=timezone.now())
    # when a request for 50 more is approved
    do_approve_and_apply_quota_request(ask_for(pool, 50), acting_user=pool.users["ada"])
    # then 150 are granted, 120 remain, and the ledger shows the grant and the addition
    budget.refresh_from_db()
    assert budget.gpu_hours == 150
    assert budget.remaining_gpu_hours() == 120
    grants = budget.entries.filter(kind="grant").order_by("id")
    assert [entry.gpu_hours for entry in grants] == [100, 50]


def test_a_budget_request_for_a_period_without_a_budget_starts_one(pool: Any) -> None:
    do_approve_and_apply_quota_request(ask_for(pool, 80), acting_user=pool.users["ada"])
    budget = PriorityBudget.objects.get(tenant=pool.nlp)
    assert (budget.gpu_hours, budget.period_end) == (80, month()["period_end"])


def test_an_addition_to_a_budget_with_another_end_is_refused(pool: Any) -> None:
    """Filed naming another end than the budget's, it is refused at once, naming the period's
    end; a budget whose end moved after the request was filed is refused at approval. The
    other ends are after this month's, still to come (a past end is refused for that)."""
    start, end = this_month()
    other_end, moved_end = end + timedelta(days=14), end + timedelta(days=19)
    do_grant_budget(
        pool.nlp,
        pool.high,
        gpu_hours=100,
        acting_user=pool.users["ada"],
        period_start=start,
        period_end=other_end,
    )
    with pytest.raises(ValidationError) as refused:
        ask_for(pool, 50)
    assert f"ends on {other_end:%Y-%m-%d}" in refused.value.message_dict["period_end"][0]
    request = ask_for(pool, 50, period_end=other_end)
    PriorityBudget.objects.filter(tenant=pool.nlp).update(period_end=moved_end)
    with pytest.raises(ValidationError) as refused:
        do_approve_and_apply_quota_request(request, acting_user=pool.users["ada"])
    assert f"ends on {moved_end:%Y-%m-%d}" in refused.value.message_dict["payload"][0]
    assert PriorityBudget.objects.get(tenant=pool.nlp).gpu_hours == 100
