"""Finance's walk of the Cost page: a range of days of its own (``?start=&end=``, the reports
API's parameters) beside the month, refused beside its fields by the reports' own rule; the
per-team CSV carrying every figure column the page shows, with the page's numbers; and a month
or range not begun, or not ended, on the pool's clock saying so.

The roll-up is ``test_cost_page``'s (nlp 6 GPUs and vision 1 for two hours from ``T0``), with a
20-minute job of vision on 1 GPU so that the figures are not whole GPU-hours."""

from __future__ import annotations

import csv
import html
from datetime import date, timedelta
from decimal import Decimal
from typing import Any

import pytest
from dashboard_pages import field_errors, text
from django.utils import timezone
from test_cost_page import cells, day_after_tomorrow, rolled  # noqa: F401 (a fixture)

from gpupool.accounting import reports
from gpupool.accounting.actions import do_close_usage, do_open_usage, do_roll_up_usage
from gpupool.accounting.periods import accounting_zone, local_day, next_month
from gpupool.accounting.reports import NO_TEAM
from gpupool.accounting.reports_api import AttributionRowSerializer
from gpupool.control.clock import pool_now
from gpupool.dashboard.templatetags.dashboard import gpu_hours, money_filter
from gpupool.dashboard.views import TEAM_COLUMNS
from gpupool.workloads.actions import PodSetSpec, do_submit_workload

# How the page writes each column of its team table (``TEAM_COLUMNS``, in the table's order).
WRITTEN = {name: money_filter if name.endswith("_cost") else gpu_hours for name in TEAM_COLUMNS}


@pytest.fixture
def fractional(rolled: str, pool: Any) -> str:  # noqa: F811
    """``rolled``, with vision on 1 GPU for 20 minutes more (a third of a GPU-hour)."""
    t2 = day_after_tomorrow() + timedelta(hours=2)
    workload = do_submit_workload(
        "vision-short",
        queue=pool.vision_queue,
        pod_sets=[PodSetSpec(count=1, gpus=1, flavor=pool.h100)],
        at=t2,
    )
    do_open_usage(workload, flavor=pool.h100, gpus=1, at=t2)
    do_close_usage(workload, at=t2 + timedelta(minutes=20))
    do_roll_up_usage(until=t2 + timedelta(hours=1))
    return rolled


def exported(client: Any, link: str) -> list[dict[str, str]]:
    """The rows of the CSV the page links to."""
    response = client.get(link)
    assert response.status_code == 200
    body = b"".join(response.streaming_content).decode()
    return list(csv.DictReader(body.splitlines()))


def team_row(page: str, tenant: str) -> list[str]:
    return cells(page, f"<tr><td>{tenant}</td>")


def pool_day() -> date:
    return local_day(pool_now(), accounting_zone())


# ----------------------------------------------------------------------------- the CSV's columns


def test_the_team_csv_carries_every_figure_column_of_the_page_with_its_numbers(
    fractional: str, page_as: Any
) -> None:
    client = page_as("fin")
    response = client.get(f"/cost/?month={fractional}")
    page = text(response)
    rows = exported(client, response.context["csv"]["teams"])
    assert {row["tenant"] for row in rows} == {"nlp", "vision"}
    for row in rows:
        assert set(TEAM_COLUMNS) <= set(row), set(TEAM_COLUMNS) - set(row)
        shown = team_row(page, row["tenant"])
        assert shown == [WRITTEN[name](row[name]) for name in TEAM_COLUMNS], row["tenant"]
    # charged is used plus reserved idle, in the CSV as on the page
    vision = next(row for row in rows if row["tenant"] == "vision")
    assert Decimal(vision["charged"]) == Decimal(vision["used"]) + Decimal(vision["reserved_idle"])
    assert "GPU-h" in team_row(page, "vision")[5] and "." in team_row(page, "vision")[0]


