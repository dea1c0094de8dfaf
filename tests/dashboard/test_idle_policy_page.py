"""The idle policy where admins and leads look: the Queues page lists each class's idle
timeouts and the queues that override them, or says plainly that idle GPUs are never
reclaimed; a workload's page shows an "idle" badge with since when."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from dashboard_pages import text

from gpupool.quotas.actions import do_save_priority_class, do_save_queue
from gpupool.workloads.actions import PodSetSpec, do_submit_workload
from gpupool.workloads.models import Workload

pytestmark = pytest.mark.django_db


def test_without_an_idle_policy_the_queues_page_says_idle_gpus_are_never_reclaimed(
    pool: Any, page_as: Any
) -> None:
    page = text(page_as("lena").get("/queues/"))
    assert "No idle policy: idle GPUs are never reclaimed" in page


def test_the_queues_page_shows_each_class_policy_and_the_queue_overrides(
    pool: Any, page_as: Any
) -> None:
    pool.normal.idle_alert_after_s = 1200
    pool.normal.idle_reclaim_after_s = 3600
    do_save_priority_class(pool.normal, acting_user=None)
    pool.vision_queue.idle_reclaim_after_s = 7200
    do_save_queue(pool.vision_queue, acting_user=None)

    page = text(page_as("vera").get("/queues/"))
    assert "No idle policy" not in page
    normal = page.split('data-class="normal"')[1].split("</tr>")[0]
    assert "20 min" in normal and "1 h" in normal
    high = page.split('data-class="high"')[1].split("</tr>")[0]
    assert high.count("never") == 2
    vision = page.split('data-override="vision"')[1].split("</tr>")[0]
    assert "the class's" in vision and "2 h" in vision
    assert 'data-override="nlp"' not in page


def test_an_idle_workloads_page_shows_the_idle_badge_with_since_when(
    pool: Any, page_as: Any
) -> None:
    workload = do_submit_workload(
        "notebook",
        queue=pool.nlp_queue,
        pod_sets=[PodSetSpec(count=1, gpus=1, flavor=pool.h100)],
        submitter=pool.users["max"],
    )
    since = datetime(2026, 5, 4, 9, 30, tzinfo=UTC)
    Workload.objects.filter(pk=workload.pk).update(state="running", idle_since=since)
    page = text(page_as("max").get("/workloads/nlp/notebook/"))
    assert "data-idle" in page and ">idle<" in page and "no work since" in page
    Workload.objects.filter(pk=workload.pk).update(idle_since=None)
    assert "data-idle" not in text(page_as("max").get("/workloads/nlp/notebook/"))
