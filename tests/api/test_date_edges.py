"""Read-only queries at the calendar's edges and in the future: a valid range answers (the
reports to December 9999), a time outside UTC's calendar is a 400 naming it in the lists'
words, and utilisation counts running work up to the pool's clock, never hours to come."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from resources_pool import pool, submit

from gpupool.accounting.actions import do_open_usage
from gpupool.inventory.models import Node
from gpupool.workloads.actions import PlacementSpec, do_transition_workload

pytestmark = pytest.mark.django_db

OUTSIDE_UTC = "a time between the years 1 and 9999 in UTC"


@pytest.fixture
def resources(world: Any) -> dict[str, Any]:
    return pool(world)


def run_for_an_hour(resources: dict[str, Any]) -> None:
    """Vision runs 4 GPUs on n1 since an hour ago: an open usage interval."""
    workload = submit("open", resources["vision"], resources["other_workload"].submitter, 4)
    start = timezone.now() - timedelta(hours=1)
    placement = PlacementSpec("main", 0, Node.objects.get(name="n1"), [0, 1, 2, 3])
    do_transition_workload(workload, "admitted", reason="fits", at=start, placements=[placement])
    do_transition_workload(workload, "running", reason="started", at=start)
    do_open_usage(workload, flavor=resources["h100"], gpus=4, at=start)


@pytest.mark.parametrize(
    "url",
    [
        "/api/v1/reports/usage/?start=9999-12-01&end=9999-12-31",
        "/api/v1/reports/usage/?start=9999-12-02&end=9999-12-31",
        "/api/v1/reports/usage/?start=0001-01-01&end=0001-01-30",
        "/api/v1/reports/attribution/?start=9999-11-15&end=9999-12-31",
        "/api/v1/reports/capacity/?start=9999-12-30&end=9999-12-31&period=day",
        "/api/v1/reports/capacity/?start=9999-12-30&end=9999-12-31",
        "/api/v1/reports/workloads/?start=9999-12-30&end=9999-12-31",
    ],
)
def test_a_report_to_the_end_of_the_calendar_answers(
    api_as: Any, resources: dict, url: str
) -> None:
    answer = api_as("finance").get(url)
    assert answer.status_code == 200, answer.content
    assert answer.json()["results"] == []


@pytest.mark.parametrize("url", ["/api/v1/utilization/tenants/", "/api/v1/utilization/wasters/"])
@pytest.mark.parametrize(
    ("query", "named"),
    [
        ("since=0001-01-01T00:00:00%2B05:00&until=0001-01-02T00:00:00Z", "since"),
        ("since=9999-12-31T00:00:00Z&until=9999-12-31T23:00:00-05:00", "until"),
    ],
)
def test_a_utilisation_time_outside_utc_is_a_400_naming_it(
    api_as: Any, resources: dict, url: str, query: str, named: str
) -> None:
    answer = api_as("admin").get(f"{url}?{query}")
    assert answer.status_code == 400, answer.content
    assert answer.json()["error"]["fields"] == {named: [OUTSIDE_UTC]}


@pytest.mark.parametrize("url", ["/api/v1/utilization/tenants/", "/api/v1/utilization/wasters/"])
def test_the_default_window_before_an_until_in_year_one_starts_with_the_calendar(
    api_as: Any, resources: dict, url: str
) -> None:
    answer = api_as("admin").get(f"{url}?until=0001-01-01T00:30:00Z")
    assert answer.status_code == 200, answer.content
    assert answer.json() == []


def test_a_future_window_holds_no_gpu_hours(api_as: Any, resources: dict) -> None:
    run_for_an_hour(resources)
    answer = api_as("admin").get(
        "/api/v1/utilization/tenants/?since=9999-12-31T00:00:00Z&until=9999-12-31T23:59:59Z"
    )
    assert answer.status_code == 200, answer.content
    assert all(row["allocated_gpu_hours"] == 0 for row in answer.json()), answer.json()


def test_running_work_counts_up_to_now_in_a_window_reaching_past_it(
    api_as: Any, resources: dict
) -> None:
    run_for_an_hour(resources)
    now = timezone.now()
    since, until = now - timedelta(hours=2), now + timedelta(hours=5)
    answer = api_as("admin").get(
        "/api/v1/utilization/tenants/",
        {"since": since.isoformat(), "until": until.isoformat()},
    )
    assert answer.status_code == 200, answer.content
    rows = {row["tenant"]: row for row in answer.json()}
    assert "vision" in rows, rows
    vision = rows["vision"]
    assert vision["allocated_gpu_hours"] == pytest.approx(4.0, abs=0.01)  # 4 GPUs x 1 hour
