"""Charts over time are drawn in the zone the tables use -- the viewer's, from the
``gpupool_tz`` cookie the browser writes URL-encoded (``Europe%2FBerlin``) -- and their time
axis names it. The server once read the encoded name as no zone at all, so every chart was
drawn in UTC beside tables the browser had rewritten in the viewer's zone."""

from __future__ import annotations

import json
import zoneinfo
from datetime import UTC, datetime, timedelta
from typing import Any

from dashboard_pages import text
from django.utils import timezone

from gpupool.control.models import SchedulingCycle
from gpupool.dashboard import charts
from gpupool.dashboard.views import utilization_figures

BERLIN = zoneinfo.ZoneInfo("Europe/Berlin")
COOKIE = "Europe%2FBerlin"  # what frontend/js/time.js writes (encodeURIComponent)


def figure(page: str, name: str) -> dict[str, Any]:
    """The figure a page embeds as ``<script id="NAME-figure" type="application/json">``."""
    start = page.index(f'id="{name}-figure"')
    body = page[page.index(">", start) + 1 : page.index("</script>", start)]
    return dict(json.loads(body))


def in_berlin(moment: datetime) -> str:
    return moment.astimezone(BERLIN).replace(tzinfo=None).isoformat()


def test_wall_times_are_the_zones_wall_time_and_the_axis_names_the_zone() -> None:
    noon_utc = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)
    assert charts.wall_times([noon_utc], BERLIN) == ["2026-12-06T13:00:00"]
    figure = charts.fragmentation_trend_figure(
        charts.wall_times([noon_utc], BERLIN), {"free": [3.0]}, zone="Europe/Berlin"
    )
    assert figure["data"][0]["x"] == ["2026-12-06T13:00:00"]
    assert figure["layout"]["xaxis"]["title"]["text"] == "time (Europe/Berlin)"
    assert figure["layout"]["xaxis"]["type"] == "date"


def cycle(minutes_ago: float) -> SchedulingCycle:
    """A succeeded cycle with nlp's h100 allocation and a fragmentation sample."""
    at = timezone.now() - timedelta(minutes=minutes_ago)
    return SchedulingCycle.objects.create(
        started_at=at,
        cluster_at=at,  # the loop's cycles carry the cluster's clock (here the wall's)
        finished_at=at + timedelta(seconds=1),
        status="succeeded",
        outcome={
            "queues": {"nlp": {"h100": {"allocated": 4.0, "borrowed": 0.0, "lent": 0.0}}},
            "fragmentation": {"h100": {"free": 7.0, "fragmented": 1.0, "largest_gang": 7}},
        },
    )


def test_the_overview_and_fragmentation_charts_are_drawn_in_the_viewers_zone(
    pool: Any, page_as: Any
) -> None:
    recorded = cycle(5)
    client = page_as("ada")
    client.cookies["gpupool_tz"] = COOKIE
    overview = text(client.get("/overview/"))
    allocation = figure(overview, "allocation-chart")
    assert allocation["data"][0]["x"] == [in_berlin(recorded.started_at)]
    assert allocation["layout"]["xaxis"]["title"]["text"] == "time (Europe/Berlin)"
    trend = figure(text(client.get("/fragmentation/")), "trend-chart")
    assert trend["data"][0]["x"] == [in_berlin(recorded.started_at)]
    assert trend["layout"]["xaxis"]["title"]["text"] == "time (Europe/Berlin)"
    # the table beside them is in the same zone (before the browser rewrites it)
    assert timezone.localtime(recorded.started_at, BERLIN).strftime("%Y-%m-%d %H:%M") in overview


def test_the_utilisation_charts_are_drawn_in_the_viewers_zone(pool: Any) -> None:
    hour = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    with timezone.override(BERLIN):
        made = utilization_figures(
            [hour - timedelta(hours=1), hour], hour + timedelta(minutes=30), {"nlp": [2.0, 1.0]},
            {"nlp": [1.0, 0.5]}, {"nlp"},
        )  # fmt: skip
    for name in ("pool_figure", "team_figure"):
        axis = made[name]["layout"]["xaxis"]
        assert axis["title"]["text"] == "time (Europe/Berlin)"
        assert made[name]["data"][0]["x"] == [in_berlin(hour - timedelta(hours=1)), in_berlin(hour)]


def test_without_a_zone_the_charts_say_they_are_in_utc(pool: Any, page_as: Any) -> None:
    recorded = cycle(5)
    allocation = figure(text(page_as("ada").get("/overview/")), "allocation-chart")
    assert allocation["data"][0]["x"] == [
        recorded.started_at.astimezone(UTC).replace(tzinfo=None).isoformat()
    ]
    assert allocation["layout"]["xaxis"]["title"]["text"] == "time (UTC)"
