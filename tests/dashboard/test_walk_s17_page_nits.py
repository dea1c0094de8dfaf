"""Small page problems a tester found (walk s17): the admin's navigation names Workloads as
the page does, cycles shorter than a second read in milliseconds, the charts over the last
day show a pool's first minutes with readable time ticks, the Utilisation page says when no
utilisation source is configured rather than calling every GPU-hour idle, and /favicon.ico
answers."""

from __future__ import annotations

import json
import re
from datetime import timedelta
from typing import Any

from dashboard_pages import text
from django.contrib.staticfiles import finders
from django.utils import timezone
from test_utilization_page import running

from gpupool.control.models import SchedulingCycle
from gpupool.control.queries import sampled_cycles
from gpupool.dashboard import charts
from gpupool.dashboard.templatetags.dashboard import duration


def figure_in(page: str, script_id: str) -> Any:
    """The figure a page hands its chart script (``json_script``)."""
    found = re.search(rf'<script id="{script_id}" type="application/json">(.*?)</script>', page)
    assert found is not None, script_id
    return json.loads(found.group(1))


def nav_labels(page: str) -> list[str]:
    """The main navigation's link texts."""
    nav = re.search(r'<nav aria-label="Main">(.*?)</nav>', page, re.S)
    assert nav is not None
    return [label.strip() for label in re.findall(r"<a [^>]*>([^<]*)</a>", nav.group(1))]


def test_the_admins_navigation_names_every_teams_workloads_as_the_page_does(
    page_as: Any,
) -> None:
    admin = page_as("ada").get("/workloads/").content.decode()
    assert "Workloads" in nav_labels(admin)
    assert "My workloads" not in nav_labels(admin)
    assert "<h1>Workloads</h1>" in admin
    member = page_as("max").get("/workloads/").content.decode()
    assert "My workloads" in nav_labels(member)
    assert "<h1>My workloads</h1>" in member


def test_durations_below_a_second_read_in_milliseconds() -> None:
    assert duration(0.045) == "45 ms"
    assert duration(0.02) == "20 ms"
    assert duration(0.5) == "500 ms"
    assert duration(0.9999) == "1 s"
    assert duration(1.5) == "1.5 s"
    assert duration(0) == "0 s"


def cycle_at(at: Any, took: float, allocated: float = 1.0) -> SchedulingCycle:
    """A succeeded cycle's record, as the loop writes it, with nlp's h100 GPUs."""
    return SchedulingCycle.objects.create(
        started_at=at,
        cluster_at=at,
        finished_at=at + timedelta(seconds=took),
        status="succeeded",
        plan_s=took / 2,
        record_s=took / 4,
        outcome={"queues": {"nlp": {"h100": {"allocated": allocated}}}},
    )


def test_the_overviews_cycles_table_says_milliseconds_for_short_cycles(
    pool: Any, page_as: Any
) -> None:
    cycle_at(timezone.now() - timedelta(minutes=1), took=0.045)
    page = text(page_as("ada").get("/overview/"))
    assert '<td class="number">45 ms</td>' in page  # Took, where it read "0 s"
    assert "plan 22 ms" in page  # its phases in the same words


def test_a_young_pool_is_sampled_by_the_minute_over_a_day_window(pool: Any) -> None:
    now = timezone.now()
    made = [cycle_at(now - timedelta(minutes=minutes), took=0.05) for minutes in (30, 20, 10, 1)]
    kept = sampled_cycles(now - timedelta(hours=24), now)
    assert [c.pk for c in kept] == [c.pk for c in made]  # four minutes, four points


def test_an_old_pool_is_still_thinned_to_the_hour_over_a_day_window(pool: Any) -> None:
    now = timezone.now().replace(minute=30)
    cycle_at(now - timedelta(hours=5), took=0.05)
    made = [cycle_at(now - timedelta(minutes=minutes), took=0.05) for minutes in (20, 10)]
    kept = sampled_cycles(now - timedelta(hours=24), now)
    assert [c.pk for c in kept][-1] == made[-1].pk
    assert made[0].pk not in [c.pk for c in kept]  # the same hour keeps its last cycle


def test_trend_charts_mark_lone_points_and_read_ticks_as_times() -> None:
    times = ["2026-12-06T14:37:35.018500"]
    for figure in (
        charts.allocation_area_figure(times, {"nlp · h100": [4.0]}, {}, zone="UTC"),
        charts.fragmentation_trend_figure(times, {"free": [3.0]}, zone="UTC"),
    ):
        assert {trace["mode"] for trace in figure["data"]} == {"lines+markers"}
        axis = figure["layout"]["xaxis"]
        formats = [stop["value"] for stop in axis["tickformatstops"]]
        assert "%H:%M" in formats
        assert not any("%L" in f or "%f" in f for f in formats)


def test_without_a_utilisation_source_nothing_is_called_idle(
    pool: Any, page_as: Any, settings: Any
) -> None:
    settings.GPUPOOL_UTILIZATION_SOURCE = "none"
    running(pool, "wl-alpha", pool.nlp_queue, 4, "max", busy=0.0)
    page = text(page_as("ada").get("/utilization/"))
    assert "No utilisation source is configured" in page
    assert "GPUPOOL_UTILIZATION_SOURCE" in page
    assert "docs/utilization.md" in page
    assert "wl-alpha" not in page  # not listed as holding GPUs idle
    assert "Idle allocated" not in page
    for chart in ("pool-chart-figure", "team-chart-figure"):
        figure = figure_in(page, chart)
        names = [trace["name"] for trace in figure["data"]]
        assert names and not any("active" in name for name in names)
        assert not any(trace.get("fill") == "tonexty" for trace in figure["data"])


def test_with_a_utilisation_source_the_idle_list_stays(
    pool: Any, page_as: Any, settings: Any
) -> None:
    settings.GPUPOOL_UTILIZATION_SOURCE = "simulated"
    running(pool, "wl-alpha", pool.nlp_queue, 4, "max", busy=0.0)
    page = text(page_as("ada").get("/utilization/"))
    assert "No utilisation source is configured" not in page
    assert "wl-alpha" in page


def test_favicon_ico_leads_to_the_pages_own_svg(pool: Any, page_as: Any) -> None:
    answer = page_as("max").get("/favicon.ico")
    assert answer.status_code in (301, 302)
    assert answer["Location"].endswith("dashboard/favicon.svg")
    assert finders.find("dashboard/favicon.svg")
    page = page_as("max").get("/overview/").content.decode()
    assert re.search(r'<link rel="icon" href="[^"]*dashboard/favicon\.svg"', page)
