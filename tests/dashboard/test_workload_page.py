"""One workload's page: where it stands and why, its timeline, who preempted it and what it
cost; scoped as the workloads API (another team's workload is not found). The mails about a
request or a workload link to its page."""

from __future__ import annotations

import zoneinfo
from decimal import Decimal
from typing import Any

import pytest
from dashboard_pages import live, text
from django.core import mail
from django.utils import timezone
from domain_builders import explained
from two_teams import quota_request, submit

from gpupool.accounting.actions import do_record_preemption
from gpupool.notifications.notify import notify_workload_event
from gpupool.quotas.actions import do_reject_quota_request
from gpupool.workloads.models import Workload


def test_a_pending_workload_says_its_position_its_start_and_why_it_waits(
    pool: Any, page_as: Any
) -> None:
    workload = submit(pool, "train", pool.nlp_queue, "max")
    for rank, name in enumerate(("first", "second"), start=1):  # two ahead of it
        ahead = submit(pool, name, pool.nlp_queue, "max")
        explained(ahead, "behind", queue_rank=rank)
    Workload.objects.filter(pk=workload.pk).update(estimated_start_at=timezone.now())
    explained(workload, "capacity", "Needs 8 GPUs of h100 together; 7 are free.", queue_rank=3.5)
    page = text(page_as("max").get("/workloads/nlp/train/"))
    assert "Needs 8 GPUs of h100 together; 7 are free." in page
    assert "Position 3 in queue nlp" in page
    assert "Position in queue nlp" in page and ">3<" in page
    assert "Never preempted" in page
    part = text(live(page_as("lena"), "/workloads/nlp/train/"))
    assert "<html" not in part and "Why it waits" in part


def test_the_list_links_each_workload_to_its_page(pool: Any, page_as: Any) -> None:
    submit(pool, "train", pool.nlp_queue, "max")
    assert 'href="/workloads/nlp/train/"' in text(page_as("max").get("/workloads/"))


def test_a_preempted_user_finds_who_preempted_them_why_and_what_it_cost(
    pool: Any, page_as: Any
) -> None:
    victim = submit(pool, "sweep", pool.vision_queue, "vic")
    preemptor = submit(pool, "secret-run", pool.nlp_queue, "max")
    do_record_preemption(
        victim,
        reason="reclaim",
        at=timezone.now(),
        gpus_freed=8,
        lost_gpu_hours=Decimal("2.25"),
        preemptor=preemptor,
    )
    page = text(page_as("vic").get("/workloads/vision/sweep/"))
    assert "queue nlp, class normal" in page and "reclaim (the lending queue" in page
    assert "2.25 GPU-h" in page
    assert "secret-run" not in page and ">max<" not in page
    admin = text(page_as("ada").get("/workloads/vision/sweep/"))
    assert "nlp/secret-run" in admin and "by max" in admin


def test_the_timeline_draws_each_state_the_workload_went_through(pool: Any, page_as: Any) -> None:
    submit(pool, "train", pool.nlp_queue, "max")
    page = text(page_as("max").get("/workloads/nlp/train/"))
    assert 'id="timeline-chart-figure"' in page
    assert "<td>pending</td>" in page


def test_a_state_stamped_by_a_cluster_clock_ahead_does_not_end_before_it_starts(
    pool: Any, page_as: Any
) -> None:
    """A simulated cluster stamps transitions in its own time, hours ahead of the wall clock
    in the demo: the state a workload is in lasts at least until its own start."""
    from datetime import datetime, timedelta

    from gpupool.dashboard.views import state_spans

    workload = submit(pool, "train", pool.nlp_queue, "max")
    workload.transitions.update(at=timezone.now() + timedelta(hours=3))
    [(state, start, end)] = state_spans(workload, timezone.now())
    assert state == "pending"
    assert datetime.fromisoformat(end) >= datetime.fromisoformat(start)
    assert page_as("max").get("/workloads/nlp/train/").status_code == 200


@pytest.mark.parametrize("who", ["vic", "vera", "fin"])
def test_another_teams_workload_is_not_found_and_finance_is_refused(
    pool: Any, page_as: Any, who: str
) -> None:
    submit(pool, "train", pool.nlp_queue, "max")
    expected = 403 if who == "fin" else 404
    assert page_as(who).get("/workloads/nlp/train/").status_code == expected


def test_a_workload_mail_links_to_the_workload_page(
    pool: Any, django_capture_on_commit_callbacks: Any
) -> None:
    workload = submit(pool, "train", pool.nlp_queue, "max")
    with django_capture_on_commit_callbacks(execute=True):
        notify_workload_event(workload, "started", at=timezone.now())
    [sent] = mail.outbox
    assert "/workloads/nlp/train/" in sent.body and "/api/" not in sent.body


def test_request_mails_link_admins_to_the_approval_and_leads_to_the_request(
    pool: Any, django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        request = quota_request(pool, justification="bigger runs", submit=True)
    [sent] = mail.outbox
    assert sent.to == ["ada@example.org"]
    assert f"/approvals/{request.pk}/" in sent.body and "/api/" not in sent.body
    with django_capture_on_commit_callbacks(execute=True):
        do_reject_quota_request(request, acting_user=pool.users["ada"], note="not now")
    told = {tuple(m.to): m.body for m in mail.outbox[1:]}
    assert f"/requests/{request.pk}/" in told[("lena@example.org",)]


def test_the_timeline_is_drawn_in_the_viewers_zone(pool: Any, page_as: Any) -> None:
    workload = submit(pool, "train", pool.nlp_queue, "max")
    client = page_as("max")
    client.cookies["gpupool_tz"] = "Asia/Tokyo"
    page = text(client.get("/workloads/nlp/train/"))
    tokyo = timezone.localtime(workload.submitted_at, zoneinfo.ZoneInfo("Asia/Tokyo"))
    assert f'"{tokyo.replace(tzinfo=None).isoformat()}"' in page


def idle_reclaimed(pool: Any, name: str, origin: str = "gpupool") -> Workload:
    """A workload the control loop reclaimed for idleness and left preempted (it ends)."""
    workload = submit(pool, name, pool.nlp_queue, "max")
    Workload.objects.filter(pk=workload.pk).update(state="preempted", origin=origin)
    do_record_preemption(
        workload, reason="idle", at=timezone.now(), gpus_freed=8, lost_gpu_hours=Decimal(0)
    )
    return workload


def test_an_idle_reclaimed_workload_says_it_ends_and_is_not_requeued(
    pool: Any, page_as: Any
) -> None:
    idle_reclaimed(pool, "notebook")
    page = text(page_as("max").get("/workloads/nlp/notebook/"))
    assert "Reclaimed at 20" in page  # the shared summary's words (workloads.queries.summary)
    assert "It ends here and is not requeued (it would only sit idle again)." in page
    assert "goes back to its queue" not in page
    assert "no workload: its GPUs went back to the pool" in page


def test_a_preempted_bare_pod_says_it_ends_and_is_not_requeued(pool: Any, page_as: Any) -> None:
    workload = submit(pool, "by-hand", pool.nlp_queue, "max")
    Workload.objects.filter(pk=workload.pk).update(state="preempted", origin="bare")
    preemptor = submit(pool, "urgent", pool.nlp_queue, "lena")
    do_record_preemption(
        workload,
        reason="preempt",
        at=timezone.now(),
        gpus_freed=8,
        lost_gpu_hours=Decimal(1),
        preemptor=preemptor,
    )
    page = text(page_as("max").get("/workloads/nlp/by-hand/"))
    assert "A bare pod is gone once evicted, so it ends here and is not requeued." in page
    assert "goes back to its queue" not in page
