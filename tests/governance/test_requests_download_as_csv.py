"""The quota and budget requests download as CSV (``GET /api/v1/quota-requests/?format=csv``),
as the other lists of the API do (``api.tables.CSVExport``): every request the filters and the
caller's scope keep -- a lead their teams' and their own drafts, an admin every team's but
another's draft -- under the list's fields, its payload an amount a column, and a budget
request's period with its last day, included, beside its end."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from csv_exports import as_csv_text, downloaded, json_pages
from django.db import connection
from django.test.utils import CaptureQueriesContext
from domain_builders import this_month
from test_list_query_counts import file_many

pytestmark = pytest.mark.django_db

URL = "/api/v1/quota-requests/"
COLUMNS = [
    "id",
    "kind",
    "state",
    "tenant",
    "queue",
    "flavor",
    "priority_class",
    "period_start",
    "period_end",
    "period_last_day",
    "guarantee",
    "deserved",
    "capability",
    "gpu_hours",
    "justification",
    "summary",
    "requested_by",
    "created_at",
    "submitted_at",
    "decided_by",
    "decided_at",
    "decision_note",
    "applied_at",
    "withdrawn_at",
]
AMOUNTS = ("guarantee", "deserved", "capability", "gpu_hours")


@pytest.fixture
def filed(api_as: Any, file_request: Any) -> dict[str, int]:
    """nlp's submitted quota request (lena), lena's budget draft for nlp, vision's budget
    request (vera) that ada rejected with a comment, and vera's draft."""
    start, end = this_month()
    budget = {
        "kind": "budget",
        "queue": None,
        "flavor": None,
        "priority_class": "high",
        "period_start": start.isoformat(),
        "period_end": end.isoformat(),
        "payload": {"gpu_hours": "40"},
        "justification": "the demo week",
    }
    quota = file_request("lena", submit=True)
    draft = file_request("lena", **budget | {"tenant": "nlp"})
    vision = file_request("vera", **budget | {"tenant": "vision", "submit": True})
    rejected = api_as("ada").post(
        f"{URL}{vision['id']}/reject/", {"decision_note": "not this month"}, format="json"
    )
    assert rejected.status_code == 200, rejected.json()
    other_draft = file_request("vera", **budget | {"tenant": "vision", "justification": "later"})
    return {
        "quota": quota["id"],
        "draft": draft["id"],
        "vision": vision["id"],
        "other_draft": other_draft["id"],
    }


def as_rows(json_rows: list[dict[str, Any]]) -> list[dict[str, str]]:
    """The JSON list's rows as the CSV writes them: the payload's amounts a column each."""
    flat = []
    for row in json_rows:
        amounts = {key: row["payload"].get(key) for key in AMOUNTS}
        flat.append({key: row[key] for key in COLUMNS if key not in AMOUNTS} | amounts)
    return as_csv_text(flat)


@pytest.mark.parametrize(
    ("who", "seen"),
    [("lena", ["quota", "draft"]), ("ada", ["quota", "vision"]), ("fin", ["quota", "vision"])],
    ids=["a lead: her teams' and her draft", "an admin: every team's", "finance: every team's"],
)
def test_requests_download_as_csv_as_the_caller_reads_them(
    api_as: Any, filed: dict[str, int], who: str, seen: list[str]
) -> None:
    client = api_as(who)
    rows = downloaded(client, f"{URL}?ordering=id", "quota-requests")
    assert [int(row["id"]) for row in rows] == [filed[name] for name in seen]
    assert list(rows[0]) == COLUMNS
    assert rows == as_rows(json_pages(client, f"{URL}?ordering=id&page_size=1"))


def test_a_csv_row_says_what_is_asked_and_who_decided_it(
    api_as: Any, filed: dict[str, int]
) -> None:
    rows = {int(row["id"]): row for row in downloaded(api_as("ada"), URL)}
    quota, budget = rows[filed["quota"]], rows[filed["vision"]]
    assert (quota["kind"], quota["tenant"], quota["queue"], quota["flavor"]) == (
        "queue-quota",
        "nlp",
        "nlp",
        "h100",
    )
    assert [quota[key] for key in AMOUNTS] == ["8", "12", "24", ""]
    assert (quota["requested_by"], quota["decided_by"], quota["period_last_day"]) == (
        "lena",
        "",
        "",
    )
    start, end = this_month()
    assert [budget[key] for key in AMOUNTS] == ["", "", "", "40"]
    assert (budget["period_start"], budget["period_end"], budget["period_last_day"]) == (
        start.isoformat(),
        end.isoformat(),
        (end - timedelta(days=1)).isoformat(),
    )
    assert f"{start:%Y-%m-%d} to {end - timedelta(days=1):%Y-%m-%d} (included)" in budget["summary"]
    assert (budget["state"], budget["decided_by"], budget["decision_note"]) == (
        "rejected",
        "ada",
        "not this month",
    )
    assert budget["decided_at"] and budget["submitted_at"] and budget["requested_by"] == "vera"


def test_the_csv_keeps_the_lists_filters(api_as: Any, filed: dict[str, int]) -> None:
    admin = api_as("ada")
    rejected = downloaded(admin, f"{URL}?state=rejected")
    assert [int(row["id"]) for row in rejected] == [filed["vision"]]
    nlp_budgets = downloaded(api_as("lena"), f"{URL}?kind=budget&tenant=nlp")
    assert [int(row["id"]) for row in nlp_budgets] == [filed["draft"]]
    assert downloaded(admin, f"{URL}?tenant=vision&state=submitted") == []
    refused = admin.get(f"{URL}?format=csv&tenant=nosuch")
    assert refused.status_code == 400
    assert "tenant: No tenant named nosuch." in refused.content.decode()


@pytest.mark.parametrize("who", ["ada", "lena"], ids=["admin", "lead"])
def test_the_csv_takes_as_many_queries_for_many_requests_as_for_a_few(
    pool: Any, api_as: Any, filed: dict[str, int], who: str
) -> None:
    client = api_as(who)

    def queries_of_the_download() -> int:
        with CaptureQueriesContext(connection) as captured:
            assert downloaded(client, URL)
        return len(captured)

    few = queries_of_the_download()
    file_many(pool, 12)
    assert queries_of_the_download() == few
