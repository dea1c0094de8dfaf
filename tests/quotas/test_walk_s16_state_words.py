"""Walk-through s16: a step refused because of where a request stands says so in a sentence,
not as code ("state: request 1 is rejected; this needs submitted"): which request, what it
is and since when, and what may still be done. The refusal stays keyed ``state`` (the API's
400 names it; docs/api.md)."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.utils import timezone
from domain_builders import flavor, node, priority_class, queue, tenant, user

from gpupool.quotas.actions import (
    decision_refusal,
    do_apply_quota_request,
    do_approve_and_apply_quota_request,
    do_approve_quota_request,
    do_create_quota_request,
    do_reject_quota_request,
    do_start_what_if,
    do_submit_quota_request,
    do_update_quota_request,
)
from gpupool.quotas.models import QuotaRequest

pytestmark = pytest.mark.django_db

CODE_WORDS = ("this needs", "; this", "request 1 ")


@pytest.fixture
def world() -> dict[str, Any]:
    h100 = flavor("h100")
    node("n1", h100, gpus=8)
    lead = user("lead")
    team = tenant("nlp", lead=lead)
    team_queue = queue("nlp", parent=queue("root"), tenant=team)
    priority_class("normal", default=True)
    priority_class("high", value=100, budget_rate=Decimal(1))
    return {
        "h100": h100,
        "lead": lead,
        "admin": user("admin", admin=True),
        "team": team,
        "queue": team_queue,
    }


def ask(world: dict[str, Any], *, submit: bool) -> QuotaRequest:
    return do_create_quota_request(
        kind="queue-quota",
        tenant=world["team"],
        requested_by=world["lead"],
        justification="the new model needs more",
        payload={"guarantee": 2, "deserved": 4, "capability": 8},
        queue=world["queue"],
        flavor=world["h100"],
        submit=submit,
    )


def state_words(error: pytest.ExceptionInfo[ValidationError] | ValidationError) -> str:
    found = error.value if isinstance(error, pytest.ExceptionInfo) else error
    assert list(found.message_dict) == ["state"]
    (message,) = found.message_dict["state"]
    assert not any(code in message for code in CODE_WORDS), message
    return message


def on(moment: datetime | None) -> str:
    assert moment is not None
    return f"{timezone.localdate(moment):%Y-%m-%d}"


def test_a_rejected_request_says_when_it_was_rejected_and_that_it_is_decided(
    world: dict,
) -> None:
    request = do_reject_quota_request(
        ask(world, submit=True), acting_user=world["admin"], note="not now"
    )
    refusal = decision_refusal(request, acting_user=world["admin"], approve=True)
    assert isinstance(refusal, ValidationError)
    assert state_words(refusal) == (
        f"request #{request.pk} was rejected on {on(request.decided_at)}, so it can no longer "
        "be approved or rejected"
    )
    with pytest.raises(ValidationError) as error:
        do_approve_and_apply_quota_request(request, acting_user=world["admin"], note="ok")
    assert state_words(error).startswith(f"request #{request.pk} was rejected on ")


def test_a_submitted_request_cannot_be_changed_and_says_how_to_withdraw_it(world: dict) -> None:
    request = ask(world, submit=True)
    with pytest.raises(ValidationError) as error:
        do_update_quota_request(request, acting_user=world["lead"], justification="more")
    assert state_words(error) == (
        f"request #{request.pk} is submitted, not a draft, so it can no longer be changed: to "
        "change it, withdraw it with Withdraw (it is kept, withdrawn) and file a new request"
    )
    with pytest.raises(ValidationError) as error:
        do_submit_quota_request(request, acting_user=world["lead"])
    assert state_words(error).startswith(
        f"request #{request.pk} is submitted, not a draft, so it can no longer be submitted again"
    )


def test_a_draft_is_decided_only_once_submitted(world: dict) -> None:
    draft = ask(world, submit=False)
    refusal = decision_refusal(draft, acting_user=world["admin"], approve=False)
    assert isinstance(refusal, ValidationError)
    assert state_words(refusal) == (
        f"request #{draft.pk} is a draft: it can be approved or rejected only once its "
        "requester submits it"
    )


def test_applying_needs_an_approval_first(world: dict) -> None:
    request = ask(world, submit=True)
    with pytest.raises(ValidationError) as error:
        do_apply_quota_request(request, acting_user=world["admin"])
    assert state_words(error) == (
        f"request #{request.pk} is submitted, not yet approved: it can be applied once an "
        "admin approves it"
    )
    applied = do_approve_and_apply_quota_request(request, acting_user=world["admin"], note="ok")
    with pytest.raises(ValidationError) as error:
        do_apply_quota_request(applied, acting_user=world["admin"])
    assert state_words(error) == (
        f"request #{request.pk} was applied on {on(applied.applied_at)}, so it can no longer "
        "be applied"
    )


def test_a_decided_request_is_not_replayed(world: dict) -> None:
    request = do_approve_quota_request(
        ask(world, submit=True), acting_user=world["admin"], note="ok"
    )
    with pytest.raises(ValidationError) as error:
        do_start_what_if(request, acting_user=world["admin"])
    assert state_words(error) == (
        f"request #{request.pk} was approved on {on(request.decided_at)}, so it can no longer "
        "be replayed in a what-if"
    )
