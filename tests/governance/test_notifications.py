"""Mails: the parties of a request and the submitter of a workload are told, unless they
opted out; a mail is sent only once the change commits, and a failed mail fails nothing."""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

import pytest
from django.core import mail
from django.db import transaction

from gpupool.notifications.actions import do_set_notification_preference
from gpupool.notifications.notify import notify_workload_event
from gpupool.quotas.actions import do_approve_and_apply_quota_request
from gpupool.quotas.models import QueueQuota, QuotaRequest
from gpupool.workloads.actions import PodSetSpec, do_submit_workload

pytestmark = pytest.mark.django_db

AT = datetime(2026, 5, 4, 9, 30, tzinfo=UTC)


@pytest.fixture
def workload(pool: Any) -> Any:
    """Max's one-GPU workload in nlp's queue."""
    return do_submit_workload(
        "train-42",
        queue=pool.nlp_queue,
        pod_sets=[PodSetSpec(count=1, gpus=1, flavor=pool.h100)],
        submitter=pool.users["max"],
        at=AT,
    )


def test_the_submitter_is_told_when_their_workload_is_preempted(
    workload: Any, django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        notify_workload_event(
            workload,
            "preempted",
            at=AT,
            details={"preempted by": "vision/eval-7", "GPU-hours lost": 1.5},
        )
    [sent] = mail.outbox
    assert sent.to == ["max@example.org"]
    assert sent.subject == "[gpupool] nlp/train-42 preempted"
    assert "preempted by: vision/eval-7" in sent.body and "GPU-hours lost: 1.5" in sent.body
    assert "2026-05-04T09:30:00+00:00" in sent.body


def test_a_user_who_opted_out_of_a_kind_gets_no_mail_of_it_but_still_of_others(
    pool: Any, workload: Any, django_capture_on_commit_callbacks: Any
) -> None:
    max_ = pool.users["max"]
    do_set_notification_preference(max_, "workload-started", enabled=False, acting_user=max_)
    with django_capture_on_commit_callbacks(execute=True):
        notify_workload_event(workload, "started", at=AT)
        notify_workload_event(workload, "failed", at=AT, details={"reason": "OOM"})
    assert [m.subject for m in mail.outbox] == ["[gpupool] nlp/train-42 failed"]


def test_an_admin_who_opted_out_of_waiting_requests_is_not_told(
    pool: Any, api_as: Any, file_request: Any
) -> None:
    ada = pool.users["ada"]
    do_set_notification_preference(ada, "request-submitted", enabled=False, acting_user=ada)
    file_request(submit=True)
    assert [m.to for m in mail.outbox] == [["alan@example.org"]]


def test_a_change_that_rolls_back_tells_nobody(
    pool: Any, workload: Any, django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        try:
            with transaction.atomic():
                notify_workload_event(workload, "started", at=AT)
                raise RuntimeError("the cycle failed")
        except RuntimeError:
            pass
    assert mail.outbox == []


def test_a_failing_mail_server_does_not_undo_an_approval(
    pool: Any,
    file_request: Any,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    django_capture_on_commit_callbacks: Any,
) -> None:
    request = QuotaRequest.objects.get(pk=file_request(submit=True)["id"])
    mail.outbox.clear()

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise ConnectionRefusedError("no SMTP server")

    monkeypatch.setattr("gpupool.notifications.notify.get_connection", broken)
    with caplog.at_level(logging.ERROR), django_capture_on_commit_callbacks(execute=True):
        do_approve_and_apply_quota_request(request, acting_user=pool.users["ada"])
    request.refresh_from_db()
    assert request.state == "applied"
    assert QueueQuota.objects.get(queue=pool.nlp_queue).deserved == 12
    assert "could not send the request-decided mail" in caplog.text


def test_users_without_an_address_are_skipped(
    pool: Any, workload: Any, django_capture_on_commit_callbacks: Any
) -> None:
    max_ = pool.users["max"]
    max_.email = ""
    max_.save()
    with django_capture_on_commit_callbacks(execute=True):
        notify_workload_event(workload, "started", at=AT)
    assert mail.outbox == []


def test_an_unknown_workload_event_is_the_caller_s_bug(workload: Any) -> None:
    with pytest.raises(ValueError, match="unknown workload event 'exploded'"):
        notify_workload_event(workload, "exploded", at=AT)
