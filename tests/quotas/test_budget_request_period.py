"""A budget request names the period it adds to: when the period's budget ends on another
day, the request is refused naming ``period_end`` when it is filed, edited and submitted (the
rule approval runs, ``budget_target_refusal``), not only at approval naming ``payload``."""

from __future__ import annotations

from datetime import date, timedelta
from decimal import Decimal

import pytest
from django.core.exceptions import ValidationError
from domain_builders import flavor, priority_class, queue, tenant, this_month, user

from gpupool.audit.models import AuditEvent
from gpupool.quotas.actions import (
    do_create_quota_request,
    do_grant_budget,
    do_submit_quota_request,
    do_update_quota_request,
)
from gpupool.quotas.models import QuotaRequest

pytestmark = pytest.mark.django_db


@pytest.fixture
def world() -> dict[str, object]:
    """Tenant nlp (lead ``lead``) and class ``high``; ``start`` and ``end`` are this month's
    period, ``other_end`` an end two weeks after it (still to come, so only "another end")."""
    flavor("h100")
    lead = user("lead")
    team = tenant("nlp", lead=lead)
    queue("nlp", parent=queue("root"), tenant=team)
    priority_class("normal", default=True)
    start, end = this_month()
    return {
        "lead": lead,
        "team": team,
        "high": priority_class("high", value=100, budget_rate=Decimal(1)),
        "start": start,
        "end": end,
        "other_end": end + timedelta(days=14),
    }


def grant(world: dict, end: date) -> None:
    do_grant_budget(
        world["team"],
        world["high"],
        period_start=world["start"],
        period_end=end,
        gpu_hours=100,
        acting_user=None,
    )


def ask(world: dict, end: date, *, submit: bool = False) -> QuotaRequest:
    return do_create_quota_request(
        kind="budget",
        tenant=world["team"],
        requested_by=world["lead"],
        justification="deadline in December",
        payload={"gpu_hours": 200},
        priority_class=world["high"],
        period_start=world["start"],
        period_end=end,
        submit=submit,
    )


@pytest.mark.parametrize("submit", [False, True], ids=["as a draft", "submitted at once"])
def test_a_request_naming_another_end_is_refused_when_filed(world: dict, submit: bool) -> None:
    grant(world, world["end"])
    with pytest.raises(ValidationError) as error:
        ask(world, world["other_end"], submit=submit)
    assert list(error.value.message_dict) == ["period_end"]
    said = f"ends on {world['end']:%Y-%m-%d}, not {world['other_end']:%Y-%m-%d}"
    assert said in error.value.message_dict["period_end"][0]
    assert not QuotaRequest.objects.exists()


def test_a_draft_whose_budget_ends_elsewhere_is_refused_when_submitted(world: dict) -> None:
    request = ask(world, world["other_end"])  # no budget yet: the request would make one
    grant(world, world["end"])  # then the admin grants the month
    audited = AuditEvent.objects.count()
    with pytest.raises(ValidationError) as error:
        do_submit_quota_request(request, acting_user=world["lead"])
    assert list(error.value.message_dict) == ["period_end"]
    assert QuotaRequest.objects.get(pk=request.pk).state == "draft"
    assert AuditEvent.objects.count() == audited


def test_a_draft_edited_to_another_end_is_refused(world: dict) -> None:
    grant(world, world["end"])
    request = ask(world, world["end"])
    with pytest.raises(ValidationError) as error:
        do_update_quota_request(
            request, acting_user=world["lead"], period_end=world["end"] + timedelta(days=19)
        )
    assert list(error.value.message_dict) == ["period_end"]


def test_a_period_overlapping_another_budget_is_refused_naming_period_start(world: dict) -> None:
    grant(world, world["end"])
    with pytest.raises(ValidationError) as error:
        do_create_quota_request(
            kind="budget",
            tenant=world["team"],
            requested_by=world["lead"],
            justification="deadline",
            payload={"gpu_hours": 10},
            priority_class=world["high"],
            period_start=world["start"] + timedelta(days=9),
            period_end=world["end"] + timedelta(days=9),
        )
    assert list(error.value.message_dict) == ["period_start"]


def test_a_request_naming_the_budgets_period_is_filed_and_submitted(world: dict) -> None:
    grant(world, world["end"])
    request = ask(world, world["end"], submit=True)
    assert request.state == "submitted"