def test_the_page_shows_a_figure_as_the_csv_writes_it_before_rounding_it() -> None:
    """One rule of places for both: the API's field and ``reports.written`` (half to even),
    so the page's cent is the CSV's, never the exact cost rounded another way."""
    written = reports.written
    field = AttributionRowSerializer().fields["charged_cost"]
    for exact in (Decimal("0.01499996"), Decimal("2.00005"), Decimal("7.12345678")):
        assert field.to_representation(exact) == str(written(exact))
    assert money_filter(written(Decimal("0.01499996"))) == money_filter(
        field.to_representation(Decimal("0.01499996"))
    )


# ----------------------------------------------------------------------------- a range of days


def test_a_range_of_days_shows_those_days_and_the_csvs_follow_it(
    fractional: str, page_as: Any
) -> None:
    client = page_as("fin")
    day = day_after_tomorrow().date().isoformat()
    response = client.get(f"/cost/?start={day}&end={day}")
    page = text(response)
    assert f"{day} to {day}: per team" in page
    assert f'name="start" value="{day}"' in page and f'name="end" value="{day}"' in page
    for link in response.context["csv"].values():
        assert f"start={day}" in link and f"end={day}" in link
    rows = exported(client, response.context["csv"]["teams"])
    for row in rows:
        assert team_row(page, row["tenant"]) == [WRITTEN[n](row[n]) for n in TEAM_COLUMNS]
    # the days before have none of it
    before = (day_after_tomorrow().date() - timedelta(days=1)).isoformat()
    empty = text(client.get(f"/cost/?start={before}&end={before}"))
    assert f"No GPU-hours from {before} to {before}" in empty


def test_a_range_across_months_adds_up_the_csvs_rows_per_team(
    fractional: str, page_as: Any
) -> None:
    client = page_as("fin")
    start = date.fromisoformat(f"{fractional}-01") - timedelta(days=40)
    end = next_month(date.fromisoformat(f"{fractional}-01")) - timedelta(days=1)
    response = client.get(f"/cost/?start={start}&end={end}")
    page = text(response)
    assert "month by month" in page  # the CSV link says its rows are the months
    rows = exported(client, response.context["csv"]["teams"])
    for tenant in ("nlp", "vision"):
        mine = [row for row in rows if row["tenant"] == tenant]
        sums = {n: sum((Decimal(row[n]) for row in mine), Decimal(0)) for n in TEAM_COLUMNS}
        assert team_row(page, tenant) == [WRITTEN[n](sums[n]) for n in TEAM_COLUMNS]


BACKWARDS = "must not be before start (2026-03-01 is before 2026-03-10)"
TOO_LONG = "a report covers at most {longest} days from start to end"
PAST_THE_CALENDAR = "0001-06-01 is out of range: pick a day from 0002-01-01 to 9999-11-30."


@pytest.mark.parametrize(
    ("query", "field", "message"),
    [
        ("start=2026-03-10&end=2026-03-01", "end", BACKWARDS),
        ("start=2020-01-01&end=2026-01-01", "start", TOO_LONG),
        ("start=2026-03-10", "end", "give the last day too (YYYY-MM-DD)"),
        ("end=2026-03-10", "start", "give the first day too (YYYY-MM-DD)"),
        ("start=2026-02-30&end=2026-03-01", "start", "Enter a valid date."),
        ("start=0001-06-01&end=0001-06-02", "start", PAST_THE_CALENDAR),
    ],
    ids=["end-before-start", "too-long", "no-end", "no-start", "no-such-day", "past-the-calendar"],
)  # fmt: skip
def test_a_range_the_reports_refuse_is_said_beside_its_field_and_the_month_shows(
    pool: Any, page_as: Any, query: str, field: str, message: str
) -> None:
    response = page_as("fin").get(f"/cost/?{query}")
    assert response.status_code == 200
    page = text(response)
    message = message.format(longest=getattr(reports, "LONGEST_SPAN_DAYS", "?"))
    assert html.escape(message) in field_errors(page, field)
    this_month = pool_day().strftime("%B %Y")
    assert f"Showing {this_month} instead." in page
    for given in query.split("&"):  # what was typed stays in its field
        name, value = given.split("=")
        assert f'name="{name}" value="{value}"' in page


