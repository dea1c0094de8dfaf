"""Walk-through s16: a budget request for a period that has ended is refused when it is
filed, edited, submitted, approved and applied, keyed ``period_end`` and saying so in words
(``quotas.actions.past_period_refusal``, the one rule all of them ask). The period has ended
when its end (the first day after it) is on or before the pool's today: ``pool_now`` in the
project's time zone, the day the loop picks a budget by."""

from __future__ import annotations

from datetime import date, timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.utils import timezone
from domain_builders import flavor, priority_class, queue, tenant, user

from gpupool.control.choices import CycleStatus
from gpupool.control.models import SchedulingCycle
from gpupool.quotas.actions import (
    decision_refusal,
    do_apply_quota_request,
    do_approve_and_apply_quota_request,
    do_approve_quota_request,
    do_create_quota_request,
    do_reject_quota_request,
    do_submit_quota_request,
    do_update_quota_request,
)
from gpupool.quotas.choices import QuotaRequestState
from gpupool.quotas.models import PriorityBudget, QuotaRequest

pytestmark = pytest.mark.django_db

PAST = (date(2020, 1, 1), date(2020, 2, 1))
PAST_WORDS = "the period ended on 2020-02-01: a budget for a past period grants nothing"


@pytest.fixture
def world() -> dict[str, Any]:
    flavor("h100")
    lead = user("lead")
    team = tenant("nlp", lead=lead)
    queue("nlp", parent=queue("root"), tenant=team)
    priority_class("normal", default=True)
    return {
        "lead": lead,
        "admin": user("admin", admin=True),
        "team": team,
        "high": priority_class("high", value=100, budget_rate=Decimal(1)),
    }


def today() -> date:
    return timezone.localdate()


def ask(world: dict[str, Any], start: date, end: date, *, submit: bool) -> QuotaRequest:
    return do_create_quota_request(
        kind="budget",
        tenant=world["team"],
        requested_by=world["lead"],
        justification="a deadline",
        payload={"gpu_hours": 10},
        priority_class=world["high"],
        period_start=start,
        period_end=end,
        submit=submit,
    )


def next_month() -> tuple[date, date]:
    return today(), today() + timedelta(days=30)


def period_ended(request: QuotaRequest) -> QuotaRequest:
    """The request as if it had been filed back then: its period now lies in the past."""
    QuotaRequest.objects.filter(pk=request.pk).update(period_start=PAST[0], period_end=PAST[1])
    return QuotaRequest.objects.get(pk=request.pk)


def refused_on_period_end(error: pytest.ExceptionInfo[ValidationError]) -> str:
    assert list(error.value.message_dict) == ["period_end"]
    (message,) = error.value.message_dict["period_end"]
    return message


@pytest.mark.parametrize("submit", [False, True], ids=["as a draft", "submitted at once"])
def test_a_request_for_a_past_period_is_refused_when_filed(world: dict, submit: bool) -> None:
    with pytest.raises(ValidationError) as error:
        ask(world, *PAST, submit=submit)
    assert refused_on_period_end(error).startswith(PAST_WORDS)
    assert not QuotaRequest.objects.exists()


def test_a_draft_cannot_be_moved_into_the_past(world: dict) -> None:
    draft = ask(world, *next_month(), submit=False)
    with pytest.raises(ValidationError) as error:
        do_update_quota_request(
            draft, acting_user=world["lead"], period_start=PAST[0], period_end=PAST[1]
        )
    assert refused_on_period_end(error).startswith(PAST_WORDS)
    assert QuotaRequest.objects.get(pk=draft.pk).period_end == next_month()[1]


def test_a_draft_whose_period_ended_is_refused_when_submitted(world: dict) -> None:
    draft = period_ended(ask(world, *next_month(), submit=False))
    with pytest.raises(ValidationError) as error:
        do_submit_quota_request(draft, acting_user=world["lead"])
    assert refused_on_period_end(error).startswith(PAST_WORDS)
    assert QuotaRequest.objects.get(pk=draft.pk).state == QuotaRequestState.DRAFT


def test_a_submitted_request_whose_period_ended_is_not_approved(world: dict) -> None:
    request = period_ended(ask(world, *next_month(), submit=True))
    refusal = decision_refusal(request, acting_user=world["admin"], approve=True)
    assert isinstance(refusal, ValidationError)
    assert refusal.message_dict["period_end"][0].startswith(PAST_WORDS)
    for approve in (do_approve_quota_request, do_approve_and_apply_quota_request):
        with pytest.raises(ValidationError) as error:
            approve(request, acting_user=world["admin"], note="ok")
        assert refused_on_period_end(error).startswith(PAST_WORDS)
    assert QuotaRequest.objects.get(pk=request.pk).state == QuotaRequestState.SUBMITTED
    assert not PriorityBudget.objects.exists()
    # An admin may still reject it, saying why.
    assert decision_refusal(request, acting_user=world["admin"], approve=False) is None
    rejected = do_reject_quota_request(request, acting_user=world["admin"], note="too late")
    assert rejected.state == QuotaRequestState.REJECTED


def test_an_approved_request_whose_period_ended_since_is_not_applied(world: dict) -> None:
    request = ask(world, *next_month(), submit=True)
    do_approve_quota_request(request, acting_user=world["admin"], note="ok")
    request = period_ended(request)
    with pytest.raises(ValidationError) as error:
        do_apply_quota_request(request, acting_user=world["admin"])
    assert refused_on_period_end(error).startswith(PAST_WORDS)
    assert QuotaRequest.objects.get(pk=request.pk).state == QuotaRequestState.APPROVED
    assert not PriorityBudget.objects.exists()


def test_a_period_ending_today_has_ended_and_one_ending_tomorrow_has_not(world: dict) -> None:
    day = today()
    with pytest.raises(ValidationError) as error:
        ask(world, day - timedelta(days=30), day, submit=True)
    assert refused_on_period_end(error).startswith(f"the period ended on {day:%Y-%m-%d}")
    filed = ask(world, day - timedelta(days=30), day + timedelta(days=1), submit=True)
    assert filed.state == QuotaRequestState.SUBMITTED


def test_the_pools_today_counts_not_the_wall_clocks(world: dict) -> None:
    """A simulated cluster runs ahead of the wall clock: its day decides."""
    wall = timezone.now()
    SchedulingCycle.objects.create(
        started_at=wall,
        finished_at=wall,
        status=CycleStatus.SUCCEEDED,
        cluster_at=wall + timedelta(days=3),
    )
    end = today() + timedelta(days=2)  # after the wall clock's today, before the pool's
    with pytest.raises(ValidationError) as error:
        ask(world, today() - timedelta(days=10), end, submit=True)
    assert refused_on_period_end(error).startswith(f"the period ended on {end:%Y-%m-%d}")
