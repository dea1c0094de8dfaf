"""The admin is usable for every domain model, and its writes go through the audited actions."""

from typing import Any

import pytest
from django.contrib import admin
from django.test import Client
from django.urls import reverse
from domain_builders import DOMAIN_APPS, flavor, node, priority_class, queue, tenant, user

from gpupool.audit.models import AuditEvent
from gpupool.quotas.actions import do_create_quota_request, do_submit_quota_request
from gpupool.quotas.models import QueueQuota, QuotaRequest

pytestmark = pytest.mark.django_db


@pytest.fixture
def pool() -> dict[str, Any]:
    h100 = flavor("h100")
    node("n1", h100, gpus=8)
    lead = user("lead")
    team = tenant("nlp", lead=lead)
    priority_class("normal", default=True)
    return {
        "h100": h100,
        "lead": lead,
        "team": team,
        "queue": queue("nlp", parent=queue("root"), tenant=team),
    }


def test_every_domain_admin_page_opens(admin_client: Client, pool: dict) -> None:
    models = [m for m in admin.site._registry if m._meta.app_label in DOMAIN_APPS]
    assert len(models) >= 17
    for model in models:
        opts = model._meta
        url = reverse(f"admin:{opts.app_label}_{opts.model_name}_changelist")
        assert admin_client.get(url).status_code == 200, url
        first = model.objects.first()
        if first is not None:
            change = reverse(f"admin:{opts.app_label}_{opts.model_name}_change", args=[first.pk])
            assert admin_client.get(change).status_code == 200, change


def test_a_quota_set_in_the_admin_is_validated_and_audited(
    admin_client: Client, pool: dict
) -> None:
    url = reverse("admin:quotas_queuequota_add")
    form = {"queue": pool["queue"].pk, "flavor": pool["h100"].pk}
    # an unordered quota is shown back with the field's error
    response = admin_client.post(url, form | {"guarantee": 4, "deserved": 2, "capability": 8})
    assert response.status_code == 200
    assert "must not exceed deserved" in response.content.decode()
    # a good one is saved through the action, with the admin as actor
    response = admin_client.post(url, form | {"guarantee": 2, "deserved": 4, "capability": 8})
    assert response.status_code == 302
    assert QueueQuota.objects.get().guarantee == 2
    event = AuditEvent.objects.get(action="quotas.set_queue_quota")
    assert event.actor_name == "root-admin"


def test_a_request_is_approved_and_applied_from_its_admin_page(
    admin_client: Client, pool: dict
) -> None:
    request = do_create_quota_request(
        kind="queue-quota",
        tenant=pool["team"],
        requested_by=pool["lead"],
        justification="more",
        payload={"guarantee": 1, "deserved": 2, "capability": 4},
        queue=pool["queue"],
        flavor=pool["h100"],
    )
    do_submit_quota_request(request, acting_user=pool["lead"])
    url = reverse("admin:quotas_quotarequest_change", args=[request.pk])
    assert admin_client.post(url, {"_approve": "1", "decision_note": "ok"}).status_code == 302
    assert admin_client.post(url, {"_apply": "1"}).status_code == 302
    request.refresh_from_db()
    assert request.state == "applied" and request.decision_note == "ok"
    assert QueueQuota.objects.get(queue=pool["queue"]).capability == 4
    assert QuotaRequest.objects.get().decided_by is not None
