"""The approval page promises a what-if only where one can run: a budget request is never
replayed (``do_start_what_if`` refuses its ``kind``), so its page says so plainly instead of
"No what-if yet. It replays ..." with no button (walk finding 9)."""

from __future__ import annotations

from typing import Any

from dashboard_pages import text
from two_teams import budget_request, quota_request


def what_if_section(page: str) -> str:
    """The page's what-if section."""
    return page.split('id="what-if-title"', 1)[1].split("</section>", 1)[0]


def test_a_budget_request_says_it_has_no_what_if_and_offers_none(pool: Any, page_as: Any) -> None:
    # given a submitted budget request
    request = budget_request(pool, "10", granted=20, submit=True)
    # when an admin opens it
    section = what_if_section(text(page_as("ada").get(f"/approvals/{request.pk}/")))
    # then the what-if part says budget requests have none, and promises no replay
    assert "Budget requests have no what-if" in section
    assert "No what-if yet" not in section and "It replays" not in section
    assert "Replay recent demand" not in section


def test_a_submitted_quota_request_still_offers_its_replay(pool: Any, page_as: Any) -> None:
    request = quota_request(pool, submit=True, guarantee=4)
    section = what_if_section(text(page_as("ada").get(f"/approvals/{request.pk}/")))
    assert "No what-if yet" in section and "Replay recent demand" in section
    assert "Budget requests have no what-if" not in section
