"""A quota on a flavor whose GPUs are given whole (exclusive: whole GPUs; MIG: whole
instances of its profile) is a whole number: a fraction such as 0.5 is refused wherever a
quota is set (the action and so the API and the pages, the admin site, a quota request filed,
approved or applied), naming the level and the flavor, and nothing is written. Shared flavors
take fractions (DESIGN §2: a shared pod counts ``gpu_milli / 1000`` GPUs)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.test import Client
from django.urls import reverse
from domain_builders import flavor, node, priority_class, queue, quota, tenant, user
from rest_framework.test import APIClient

from gpupool.audit.models import AuditEvent
from gpupool.quotas.actions import (
    do_apply_quota_request,
    do_approve_quota_request,
    do_create_quota_request,
    do_reject_quota_request,
    do_submit_quota_request,
    do_withdraw_quota_request,
)
from gpupool.quotas.models import Queue, QueueQuota, QuotaRequest

pytestmark = pytest.mark.django_db


@pytest.fixture
def pool() -> dict[str, Any]:
    """16 h100 GPUs (exclusive), 16 shared L40S GPUs, a MIG flavor (no nodes needed: its
    quotas below guarantee nothing); team nlp's queue holds 2 / 4 / 8 of h100; lena leads
    nlp, ada is an admin."""
    h100 = flavor("h100")
    mig = flavor(
        "a100-3g.40gb",
        sharing="mig",
        gpu_model="A100-80GB",
        mig_profile="3g.40gb",
        gpu_memory_gb=40,
    )
    l40s = flavor("l40s", sharing="shared", gpu_memory_gb=48)
    for index in range(2):
        node(f"h{index}", h100, gpus=8)
        node(f"l{index}", l40s, gpus=8)
    lead, admin = user("lena"), user("ada", admin=True)
    team = tenant("nlp", lead=lead)
    root = queue("root")
    nlp = queue("nlp", parent=root, tenant=team)
    quota(nlp, h100, 2, 4, 8)
    priority_class("normal", default=True)
    return {"h100": h100, "mig": mig, "l40s": l40s, "lead": lead, "admin": admin}


def levels_of(flavor_name: str) -> tuple[Decimal, ...] | None:
    found = QueueQuota.objects.filter(queue__name="nlp", flavor__name=flavor_name).first()
    return None if found is None else (found.guarantee, found.deserved, found.capability)


@pytest.mark.parametrize(
    ("flavor_name", "levels", "field", "value"),
    [
        ("h100", ("0.5", 4, 8), "guarantee", "0.5"),
        ("h100", (2, "4.25", 8), "deserved", "4.25"),
        ("h100", (2, 4, "8.001"), "capability", "8.001"),
        ("a100-3g.40gb", (0, "1.5", 2), "deserved", "1.5"),
    ],
    ids=["exclusive guarantee", "exclusive deserved", "exclusive capability", "mig deserved"],
)
def test_a_fraction_on_a_whole_gpu_flavor_is_refused_naming_level_and_flavor(
    pool: dict[str, Any], flavor_name: str, levels: tuple[Any, ...], field: str, value: str
) -> None:
    before = levels_of(flavor_name)
    events = AuditEvent.objects.count()
    with pytest.raises(ValidationError) as refused:
        quota(queue_named("nlp"), pool_flavor(pool, flavor_name), *levels)
    messages = refused.value.message_dict
    assert list(messages) == [field]
    assert f"{field} {value} is not a whole number" in messages[field][0]
    assert f"flavor {flavor_name}" in messages[field][0]
    # nothing written: the quota as it was, no audit row
    assert levels_of(flavor_name) == before
    assert AuditEvent.objects.count() == events


def queue_named(name: str) -> Queue:
    return Queue.objects.get(name=name)


def pool_flavor(pool: dict[str, Any], name: str) -> Any:
    return {"h100": pool["h100"], "a100-3g.40gb": pool["mig"], "l40s": pool["l40s"]}[name]


def test_whole_numbers_written_with_decimals_are_accepted(pool: dict[str, Any]) -> None:
    quota(queue_named("nlp"), pool["h100"], "3.000", Decimal("4.0"), 8)
    assert levels_of("h100") == (3, 4, 8)


def test_a_shared_flavor_takes_fractions(pool: dict[str, Any]) -> None:
    quota(queue_named("nlp"), pool["l40s"], "0.5", "1.5", "2.25")
    assert levels_of("l40s") == (Decimal("0.5"), Decimal("1.5"), Decimal("2.25"))


def test_the_api_refuses_a_fraction_with_a_400_naming_the_level(pool: dict[str, Any]) -> None:
    client = APIClient()
    client.force_authenticate(pool["admin"])
    answer = client.put(
        "/api/v1/queues/nlp/quotas/h100/",
        {"guarantee": "0.5", "deserved": 4, "capability": 8},
        format="json",
    )
    assert answer.status_code == 400, answer.content
    fields = answer.json()["error"]["fields"]
    assert list(fields) == ["guarantee"]
    assert "guarantee 0.5 is not a whole number: flavor h100" in fields["guarantee"][0]
    assert levels_of("h100") == (2, 4, 8)


def test_the_admin_refuses_a_fraction_on_the_field(
    admin_client: Client, pool: dict[str, Any]
) -> None:
    form = {"queue": queue_named("nlp").pk, "flavor": pool["mig"].pk}
    form |= {"guarantee": 0, "deserved": "0.5", "capability": 1}
    response = admin_client.post(reverse("admin:quotas_queuequota_add"), form)
    assert response.status_code == 200  # the form again, not a redirect
    errors = response.context["adminform"].form.errors
    assert "deserved" in errors and "flavor a100-3g.40gb" in errors["deserved"][0]
    assert levels_of("a100-3g.40gb") is None


def ask(pool: dict[str, Any], payload: dict[str, Any]) -> QuotaRequest:
    return do_create_quota_request(
        kind="queue-quota",
        tenant=queue_named("nlp").tenant,
        requested_by=pool["lead"],
        justification="the new model needs more",
        payload=payload,
        queue=queue_named("nlp"),
        flavor=pool["h100"],
    )


def test_a_request_for_a_fraction_is_refused_when_filed(pool: dict[str, Any]) -> None:
    with pytest.raises(ValidationError) as refused:
        ask(pool, {"guarantee": 2, "deserved": "4.5", "capability": 8})
    messages = refused.value.message_dict
    assert list(messages) == ["payload"]
    assert "deserved 4.5 is not a whole number: flavor h100" in messages["payload"][0]
    assert not QuotaRequest.objects.exists()


def filed_before_the_rule(pool: dict[str, Any], payload: dict[str, Any]) -> QuotaRequest:
    """A submitted request whose payload was fractional from before the rule (written past the
    model, as an old row would be)."""
    request = ask(pool, {"guarantee": 2, "deserved": 4, "capability": 16})
    do_submit_quota_request(request, acting_user=pool["lead"])
    QuotaRequest.objects.filter(pk=request.pk).update(payload=payload)
    request.refresh_from_db()
    return request


def test_an_old_fractional_request_cannot_be_approved(pool: dict[str, Any]) -> None:
    request = filed_before_the_rule(pool, {"guarantee": "2.5", "deserved": 4, "capability": 8})
    with pytest.raises(ValidationError) as refused:
        do_approve_quota_request(request, acting_user=pool["admin"], note="ok")
    assert "guarantee 2.5 is not a whole number" in refused.value.message_dict["payload"][0]
    request.refresh_from_db()
    assert request.state == "submitted"
    assert levels_of("h100") == (2, 4, 8)


def test_an_old_fractional_request_can_still_be_rejected(pool: dict[str, Any]) -> None:
    request = filed_before_the_rule(pool, {"guarantee": "2.5", "deserved": 4, "capability": 8})
    do_reject_quota_request(request, acting_user=pool["admin"], note="whole GPUs only")
    request.refresh_from_db()
    assert request.state == "rejected"


def test_an_old_fractional_request_can_still_be_withdrawn(pool: dict[str, Any]) -> None:
    request = filed_before_the_rule(pool, {"guarantee": "2.5", "deserved": 4, "capability": 8})
    do_withdraw_quota_request(request, acting_user=pool["lead"])
    request.refresh_from_db()
    assert request.state == "withdrawn"


def test_an_old_approved_fractional_request_creates_no_quota(pool: dict[str, Any]) -> None:
    request = ask(pool, {"guarantee": 2, "deserved": 4, "capability": 16})
    do_submit_quota_request(request, acting_user=pool["lead"])
    do_approve_quota_request(request, acting_user=pool["admin"], note="ok")
    QuotaRequest.objects.filter(pk=request.pk).update(
        payload={"guarantee": 2, "deserved": 4, "capability": "15.5"}
    )
    request.refresh_from_db()
    with pytest.raises(ValidationError) as refused:
        do_apply_quota_request(request, acting_user=pool["admin"])
    assert "capability 15.5 is not a whole number" in refused.value.message_dict["capability"][0]
    request.refresh_from_db()
    assert request.state == "approved"
    assert levels_of("h100") == (2, 4, 8)
