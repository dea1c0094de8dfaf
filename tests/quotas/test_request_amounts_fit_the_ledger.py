"""A request asks only for what its target can hold: a budget's GPU-hours fit the ledger (and a
grant), a queue quota fits its columns, a justification fits what the admins read. Too much is
refused when the request is filed (400 naming the field, nothing created, nobody mailed), not
when an admin approves it."""

from decimal import Decimal
from typing import Any

import pytest
from django.core import mail
from django.core.exceptions import ValidationError
from domain_builders import flavor, period_fields, priority_class, queue, tenant, this_month, user
from rest_framework.test import APIClient

from gpupool.quotas.actions import do_grant_budget
from gpupool.quotas.models import JUSTIFICATION_MAX_LENGTH, PriorityBudget, QuotaRequest

pytestmark = pytest.mark.django_db


@pytest.fixture
def lead_api() -> dict[str, Any]:
    """Lead lena of tenant nlp (leaf queue nlp), a budgeted class high, an admin to mail."""
    user("ada", admin=True)
    lead = user("lena")
    team = tenant("nlp", lead=lead)
    flavor("h100")
    queue("nlp", parent=queue("root"), tenant=team)
    priority_class("normal", default=True)
    high = priority_class("high", value=100, budget_rate=Decimal(1))
    client = APIClient()
    client.force_authenticate(lead)
    return {"api": client, "team": team, "high": high}


def budget_request(gpu_hours: Any, **fields: Any) -> dict[str, Any]:
    """A submitted budget request for this month, as the API takes it."""
    return {
        "kind": "budget",
        "tenant": "nlp",
        "priority_class": "high",
        **period_fields(),
        "payload": {"gpu_hours": gpu_hours},
        "justification": "the deadline",
        "submit": True,
    } | fields


def refused(response: Any, field: str) -> str:
    assert response.status_code == 400, response.content
    return " ".join(response.json()["error"]["fields"][field])


@pytest.mark.parametrize(
    ("gpu_hours", "why"),
    [(1e30, "at most 99999999.999"), ("0.00001", "at most 3 decimal places")],
    ids=["more than the ledger holds", "finer than a grant"],
)
def test_a_budget_request_the_ledger_cannot_hold_is_refused_naming_payload(
    lead_api: dict, gpu_hours: Any, why: str
) -> None:
    response = lead_api["api"].post(
        "/api/v1/quota-requests/", budget_request(gpu_hours), format="json"
    )
    message = refused(response, "payload")
    assert message.startswith("gpu_hours") and why in message
    assert not QuotaRequest.objects.exists()
    assert mail.outbox == []


def test_the_largest_budget_request_the_ledger_holds_is_accepted(lead_api: dict) -> None:
    response = lead_api["api"].post(
        "/api/v1/quota-requests/", budget_request("99999999.999"), format="json"
    )
    assert response.status_code == 201, response.content


def test_a_queue_quota_request_beyond_its_columns_is_refused_naming_payload(
    lead_api: dict,
) -> None:
    response = lead_api["api"].post(
        "/api/v1/quota-requests/",
        {
            "kind": "queue-quota",
            "queue": "nlp",
            "flavor": "h100",
            "payload": {"guarantee": 0, "deserved": 8, "capability": 1e12},
            "justification": "more",
        },
        format="json",
    )
    assert refused(response, "payload").startswith("capability must be at most")


def test_an_over_long_justification_is_refused_saying_the_limit(lead_api: dict) -> None:
    response = lead_api["api"].post(
        "/api/v1/quota-requests/",
        budget_request(10, justification="x" * 20_000),
        format="json",
    )
    assert f"at most {JUSTIFICATION_MAX_LENGTH:,} characters" in refused(response, "justification")
    assert not QuotaRequest.objects.exists()
    assert mail.outbox == []


def test_a_grant_beyond_the_ledger_is_refused_naming_gpu_hours(lead_api: dict) -> None:
    start, end = this_month()
    with pytest.raises(ValidationError) as error:
        do_grant_budget(
            lead_api["team"],
            lead_api["high"],
            period_start=start,
            period_end=end,
            gpu_hours=Decimal("100000000"),
            acting_user=None,
        )
    assert "what the ledger holds" in error.value.message_dict["gpu_hours"][0]
    assert not PriorityBudget.objects.exists()
