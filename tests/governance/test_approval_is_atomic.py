"""Approval through the API applies the change in the same transaction: when the change
cannot be made, nothing is -- the request stays submitted, no audit row, no quota, no mail."""

from __future__ import annotations

from typing import Any

import pytest
from django.core import mail
from django.core.exceptions import ValidationError

from gpupool.audit.models import AuditEvent
from gpupool.quotas import actions
from gpupool.quotas.models import QueueQuota, QuotaRequest

pytestmark = pytest.mark.django_db


def refuse_the_quota(*args: Any, **kwargs: Any) -> None:
    """A quota change that fails after the approval was written (e.g. a concurrent edit)."""
    raise ValidationError({"guarantee": "changed meanwhile"})


def fail_in_the_database(*args: Any, **kwargs: Any) -> None:
    """A quota change that breaks (the database went away)."""
    raise RuntimeError("connection lost")


def test_a_failing_apply_leaves_the_request_submitted_and_the_quota_as_it_was(
    pool: Any, api_as: Any, file_request: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    request = file_request(submit=True)
    audit_rows = AuditEvent.objects.count()
    mail.outbox.clear()
    monkeypatch.setattr(actions, "do_set_queue_quota", refuse_the_quota)
    response = api_as("ada").post(f"/api/v1/quota-requests/{request['id']}/approve/")
    assert response.status_code == 400
    assert "guarantee" in response.json()["error"]["fields"]
    stored = QuotaRequest.objects.get(pk=request["id"])
    assert (stored.state, stored.decided_by, stored.decided_at) == ("submitted", None, None)
    assert QueueQuota.objects.get(queue=pool.nlp_queue).guarantee == 4
    assert AuditEvent.objects.count() == audit_rows
    assert mail.outbox == []


def test_a_crash_while_applying_undoes_the_approval(
    pool: Any, file_request: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    request = QuotaRequest.objects.get(pk=file_request(submit=True)["id"])
    monkeypatch.setattr(actions, "do_set_queue_quota", fail_in_the_database)
    with pytest.raises(RuntimeError):
        actions.do_approve_and_apply_quota_request(request, acting_user=pool.users["ada"])
    request.refresh_from_db()
    assert request.state == "submitted" and request.decided_by is None
