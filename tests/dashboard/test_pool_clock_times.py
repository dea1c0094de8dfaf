"""The pages show one clock: the pool's (``control.clock``).

A simulated cluster (the demo: an hour a minute) runs ahead of the wall clock, and the loop
stamps what it records with the cluster's clock. The demo's walk-through found three places
on the wall clock instead: the Overview's last cycles (the Queues page named the same cycle
at the pool's clock), the quota requests' steps (shown beside workloads' times), and the
"last 24 h" charts of the Overview and the Fragmentation page (a few minutes of the wall
clock's day instead of the pool's day). On a real cluster both clocks are one: nothing there
changes.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from dashboard_pages import text
from django.utils import timezone
from two_teams import quota_request

from gpupool.control.clock import pool_now
from gpupool.control.models import SchedulingCycle
from gpupool.quotas.actions import (
    do_approve_and_apply_quota_request,
)
from gpupool.quotas.models import QuotaRequest

AHEAD = timedelta(days=2)  # how far the simulated cluster's clock runs ahead of the wall's


def cycle(wall_minutes_ago: float, pool_hours_ago: float | None, ahead: timedelta) -> Any:
    """A succeeded cycle as the loop records it: started ``wall_minutes_ago`` on the wall
    clock, having read the cluster's clock ``pool_hours_ago`` before the pool's now (the wall
    clock plus ``ahead``; None: the cluster's clock is the wall clock, a real cluster)."""
    started = timezone.now() - timedelta(minutes=wall_minutes_ago)
    cluster_at = (
        started
        if pool_hours_ago is None
        else timezone.now() + ahead - timedelta(hours=pool_hours_ago)
    )
    return SchedulingCycle.objects.create(
        started_at=started,
        cluster_at=cluster_at,
        finished_at=started + timedelta(seconds=1),
        status="succeeded",
        plan_s=0.25,
        outcome={
            "queues": {"nlp": {"h100": {"allocated": 4.0, "borrowed": 0.0, "lent": 0.0}}},
            "fragmentation": {"h100": {"free": 7.0, "fragmented": 1.0, "largest_gang": 7}},
        },
    )


def demo_cycles() -> list[Any]:
    """Three cycles of a cluster two days ahead, every 10 wall minutes an hour a minute: 30,
    10 and 0 hours of the pool's clock ago (all three in the wall clock's last day, only the
    last two in the pool's)."""
    return [cycle(30, 30, AHEAD), cycle(10, 10, AHEAD), cycle(0, 0, AHEAD)]


def figure(page: str, name: str) -> dict[str, Any]:
    """The figure a page embeds as ``<script id="NAME-figure" type="application/json">``."""
    start = page.index(f'id="{name}-figure"')
    return dict(json.loads(page[page.index(">", start) + 1 : page.index("</script>", start)]))


def utc(moment: datetime) -> str:
    """A moment as a chart's time axis writes it without a viewer's zone."""
    return moment.astimezone(UTC).replace(tzinfo=None).isoformat()


def minute(moment: datetime) -> str:
    """A moment as a table writes it (``local_time``, UTC)."""
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M")


def cycles_table(page: str) -> str:
    return page[page.index('id="cycles-title"') :]


def test_the_overview_names_a_cycle_at_the_pools_clock_as_the_queues_page_does(
    pool: Any, page_as: Any
) -> None:
    *_, last = demo_cycles()
    client = page_as("ada")
    listed = cycles_table(text(client.get("/overview/")))
    assert f'datetime="{last.cluster_at.isoformat()}"' in listed
    assert minute(last.cluster_at) in listed and minute(last.started_at) not in listed
    queues = text(client.get("/queues/"))
    assert f"at cycle {last.pk}, " in queues and minute(last.cluster_at) in queues
    # the phases chart labels each cycle by the same time
    phases = figure(listed, "phases-chart")
    assert phases["data"][0]["x"][-1] == last.cluster_at.astimezone(UTC).strftime("%H:%M:%S")


def test_the_overview_chart_covers_the_pools_last_24_hours(pool: Any, page_as: Any) -> None:
    _, middle, last = demo_cycles()
    allocation = figure(text(page_as("ada").get("/overview/")), "allocation-chart")
    assert allocation["data"][0]["x"] == [utc(middle.cluster_at), utc(last.cluster_at)]


def test_the_fragmentation_trend_covers_the_pools_last_24_hours(pool: Any, page_as: Any) -> None:
    _, middle, last = demo_cycles()
    trend = figure(text(page_as("ada").get("/fragmentation/")), "trend-chart")
    assert trend["data"][0]["x"] == [utc(middle.cluster_at), utc(last.cluster_at)]


def file_and_decide(pool: Any) -> QuotaRequest:
    """nlp's lead files and submits a request; an admin approves and applies it."""
    request = quota_request(pool, submit=True)
    return do_approve_and_apply_quota_request(request, acting_user=pool.users["ada"])


def test_quota_request_steps_are_stamped_on_the_pools_clock(pool: Any, page_as: Any) -> None:
    *_, last = demo_cycles()
    request = QuotaRequest.objects.get(pk=file_and_decide(pool).pk)
    steps = (request.created_at, request.submitted_at, request.decided_at, request.applied_at)
    assert steps == (last.cluster_at,) * 4 == (pool_now(),) * 4
    page = text(page_as("lena").get(f"/requests/{request.pk}/"))
    assert minute(last.cluster_at) in page and minute(timezone.now()) not in page


@pytest.mark.parametrize("page", ["/overview/", "/fragmentation/"])
def test_on_a_real_cluster_the_pages_keep_the_wall_clock(
    pool: Any, page_as: Any, page: str
) -> None:
    """The cluster's clock is the wall clock: the last day is the wall clock's, and a cycle
    is named by its start, as before."""
    old, middle, last = (
        cycle(30 * 60, None, AHEAD),
        cycle(10 * 60, None, AHEAD),
        cycle(1, None, AHEAD),
    )
    shown = text(page_as("ada").get(page))
    name = "allocation-chart" if page == "/overview/" else "trend-chart"
    assert figure(shown, name)["data"][0]["x"] == [utc(middle.started_at), utc(last.started_at)]
    if page == "/overview/":
        assert f'datetime="{old.started_at.isoformat()}"' in cycles_table(shown)


def test_on_a_real_cluster_quota_requests_keep_the_wall_clock(pool: Any) -> None:
    cycle(1, None, AHEAD)
    before = timezone.now()
    request = file_and_decide(pool)
    after = timezone.now()
    for stamp in (request.created_at, request.submitted_at, request.decided_at, request.applied_at):
        assert stamp is not None and before <= stamp <= after
