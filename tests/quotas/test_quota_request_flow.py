"""Quota requests: a lead asks, an admin decides (never their own), the change is applied."""

from decimal import Decimal

import pytest
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone
from domain_builders import flavor, node, priority_class, queue, quota, tenant, this_month, user

from gpupool.audit.models import AuditEvent
from gpupool.quotas.actions import (
    do_apply_quota_request,
    do_approve_quota_request,
    do_create_quota_request,
    do_reject_quota_request,
    do_submit_quota_request,
)
from gpupool.quotas.models import PriorityBudget, QueueQuota, QuotaRequest

pytestmark = pytest.mark.django_db


@pytest.fixture
def world() -> dict[str, object]:
    h100 = flavor("h100")
    for index in range(4):
        node(f"n{index}", h100, gpus=8)
    lead, member, admin = user("lead"), user("member"), user("root-admin", admin=True)
    team = tenant("nlp", lead=lead, members=(member,))
    root = queue("root")
    team_queue = queue("nlp", parent=root, tenant=team)
    quota(team_queue, h100, 4, 8, 16)
    priority_class("normal", default=True)
    return {
        "h100": h100,
        "lead": lead,
        "member": member,
        "admin": admin,
        "team": team,
        "queue": team_queue,
        "high": priority_class("high", value=100, budget_rate=Decimal(1)),
    }


def ask(world: dict, payload: dict, by: object = None, **fields: object) -> QuotaRequest:
    return do_create_quota_request(
        kind="queue-quota",
        tenant=world["team"],
        requested_by=by or world["lead"],
        justification="the new model needs more",
        payload=payload,
        queue=world["queue"],
        flavor=world["h100"],
        **fields,
    )


def test_a_lead_request_goes_from_draft_to_applied(world: dict) -> None:
    # given a lead's draft asking for 8 / 16 / 32
    request = ask(world, {"guarantee": 8, "deserved": 16, "capability": 32})
    assert request.state == "draft"
    # when it is submitted, approved and applied
    do_submit_quota_request(request, acting_user=world["lead"])
    do_approve_quota_request(request, acting_user=world["admin"], note="fits")
    do_apply_quota_request(request, acting_user=world["admin"])
    # then the queue has the new quota, and every step is audited with who did it
    request.refresh_from_db()
    assert request.state == "applied" and request.decided_by == world["admin"]
    applied = QueueQuota.objects.get(queue=world["queue"])
    assert (applied.guarantee, applied.deserved, applied.capability) == (8, 16, 32)
    steps = AuditEvent.objects.filter(object_type="quotas.quotarequest").order_by("id")
    assert [(e.action, e.actor) for e in steps] == [
        ("quotas.create_quota_request", world["lead"]),
        ("quotas.submit_quota_request", world["lead"]),
        ("quotas.approve_quota_request", world["admin"]),
        ("quotas.apply_quota_request", world["admin"]),
    ]
    change = AuditEvent.objects.filter(action="quotas.set_queue_quota").first()
    assert change is not None and change.actor == world["admin"]
    assert (change.before or {})["guarantee"] == "4.000"
    assert (change.after or {})["guarantee"] == "8.000"
    assert f"quota request #{request.pk}" in change.reason


def test_a_member_cannot_ask_for_the_team_quota(world: dict) -> None:
    with pytest.raises(PermissionDenied):
        ask(world, {"guarantee": 8, "deserved": 16, "capability": 32}, by=world["member"])
    assert not QuotaRequest.objects.exists()


def test_nobody_approves_their_own_request(world: dict) -> None:
    # given an admin who also asked for quota
    request = ask(world, {"guarantee": 8, "deserved": 16, "capability": 32}, by=world["admin"])
    do_submit_quota_request(request, acting_user=world["admin"])
    # then approving it themselves is refused, naming decided_by, and the request stays put
    with pytest.raises(ValidationError) as error:
        do_approve_quota_request(request, acting_user=world["admin"])
    assert "decided_by" in error.value.message_dict
    request.refresh_from_db()
    assert request.state == "submitted"


def test_the_database_refuses_a_self_decided_request(world: dict) -> None:
    request = ask(world, {"guarantee": 8, "deserved": 16, "capability": 32})
    with pytest.raises(IntegrityError), transaction.atomic():
        QuotaRequest.objects.filter(pk=request.pk).update(
            state="approved", decided_by=world["lead"], decided_at=timezone.now()
        )