def test_the_page_refuses_a_span_as_the_reports_api_does(pool: Any, page_as: Any) -> None:
    client = page_as("fin")
    query = "start=2020-01-01&end=2026-01-01"
    api = client.get(f"/api/v1/reports/attribution/?{query}")
    assert api.status_code == 400
    (said,) = api.json()["error"]["fields"]["start"]
    assert html.escape(said) in field_errors(text(client.get(f"/cost/?{query}")), "start")
    longest = date(2020, 1, 1) + timedelta(days=reports.LONGEST_SPAN_DAYS)
    fine = client.get(f"/api/v1/reports/attribution/?start=2020-01-01&end={longest}")
    assert fine.status_code == 200
    response = client.get(f"/cost/?start=2020-01-01&end={longest}")
    assert 'class="errorlist' not in text(response) and response.context["ranged"]


# ----------------------------------------------------------------------------- not begun


def test_a_month_not_begun_says_so_beside_no_gpu_hours(fractional: str, page_as: Any) -> None:
    later = next_month(next_month(pool_day().replace(day=1)))
    page = text(page_as("fin").get(f"/cost/?month={later:%Y-%m}"))
    name = later.strftime("%B %Y")
    assert f"{name} has not begun: the pool's clock reads" in page
    assert f"No GPU-hours in {name}: the month has not begun." in page


def test_a_range_not_begun_says_so(fractional: str, page_as: Any) -> None:
    start = pool_day() + timedelta(days=60)
    end = start + timedelta(days=3)
    page = text(page_as("fin").get(f"/cost/?start={start}&end={end}"))
    assert f"The days {start} to {end} have not begun: the pool's clock reads" in page
    assert f"No GPU-hours from {start} to {end}: these days have not begun." in page


def test_a_span_not_ended_says_what_is_counted_and_a_past_one_says_nothing(
    pool: Any, page_as: Any
) -> None:
    client = page_as("fin")
    today = pool_day()
    month = text(client.get(f"/cost/?month={today:%Y-%m}"))
    assert f"{today:%B %Y} has not ended: nothing is rolled up yet" in month
    days = f"start={today - timedelta(days=1)}&end={today + timedelta(days=1)}"
    assert "have not ended: nothing is rolled up yet" in text(client.get(f"/cost/?{days}"))
    past = text(client.get("/cost/?month=2001-01"))
    assert "not ended" not in past and "not begun" not in past
    # a span whose last day (included) is today has not ended either: on a month's last day
    # its page stopped saying so
    ending = f"start={today - timedelta(days=3)}&end={today}"
    assert "have not ended: nothing is rolled up yet" in text(client.get(f"/cost/?{ending}"))


def test_begun_and_ended_are_read_on_the_pools_clock(pool: Any, page_as: Any) -> None:
    """The demo's pool runs ahead of the wall clock: its month is under way, the wall clock's
    is over."""
    from gpupool.control.actions import do_finish_cycle, do_start_cycle
    from gpupool.control.choices import CycleStatus

    ahead = timezone.now() + timedelta(days=40)
    cycle = do_start_cycle(at=timezone.now())
    cycle.cluster_at = ahead
    do_finish_cycle(cycle, at=timezone.now(), status=CycleStatus.SUCCEEDED)
    client = page_as("fin")
    pools = text(client.get(f"/cost/?month={ahead:%Y-%m}"))
    assert f"{ahead:%B %Y} has not ended" in pools and "not begun" not in pools
    walls = text(client.get(f"/cost/?month={timezone.now():%Y-%m}"))
    assert "not ended" not in walls and "not begun" not in walls


def test_the_schema_says_what_a_null_tenant_means(pool: Any) -> None:
    """The CSV's tenant cell of no team is ``NO_TEAM``; the JSON keeps null, a machine
    value, and the schema's field says what it means (docs/api.md)."""
    from gpupool.accounting.reports_api import no_team_named

    assert no_team_named({"tenant": None})["tenant"] == NO_TEAM
    said = str(AttributionRowSerializer().fields["tenant"].help_text)
    assert "null for the pool's own queues" in said and NO_TEAM in said
