"""The approval page of a request no longer open says what became of its change, not what
approving it would do. An applied budget request's page said "fits: approving it breaks no
budget rule" and "granted after" its hours added again to a grant that already held them
(100 granted, 30 asked and applied: "granted now 130, granted after 160"), and its decision
read "applied by ada" though ada approved it. A rejected request's change was never made, so
it has no "after" either."""

from __future__ import annotations

from typing import Any

from dashboard_pages import text
from two_teams import budget_request, quota_request


def section(page: str, heading_id: str) -> str:
    """The page's section under the heading ``heading_id``."""
    return page.split(f'id="{heading_id}"', 1)[1].split("</section>", 1)[0]


def decided(page: str) -> str:
    return page.split("data-decided>", 1)[1].split("</dd>", 1)[0]


def test_an_applied_budget_request_says_its_hours_are_in_the_grant(pool: Any, page_as: Any) -> None:
    request = budget_request(pool, "30", granted="100", submit=True)
    client = page_as("ada")
    before = section(text(client.get(f"/approvals/{request.pk}/")), "fit-title")
    assert "Does it fit?" in before and "granted after" in before and "130 GPU-h" in before
    client.post(f"/approvals/{request.pk}/", {"decision": "approve", "decision_note": "ok"})
    page = text(client.get(f"/approvals/{request.pk}/"))
    fit = section(page, "fit-title")
    assert "What became of it" in fit and "Does it fit?" not in fit
    assert "Its change was made" in fit and "its 30 GPU-h are in the grant below" in fit
    assert "granted after" not in fit and "160" not in fit
    assert "Approving it" not in fit
    assert "granted now (this request's included)" in fit and "130 GPU-h" in fit
    said = decided(page)
    assert said.startswith("Approved by ada") and "; applied" in said
    assert "does not fit" not in page


def test_a_rejected_quota_request_shows_the_quota_as_it_is(pool: Any, page_as: Any) -> None:
    request = quota_request(pool, submit=True)
    client = page_as("ada")
    client.post(f"/approvals/{request.pk}/", {"decision": "reject", "decision_note": "not now"})
    page = text(client.get(f"/approvals/{request.pk}/"))
    fit = section(page, "fit-title")
    assert "Its change was never made: the quota below is as it is now." in fit
    assert ">After<" not in fit and "go from" not in fit
    assert "its change was never made" in section(page, "shares-title")
    assert decided(page).startswith("Rejected by ada")
