"""The Cost page: each team's GPU-hours and cost in the attribution lines, the pool's four
lines adding up to its healthy capacity, the trend and CSV links -- checked against a hand
count of a small roll-up, and scoped by role as the reports API scopes them.

The roll-up (the page tests' pool: 15 healthy h100 GPUs at 2.50 per GPU-hour; nlp and vision
each guaranteed 4): for two hours from ``T0`` nlp uses 6 GPUs and vision 1. By hand:

| team | used | within guarantee | reserved idle | above guarantee | charged | cost charged |
|---|---|---|---|---|---|---|
| nlp | 12 | 8 | 0 | 4 | 12 | 30.00 |
| vision | 2 | 2 | 6 | 0 | 8 | 20.00 |

and the pool: 30 GPU-hours of healthy capacity = 10 within + 6 reserved idle + 4 above + 10
pool idle, worth 75.00.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from typing import Any

import pytest
from dashboard_pages import text
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from gpupool.accounting.actions import do_close_usage, do_open_usage, do_roll_up_usage
from gpupool.dashboard import charts
from gpupool.workloads.actions import PodSetSpec, do_submit_workload


def day_after_tomorrow() -> datetime:
    """10:00 UTC the day after tomorrow: after the pool's prices and quotas were set, and
    two hours from it in the same accounting day (UTC in the tests)."""
    return (timezone.now() + timedelta(days=2)).replace(hour=10, minute=0, second=0, microsecond=0)


@pytest.fixture
def rolled(pool: Any) -> str:
    """Two hours of nlp on 6 GPUs and vision on 1, rolled up; the month they fall in."""
    t0 = day_after_tomorrow()
    do_roll_up_usage(until=t0)
    for team_queue, gpus in ((pool.nlp_queue, 6), (pool.vision_queue, 1)):
        workload = do_submit_workload(
            f"{team_queue.name}-job",
            queue=team_queue,
            pod_sets=[PodSetSpec(count=1, gpus=gpus, flavor=pool.h100)],
            at=t0,
        )
        do_open_usage(workload, flavor=pool.h100, gpus=gpus, at=t0)
        do_close_usage(workload, at=t0 + timedelta(hours=2))
    do_roll_up_usage(until=t0 + timedelta(hours=2))
    return t0.strftime("%Y-%m")


def cells(page: str, row_start: str) -> list[str]:
    """The texts of the cells of the table row that starts with ``row_start``."""
    row = page.split(row_start, 1)[1].split("</tr>", 1)[0]
    return [re.sub(r"<[^>]+>", "", cell) for cell in re.findall(r"<td[^>]*>.*?</td>", row)]


def test_finance_sees_each_teams_lines_and_cost_as_counted_by_hand(
    rolled: str, page_as: Any
) -> None:
    page = text(page_as("fin").get(f"/cost/?month={rolled}"))
    # No activity was recorded: all that each team used is idle allocated (the fifth cell).
    assert cells(page, "<tr><td>nlp</td>") == [
        "12 GPU-h", "8 GPU-h", "0 GPU-h", "4 GPU-h", "12 GPU-h", "12 GPU-h", "30.00", "0.00",
        "30.00"
    ]  # fmt: skip
    assert cells(page, "<tr><td>vision</td>") == [
        "2 GPU-h", "2 GPU-h", "6 GPU-h", "0 GPU-h", "2 GPU-h", "8 GPU-h", "5.00", "15.00", "20.00"
    ]  # fmt: skip
    assert cells(page, '<tr id="team-totals">') == [
        "14 GPU-h", "10 GPU-h", "6 GPU-h", "4 GPU-h", "14 GPU-h", "20 GPU-h", "35.00", "15.00",
        "50.00"
    ]  # fmt: skip


def test_the_pools_four_lines_add_up_to_its_healthy_capacity(rolled: str, page_as: Any) -> None:
    page = text(page_as("fin").get(f"/cost/?month={rolled}"))
    pool_table = page.split('id="cost-pool"', 1)[1]
    assert cells(pool_table, "<tr><td>h100</td>") == [
        "GPU-hours", "30", "10", "6", "4", "10", "75.00"
    ]  # fmt: skip
    assert "The lines add up to <strong>30 GPU-h</strong> of healthy capacity" in page
    assert "worth 75.00" in page


def test_a_lead_sees_only_their_teams_rows_and_the_pools_lines(rolled: str, page_as: Any) -> None:
    page = text(page_as("lena").get(f"/cost/?month={rolled}"))
    assert "<tr><td>nlp</td>" in page and "<tr><td>vision</td>" not in page
    assert cells(page, '<tr id="team-totals">')[:2] == ["12 GPU-h", "8 GPU-h"]
    assert "The lines add up to <strong>30 GPU-h</strong>" in page
    assert '"vision"' not in page  # nor in the trend's figure


def test_the_trend_stacks_each_teams_charged_hours_under_the_capacity(
    rolled: str, page_as: Any
) -> None:
    response = page_as("ada").get(f"/cost/?month={rolled}")
    figure = response.context["trend_figure"]
    bars = {trace["name"]: trace["y"] for trace in figure["data"] if trace["type"] == "bar"}
    assert bars == {"nlp": [0.0] * 11 + [12.0], "vision": [0.0] * 11 + [8.0]}
    assert figure["data"][-1]["name"] == "healthy capacity"
    assert figure["data"][-1]["y"] == [None] * 11 + [30.0]
    assert len(figure["data"][-1]["x"]) == 12 and figure["data"][-1]["x"][-1] == rolled


def test_the_csv_links_ask_the_reports_api_for_the_month_shown(rolled: str, page_as: Any) -> None:
    client = page_as("fin")
    link = client.get(f"/cost/?month={rolled}").context["csv"]["teams"]
    assert link.startswith("/api/v1/reports/attribution/?")
    assert "by=tenant" in link and "format=csv" in link and f"start={rolled}-01" in link
    exported = b"".join(client.get(link).streaming_content).decode().splitlines()
    assert exported[0].startswith("period,tenant,guarantee,used,used_within_guarantee")
    assert exported[1].startswith(f"{rolled},nlp,") and exported[2].startswith(f"{rolled},vision,")


def test_a_month_without_roll_ups_says_so_and_a_bad_month_shows_this_one(
    rolled: str, page_as: Any
) -> None:
    page = text(page_as("fin").get("/cost/?month=2001-01"))
    assert "No GPU-hours in January 2001." in page
    assert "No capacity rolled up for January 2001." in page
    this_month = timezone.localdate().strftime("%Y-%m")
    assert f'value="{this_month}"' in text(page_as("fin").get("/cost/?month=March"))


def test_before_any_roll_up_the_page_says_what_will_come(pool: Any, page_as: Any) -> None:
    page = text(page_as("fin").get("/cost/"))
    assert "No usage has been rolled up yet" in page
    assert 'id="trend-chart"' not in page and 'id="csv-teams"' not in page


def test_the_cost_trend_figure_stacks_teams_under_a_capacity_line() -> None:
    figure = charts.cost_trend_figure(
        ["2026-02", "2026-03"], {"a": [1.0, 2.0], "b": [3.0, 0.0]}, [10.0, 12.0], {"a": "#111111"}
    )
    assert figure["layout"]["barmode"] == "stack"
    assert [(t["type"], t["name"]) for t in figure["data"]] == [
        ("bar", "a"),
        ("bar", "b"),
        ("scatter", "healthy capacity"),
    ]
    assert figure["data"][0]["marker"]["color"] == "#111111"
    assert figure["data"][2]["y"] == [10.0, 12.0]


def test_a_member_sees_only_their_teams_row(rolled: str, page_as: Any) -> None:
    page = text(page_as("vic").get(f"/cost/?month={rolled}"))
    assert "<tr><td>vision</td>" in page and "<tr><td>nlp</td>" not in page
    assert cells(page, '<tr id="team-totals">')[-1] == "20.00"


def test_the_figures_are_read_from_the_roll_ups_once_until_the_next_roll_up(
    rolled: str, pool: Any, page_as: Any
) -> None:
    client = page_as("fin")
    client.get(f"/cost/?month={rolled}")
    with CaptureQueriesContext(connection) as again:
        page = text(client.get(f"/cost/?month={rolled}"))
    assert cells(page, "<tr><td>nlp</td>")[0] == "12 GPU-h"
    assert not [q for q in again.captured_queries if "accounting_queuemonth" in q["sql"]]
    assert not [q for q in again.captured_queries if "accounting_flavorday" in q["sql"]]
    lena = text(page_as("lena").get(f"/cost/?month={rolled}"))  # her scope: her own key
    assert "<tr><td>nlp</td>" in lena and "<tr><td>vision</td>" not in lena
    # another hour of nlp on 6 GPUs, rolled up: a new version, read afresh
    t2 = day_after_tomorrow() + timedelta(hours=2)
    workload = do_submit_workload(
        "nlp-more",
        queue=pool.nlp_queue,
        pod_sets=[PodSetSpec(count=1, gpus=6, flavor=pool.h100)],
        at=t2,
    )
    do_open_usage(workload, flavor=pool.h100, gpus=6, at=t2)
    do_close_usage(workload, at=t2 + timedelta(hours=1))
    do_roll_up_usage(until=t2 + timedelta(hours=1))
    after = text(client.get(f"/cost/?month={rolled}"))
    assert cells(after, "<tr><td>nlp</td>")[0] == "18 GPU-h"


def test_this_month_is_the_pools_month_when_its_clock_runs_ahead(pool: Any, page_as: Any) -> None:
    """The demo's simulated cluster runs ahead of the wall clock and stamps its usage in its
    own time: the Cost page and the reports API count "this month" from the pool's clock (the
    last cycle's ``cluster_at``), not from the wall clock, or the month the pool is in would
    show nothing new."""
    from gpupool.control.actions import do_finish_cycle, do_start_cycle
    from gpupool.control.choices import CycleStatus

    ahead = timezone.now() + timedelta(days=40)
    cycle = do_start_cycle(at=timezone.now())
    cycle.cluster_at = ahead  # the cluster's clock the cycle read
    do_finish_cycle(cycle, at=timezone.now(), status=CycleStatus.SUCCEEDED)
    month = ahead.strftime("%Y-%m")
    assert f'value="{month}"' in text(page_as("fin").get("/cost/"))
    from gpupool.accounting.reports_api import ReportQuerySerializer

    query = ReportQuerySerializer(data={})
    assert query.is_valid(), query.errors
    assert query.validated_data["start"].isoformat() == f"{month}-01"
    assert query.validated_data["end"] == ahead.date()
