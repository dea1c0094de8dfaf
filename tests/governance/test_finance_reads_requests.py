"""Finance reads the quota and budget requests of every tenant -- through the API and on the
Requests page -- and never decides one (DESIGN section 2: it reads budgets and costs, and the
requests that change them). A draft stays its requester's own, hidden from finance too."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.test import Client
from domain_builders import this_month
from rest_framework.test import APIClient

from gpupool.quotas.models import QuotaRequest

pytestmark = pytest.mark.django_db


@pytest.fixture
def filed(pool: Any, file_request: Callable[..., dict[str, Any]]) -> dict[str, int]:
    """nlp's submitted quota request, vision's submitted budget request, and lena's draft."""
    start, end = this_month()
    budget = {
        "kind": "budget",
        "tenant": "vision",
        "priority_class": "high",
        "period_start": start.isoformat(),
        "period_end": end.isoformat(),
        "payload": {"gpu_hours": "40"},
        "justification": "the demo week",
        "submit": True,
    }
    quota = file_request("lena", submit=True)
    unset = {"queue": None, "flavor": None}
    draft = file_request("lena", **unset | budget | {"tenant": "nlp", "submit": False})
    vision = file_request("vera", **unset | budget)
    return {"quota": quota["id"], "budget": vision["id"], "draft": draft["id"]}


def test_finance_lists_every_tenant_s_quota_and_budget_requests_but_no_draft(
    api_as: Callable[[str], APIClient], filed: dict[str, int]
) -> None:
    response = api_as("fin").get("/api/v1/quota-requests/")
    assert response.status_code == 200, response.json()
    rows = {row["id"]: row for row in response.json()["results"]}
    assert set(rows) == {filed["quota"], filed["budget"]}
    assert (rows[filed["quota"]]["kind"], rows[filed["quota"]]["tenant"]) == ("queue-quota", "nlp")
    assert (rows[filed["budget"]]["kind"], rows[filed["budget"]]["tenant"]) == ("budget", "vision")
    budgets = api_as("fin").get("/api/v1/quota-requests/", {"kind": "budget"}).json()
    assert [row["id"] for row in budgets["results"]] == [filed["budget"]]


def test_finance_reads_a_request_s_detail_and_not_a_draft(
    api_as: Callable[[str], APIClient], filed: dict[str, int]
) -> None:
    detail = api_as("fin").get(f"/api/v1/quota-requests/{filed['budget']}/")
    assert detail.status_code == 200
    assert detail.json()["state"] == "submitted" and "approvable" in detail.json()
    assert api_as("fin").get(f"/api/v1/quota-requests/{filed['draft']}/").status_code == 404


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("post", "approve/", {"decision_note": "fine"}),
        ("post", "reject/", {"decision_note": "no"}),
        ("post", "apply/", {}),
        ("get", "impact/", None),
        ("post", "what-if/", {"days": 1}),
        ("post", "withdraw/", {}),
        ("patch", "", {"justification": "finance edits"}),
    ],
)
def test_finance_never_decides_or_changes_a_request(
    api_as: Callable[[str], APIClient], filed: dict[str, int], method: str, path: str, body: Any
) -> None:
    url = f"/api/v1/quota-requests/{filed['quota']}/{path}"
    response = getattr(api_as("fin"), method)(url, body, format="json")
    assert response.status_code == 403, response.json()
    assert QuotaRequest.objects.get(pk=filed["quota"]).state == "submitted"


def test_finance_files_no_request(
    api_as: Callable[[str], APIClient], filed: dict[str, int]
) -> None:
    ask = {
        "kind": "queue-quota",
        "queue": "vision",
        "flavor": "h100",
        "payload": {"guarantee": 4, "deserved": 9, "capability": 16},
        "justification": "finance asks",
    }
    assert api_as("fin").post("/api/v1/quota-requests/", ask, format="json").status_code == 403


def test_finance_opens_the_requests_page_with_every_team_s_requests(
    pool: Any, filed: dict[str, int]
) -> None:
    page = Client()
    page.force_login(pool.users["fin"])
    listing = page.get("/requests/")
    assert listing.status_code == 200
    text = listing.content.decode()
    assert "Every team's requests" in text
    assert f'href="/requests/{filed["quota"]}/"' in text
    assert f'href="/requests/{filed["budget"]}/"' in text
    assert f'href="/requests/{filed["draft"]}/"' not in text
    assert "data-request-form" not in text  # nothing to file: finance leads no team
    detail = page.get(f"/requests/{filed['budget']}/")
    assert detail.status_code == 200 and "the demo week" in detail.content.decode()
    assert "you will get a mail" not in detail.content.decode()
    assert page.get(f"/requests/{filed['draft']}/").status_code == 404
    assert page.get(f"/approvals/{filed['quota']}/").status_code == 403
