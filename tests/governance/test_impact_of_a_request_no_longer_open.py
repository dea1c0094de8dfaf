"""The impact API of a request no longer open says what became of its change, as its approval
page does, not what approving it again would do. An applied budget request's impact said
"granted now 130, after 160" (30 GPU-hours on a grant of 100): its hours counted twice."""

from __future__ import annotations

from typing import Any

import pytest
from test_request_impact import URL, impact_of
from two_teams import budget_request, quota_request

pytestmark = pytest.mark.django_db


def test_an_applied_budget_request_has_no_after(pool: Any, api_as: Any) -> None:
    request = budget_request(pool, "30", granted="100", submit=True)
    before = impact_of(api_as, request.pk)
    assert before["closed_as"] is None and before["after"] == {"gpu_hours": "130"}
    answer = api_as("ada").post(f"{URL}{request.pk}/approve/", {"decision_note": "ok"})
    assert answer.status_code == 200, answer.json()
    impact = impact_of(api_as, request.pk)
    assert impact["closed_as"] == "applied"
    assert impact["current"]["gpu_hours"] == "130"
    assert impact["after"] is None
    assert impact["fits"] is None and impact["problems"] == []


def test_a_rejected_quota_request_shows_the_quota_as_it_is(pool: Any, api_as: Any) -> None:
    request = quota_request(pool, submit=True)
    answer = api_as("ada").post(f"{URL}{request.pk}/reject/", {"decision_note": "not now"})
    assert answer.status_code == 200, answer.json()
    impact = impact_of(api_as, request.pk)
    assert impact["closed_as"] == "rejected"
    assert impact["after"] is None and impact["deserved_shares"] == []
    assert "pool_guarantees_after" not in impact["pool"]
    assert "its change was never made" in impact["deserved_shares_error"]
