"""/api/v1/reports/ and /api/v1/usage/: scoped to the caller's tenants, CSV equal to JSON,
bad input named, and a bounded number of queries whatever the size of the history."""

from __future__ import annotations

import csv
import io
from collections.abc import Callable
from typing import Any

import pytest
from cost_builders import T0, H, Pool, use
from csv_exports import downloaded, json_pages, paged_as_csv
from rest_framework.test import APIClient

from gpupool.accounting.actions import do_roll_up_usage

pytestmark = pytest.mark.django_db

MARCH = "start=2026-03-01&end=2026-03-31"
REPORTS = [
    f"/api/v1/reports/usage/?{MARCH}",
    f"/api/v1/reports/usage/?{MARCH}&period=day&by=tenant,flavor",
    f"/api/v1/reports/attribution/?{MARCH}&share_idle=true",
    f"/api/v1/reports/attribution/?{MARCH}&by=tenant&period=day",
    f"/api/v1/reports/capacity/?{MARCH}&share_idle=1",
    f"/api/v1/reports/workloads/?{MARCH}",
    "/api/v1/usage/",
]
ClientAs = Callable[[str], APIClient]


@pytest.mark.parametrize("url", REPORTS)
def test_the_csv_export_holds_the_same_rows_as_the_json(
    period: Pool, client_as: ClientAs, url: str
) -> None:
    client = client_as("finance")
    json_rows = paged_as_csv(client, url)
    assert json_rows
    assert downloaded(client, url) == json_rows


def test_finance_reads_every_tenants_cost(period: Pool, client_as: ClientAs) -> None:
    rows = json_pages(client_as("finance"), f"/api/v1/reports/usage/?{MARCH}&by=tenant")
    assert [(row["tenant"], row["gpu_hours"], row["cost"]) for row in rows] == [
        ("a", "16.0000", "40.0000"),
        ("b", "12.0000", "34.0000"),
        ("c", "8.0000", "16.0000"),
    ]


@pytest.mark.parametrize(("role", "tenant"), [("lead", "a"), ("member", "b")])
def test_leads_and_members_read_only_their_tenants_cost(
    period: Pool, client_as: ClientAs, role: str, tenant: str
) -> None:
    client = client_as(role)
    for url in REPORTS:
        if "capacity" in url:
            continue
        rows = json_pages(client, url)
        assert rows and {row["tenant"] for row in rows} == {tenant}, url


def test_the_capacity_report_is_the_pools_and_every_role_reads_it(
    period: Pool, client_as: ClientAs
) -> None:
    answers = [
        json_pages(client_as(role), f"/api/v1/reports/capacity/?{MARCH}")
        for role in ("admin", "finance", "lead", "member")
    ]
    assert all(rows == answers[0] for rows in answers)
    assert answers[0][0]["capacity"] == "56.0000"


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("period=week", "period"),
        ("by=colour", "by"),
        ("start=2026-03-10&end=2026-03-01", "end"),
        ("start=yesterday", "start"),
        ("start=2020-01-01&end=2026-01-01", "start"),
        ("share_idle=perhaps", "share_idle"),
    ],
)
def test_a_bad_query_is_a_400_that_names_the_field(
    pool: Pool, client_as: ClientAs, query: str, field: str
) -> None:
    answer = client_as("finance").get(f"/api/v1/reports/attribution/?{query}")
    assert answer.status_code == 400
    assert field in answer.json()["error"]["fields"]


def test_a_bad_query_asked_as_csv_is_refused_in_a_row_that_names_the_field(
    pool: Pool, client_as: ClientAs
) -> None:
    answer = client_as("finance").get("/api/v1/reports/attribution/?start=yesterday&format=csv")
    assert answer.status_code == 400
    assert answer["Content-Type"].startswith("text/csv")
    (row,) = csv.DictReader(io.StringIO(answer.content.decode()))
    assert (row["status"], row["code"]) == ("400", "invalid")
    assert row["message"].startswith("start: ")


def test_without_days_a_report_covers_this_month_to_date(pool: Pool, client_as: ClientAs) -> None:
    answer = client_as("finance").get("/api/v1/reports/usage/")
    assert answer.status_code == 200
    assert answer.json()["results"] == []


def test_the_usage_intervals_of_another_tenant_are_hidden(
    period: Pool, client_as: ClientAs
) -> None:
    rows = json_pages(client_as("lead"), "/api/v1/usage/?queue=team-b")
    assert rows == []
    mine = json_pages(client_as("lead"), "/api/v1/usage/?open=true")
    assert [(row["workload"], row["gpus"], row["ended_at"]) for row in mine] == [
        ("job-1", "4.000", None)
    ]


def more_history(pool: Pool, workloads: int) -> None:
    """``workloads`` more workloads over the period's day, rolled up."""
    for index in range(workloads):
        team = "abc"[index % 3]
        start = T0 + (index % 6) * H
        use(pool, team, 1 + index % 3, start, start + H)
    do_roll_up_usage(until=T0 + 12 * H)


LISTS = [url.split("&page_size")[0] for url in REPORTS]


@pytest.mark.parametrize("url", LISTS)
def test_a_list_costs_the_same_few_queries_for_a_small_and_a_larger_history(
    period: Pool, client_as: ClientAs, django_assert_max_num_queries: Any, url: str
) -> None:
    client = client_as("lead")
    client.get(url)  # warm up what is read once per process (content types, ...)
    with django_assert_max_num_queries(6):
        assert client.get(url).status_code == 200
    more_history(period, 60)
    with django_assert_max_num_queries(6):
        answer = client.get(url)
    assert answer.status_code == 200 and answer.json()["results"]


def test_a_report_page_is_cached_until_the_next_roll_up(
    period: Pool, client_as: ClientAs, django_assert_max_num_queries: Any
) -> None:
    client = client_as("finance")
    url = f"/api/v1/reports/usage/?{MARCH}&by=tenant"
    first = client.get(url).json()
    with django_assert_max_num_queries(3):  # the caller's roles and the roll-ups' version
        assert client.get(url).json() == first
    use(period, "c", 8, T0 + 5 * H, T0 + 6 * H)
    do_roll_up_usage(until=T0 + 6 * H)
    again = {row["tenant"]: row["gpu_hours"] for row in client.get(url).json()["results"]}
    assert again["c"] == "16.0000"


def test_a_name_with_a_nul_character_is_a_400_not_a_database_error(
    pool: Pool, client_as: ClientAs
) -> None:
    answer = client_as("finance").get("/api/v1/reports/usage/?tenant=a%00b")
    assert answer.status_code == 400
    assert "tenant" in answer.json()["error"]["fields"]


@pytest.mark.parametrize("url", REPORTS)
def test_each_report_opens_in_the_browsable_api(
    period: Pool, client_as: ClientAs, url: str
) -> None:
    """The API's HTML view of a report was a 500: it asked the report for a queryset."""
    response = client_as("finance").get(url, HTTP_ACCEPT="text/html")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/html")
    assert b"&quot;results&quot;" in response.content  # the page of rows, as JSON text


def test_a_span_that_ends_before_it_starts_says_which_way_round_it_must_be(
    pool: Pool, client_as: ClientAs
) -> None:
    answer = client_as("finance").get(
        "/api/v1/reports/attribution/?start=2026-12-31&end=2026-12-01"
    )
    assert answer.status_code == 400
    (message,) = answer.json()["error"]["fields"]["end"]
    assert message == "must not be before start (2026-12-01 is before 2026-12-31)"