def test_only_admins_decide(world: dict) -> None:
    request = ask(world, {"guarantee": 8, "deserved": 16, "capability": 32})
    do_submit_quota_request(request, acting_user=world["lead"])
    with pytest.raises(PermissionDenied):
        do_approve_quota_request(request, acting_user=world["member"])
    with pytest.raises(PermissionDenied):
        do_reject_quota_request(request, acting_user=world["member"], note="no")


def test_a_rejection_says_why(world: dict) -> None:
    request = ask(world, {"guarantee": 8, "deserved": 16, "capability": 32})
    do_submit_quota_request(request, acting_user=world["lead"])
    with pytest.raises(ValidationError) as error:
        do_reject_quota_request(request, acting_user=world["admin"], note=" ")
    assert "decision_note" in error.value.message_dict
    do_reject_quota_request(request, acting_user=world["admin"], note="pool is full")
    request.refresh_from_db()
    assert request.state == "rejected"
    with pytest.raises(ValidationError) as error:
        do_apply_quota_request(request, acting_user=world["admin"])
    assert "state" in error.value.message_dict


def test_approving_a_change_that_does_not_fit_the_pool_is_refused(world: dict) -> None:
    request = ask(world, {"guarantee": 40, "deserved": 40, "capability": 40})
    do_submit_quota_request(request, acting_user=world["lead"])
    with pytest.raises(ValidationError) as error:
        do_approve_quota_request(request, acting_user=world["admin"])
    assert "pool's 32 healthy" in error.value.message_dict["payload"][0]


def test_steps_out_of_order_are_refused_naming_state(world: dict) -> None:
    request = ask(world, {"guarantee": 8, "deserved": 16, "capability": 32})
    with pytest.raises(ValidationError) as error:
        do_approve_quota_request(request, acting_user=world["admin"])
    assert "state" in error.value.message_dict


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ({"guarantee": 8, "deserved": 16}, "missing capability"),
        ({"guarantee": 8, "deserved": 16, "capability": 32, "gpus": 1}, "unknown gpus"),
        ({"guarantee": "lots", "deserved": 16, "capability": 32}, "must be a number"),
        ({"guarantee": -1, "deserved": 16, "capability": 32}, "at least 0"),
        ({"guarantee": 17, "deserved": 16, "capability": 32}, "must not exceed deserved"),
    ],
    ids=["missing key", "unknown key", "not a number", "negative", "unordered"],
)
def test_a_malformed_payload_is_refused_naming_payload(
    world: dict, payload: dict, message: str
) -> None:
    with pytest.raises(ValidationError) as error:
        ask(world, payload)
    assert message in error.value.message_dict["payload"][0]


def test_a_queue_of_another_tenant_is_refused_naming_queue(world: dict) -> None:
    other = queue("vision", parent=world["queue"].parent, tenant=tenant("vision"))
    with pytest.raises(ValidationError) as error:
        do_create_quota_request(
            kind="queue-quota",
            tenant=world["team"],
            requested_by=world["lead"],
            justification="borrow theirs",
            payload={"guarantee": 1, "deserved": 1, "capability": 1},
            queue=other,
            flavor=world["h100"],
        )
    assert "queue" in error.value.message_dict


def test_a_budget_request_grants_the_budget_when_applied(world: dict) -> None:
    start, end = this_month()
    request = do_create_quota_request(
        kind="budget",
        tenant=world["team"],
        requested_by=world["lead"],
        justification="deadline in December",
        payload={"gpu_hours": 200},
        priority_class=world["high"],
        period_start=start,
        period_end=end,
    )
    do_submit_quota_request(request, acting_user=world["lead"])
    do_approve_quota_request(request, acting_user=world["admin"])
    do_apply_quota_request(request, acting_user=world["admin"])
    budget = PriorityBudget.objects.get(tenant=world["team"])
    assert budget.gpu_hours == 200 and budget.remaining_gpu_hours() == 200


def test_a_budget_request_names_its_period(world: dict) -> None:
    with pytest.raises(ValidationError) as error:
        do_create_quota_request(
            kind="budget",
            tenant=world["team"],
            requested_by=world["lead"],
            justification="deadline",
            payload={"gpu_hours": 200},
            priority_class=world["high"],
        )
    assert {"period_start", "period_end"} <= set(error.value.message_dict)
