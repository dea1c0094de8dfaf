"""A lead who filed a request by mistake withdraws it before an admin decides: a submitted
request is kept, ``withdrawn`` (the admins may have seen it), audited; only by its requester,
only while submitted; it is no longer open, so a new request for its target may be filed, and
it can no longer be approved or rejected (the refusal says it was withdrawn). A draft is still
deleted."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.exceptions import PermissionDenied, ValidationError
from domain_builders import flavor, node, priority_class, queue, quota, tenant, user

from gpupool.audit.models import AuditEvent
from gpupool.quotas.actions import (
    decision_refusal,
    do_approve_quota_request,
    do_create_quota_request,
    do_reject_quota_request,
    do_withdraw_quota_request,
)
from gpupool.quotas.models import QuotaRequest
from gpupool.tenancy.actions import do_set_membership

pytestmark = pytest.mark.django_db

LEVELS = {"guarantee": 6, "deserved": 10, "capability": 16}


@pytest.fixture
def world() -> dict[str, Any]:
    """nlp (led by lead, with co-lead and member) at 4 / 8 / 16 of 32 h100 GPUs; an admin."""
    h100 = flavor("h100")
    for index in range(4):
        node(f"n{index}", h100, gpus=8)
    lead, co_lead, member = user("lead"), user("co-lead"), user("member")
    admin = user("root-admin", admin=True)
    team = tenant("nlp", lead=lead, members=(member,))
    do_set_membership(co_lead, team, role="lead", acting_user=None)
    team_queue = queue("nlp", parent=queue("root"), tenant=team)
    quota(team_queue, h100, 4, 8, 16)
    priority_class("normal", default=True)
    return {"h100": h100, "lead": lead, "co_lead": co_lead, "member": member, "admin": admin,
            "team": team, "queue": team_queue}  # fmt: skip


def file(world: dict[str, Any], *, submit: bool = True, **levels: Any) -> QuotaRequest:
    """nlp's lead asks for h100 levels (6 / 10 / 16 unless told), submitted unless told."""
    return do_create_quota_request(
        kind="queue-quota",
        tenant=world["team"],
        requested_by=world["lead"],
        justification="filed by mistake",
        payload=LEVELS | levels,
        queue=world["queue"],
        flavor=world["h100"],
        submit=submit,
    )


def test_the_requester_withdraws_a_submitted_request_which_is_kept_and_audited(
    world: dict[str, Any],
) -> None:
    request = file(world)
    withdrawn = do_withdraw_quota_request(request, acting_user=world["lead"])
    assert withdrawn is not None
    kept = QuotaRequest.objects.get(pk=request.pk)
    assert kept.state == "withdrawn" and kept.withdrawn_at is not None
    assert kept.decided_by is None and kept.decided_at is None
    event = AuditEvent.objects.get(action="quotas.withdraw_quota_request")
    assert event.before is not None and event.before["state"] == "submitted"
    assert event.after is not None and event.after["state"] == "withdrawn"
    assert event.actor_id == world["lead"].pk


def test_a_withdrawn_request_is_no_longer_open_so_a_new_one_may_be_filed(
    world: dict[str, Any],
) -> None:
    first = file(world)
    with pytest.raises(ValidationError) as refused:
        file(world, deserved=12)
    assert "queue" in refused.value.message_dict  # the one-open-request rule, before
    do_withdraw_quota_request(first, acting_user=world["lead"])
    again = file(world, deserved=12)
    assert again.state == "submitted"


def test_a_withdrawn_request_is_neither_approved_nor_rejected_and_the_refusal_says_why(
    world: dict[str, Any],
) -> None:
    request = file(world)
    do_withdraw_quota_request(request, acting_user=world["lead"])
    for decide in (do_approve_quota_request, do_reject_quota_request):
        with pytest.raises(ValidationError) as refused:
            decide(request, acting_user=world["admin"], note="no")
        (why,) = refused.value.message_dict["state"]
        assert f"request #{request.pk} was withdrawn by its requester" in why
    request.refresh_from_db()
    refusal = decision_refusal(request, acting_user=world["admin"], approve=True)
    assert isinstance(refusal, ValidationError) and "withdrawn" in refusal.messages[0]
    assert QuotaRequest.objects.get(pk=request.pk).state == "withdrawn"


@pytest.mark.parametrize("who", ["co_lead", "member", "admin"])
def test_only_its_requester_withdraws_a_submitted_request(world: dict[str, Any], who: str) -> None:
    request = file(world)
    with pytest.raises(PermissionDenied, match="only the requester withdraws"):
        do_withdraw_quota_request(request, acting_user=world[who])
    assert QuotaRequest.objects.get(pk=request.pk).state == "submitted"
    assert not AuditEvent.objects.filter(action="quotas.withdraw_quota_request").exists()


def test_a_decided_or_withdrawn_request_is_not_withdrawn_again(world: dict[str, Any]) -> None:
    rejected = file(world)
    do_reject_quota_request(rejected, acting_user=world["admin"], note="not now")
    with pytest.raises(ValidationError) as refused:
        do_withdraw_quota_request(rejected, acting_user=world["lead"])
    assert "an admin has decided it" in refused.value.message_dict["state"][0]
    withdrawn = file(world, deserved=12)
    do_withdraw_quota_request(withdrawn, acting_user=world["lead"])
    with pytest.raises(ValidationError) as again:
        do_withdraw_quota_request(withdrawn, acting_user=world["lead"])
    assert "was withdrawn" in again.value.message_dict["state"][0]
    assert AuditEvent.objects.filter(action="quotas.withdraw_quota_request").count() == 1


def test_a_draft_is_still_deleted_when_withdrawn(world: dict[str, Any]) -> None:
    draft = file(world, submit=False)
    assert do_withdraw_quota_request(draft, acting_user=world["lead"]) is None
    assert not QuotaRequest.objects.filter(pk=draft.pk).exists()
