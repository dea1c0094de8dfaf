"""The workload page reads in the viewer's zone throughout, as its tables do: its timeline and
utilisation sparkline draw the viewer's wall times and name the zone on their axis, and the
summary sentence (``workloads.queries.summary``) says its moments in that zone. The API (and
so the CLI's ``gpupool why``) keeps saying them in UTC."""

from __future__ import annotations

import json
import zoneinfo
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from dashboard_pages import text
from django.utils import timezone
from rest_framework.test import APIClient
from two_teams import submit

from gpupool.accounting.actions import do_record_preemption
from gpupool.utilization.models import ActivityWindow
from gpupool.workloads.models import Workload

BERLIN = zoneinfo.ZoneInfo("Europe/Berlin")
COOKIE = "Europe%2FBerlin"  # what frontend/js/time.js writes (encodeURIComponent)


def figure(page: str, name: str) -> dict[str, Any]:
    """The figure a page embeds as ``<script id="NAME-figure" type="application/json">``."""
    start = page.index(f'id="{name}-figure"')
    body = page[page.index(">", start) + 1 : page.index("</script>", start)]
    return dict(json.loads(body))


def in_berlin(moment: datetime) -> str:
    return moment.astimezone(BERLIN).replace(tzinfo=None).isoformat()


def berlin_page(page_as: Any, url: str) -> str:
    client = page_as("max")
    client.cookies["gpupool_tz"] = COOKIE
    return text(client.get(url))


def test_the_timeline_and_the_sparkline_name_the_viewers_zone(pool: Any, page_as: Any) -> None:
    workload = submit(pool, "train", pool.nlp_queue, "max")
    ended = timezone.now() - timedelta(minutes=5)
    ActivityWindow.objects.create(
        workload=workload, tenant=pool.nlp_queue.tenant, queue=pool.nlp_queue,
        started_at=ended - timedelta(minutes=10), ended_at=ended, gpus=8,
        observed_gpu_seconds=4800.0, active_gpu_seconds=2400.0, mean_utilization=30.0,
    )  # fmt: skip
    page = berlin_page(page_as, "/workloads/nlp/train/")
    timeline = figure(page, "timeline-chart")
    assert timeline["layout"]["xaxis"]["title"]["text"] == "time (Europe/Berlin)"
    assert timeline["data"][0]["x"][0] == in_berlin(workload.submitted_at)
    sparkline = figure(page, "sparkline-chart")
    assert sparkline["layout"]["xaxis"]["title"]["text"] == "time (Europe/Berlin)"
    assert sparkline["layout"]["xaxis"]["tickformat"] == "%H:%M"
    assert sparkline["data"][0]["x"] == [in_berlin(ended)]


def test_the_summary_says_its_moments_in_the_viewers_zone_and_the_api_in_utc(
    pool: Any, page_as: Any
) -> None:
    workload = submit(pool, "notebook", pool.nlp_queue, "max")
    Workload.objects.filter(pk=workload.pk).update(state="preempted")
    reclaimed = datetime(2026, 12, 5, 14, 3, tzinfo=UTC)
    do_record_preemption(
        workload, reason="idle", at=reclaimed, gpus_freed=8, lost_gpu_hours=Decimal(0)
    )
    page = berlin_page(page_as, "/workloads/nlp/notebook/")
    said = page.split('id="why-title"')[1].split("</p>")[0]
    assert "Reclaimed at 2026-12-05 15:03 UTC+1: its GPUs sat idle" in said
    assert "14:03" not in said  # not the UTC wall time
    api = APIClient()
    api.force_authenticate(pool.users["max"])
    api.cookies["gpupool_tz"] = COOKIE  # the API is not the page: the cookie changes nothing
    body = api.get("/api/v1/workloads/nlp/notebook/").json()
    assert body["explanation"]["summary"].startswith("Reclaimed at 2026-12-05 14:03 UTC: ")


def test_a_running_workloads_summary_reads_in_the_viewers_zone(pool: Any, page_as: Any) -> None:
    workload = submit(pool, "train", pool.nlp_queue, "max")
    started = datetime(2026, 7, 1, 22, 30, tzinfo=UTC)  # summer: the next day in Berlin
    Workload.objects.filter(pk=workload.pk).update(
        state="running",
        submitted_at=started - timedelta(hours=1),
        admitted_at=started,
        started_at=started,
    )
    page = berlin_page(page_as, "/workloads/nlp/train/")
    assert "Running since 2026-07-02 00:30 UTC+2." in page
    assert "Running since 2026-07-01 22:30 UTC." in text(
        page_as("max").get("/workloads/nlp/train/")
    )
