"""A decided queue-quota request's approval page says why no what-if is offered by what became
of its change: applied, today's quotas include it; rejected, it was never made. It said of
every decided request that today's quotas already include it, a rejected one's too."""

from __future__ import annotations

from typing import Any

from dashboard_pages import text
from test_requests_and_approvals import filed


def no_what_if(page: str) -> str:
    """The sentence that says why the page offers no what-if."""
    return page[page.index("data-no-what-if") :].split("</p>", 1)[0]


def test_a_rejected_request_says_its_change_was_never_made(pool: Any, page_as: Any) -> None:
    request = filed(pool)
    client = page_as("ada")
    client.post(f"/approvals/{request.pk}/", {"decision": "reject", "decision_note": "not now"})
    said = no_what_if(text(client.get(f"/approvals/{request.pk}/")))
    assert "it is rejected, so its change was never made" in said
    assert "already include it" not in said


def test_an_applied_request_says_todays_quotas_include_it(pool: Any, page_as: Any) -> None:
    request = filed(pool)
    client = page_as("ada")
    client.post(f"/approvals/{request.pk}/", {"decision": "approve", "decision_note": "fits"})
    said = no_what_if(text(client.get(f"/approvals/{request.pk}/")))
    assert "it is applied, so today's quotas already include it" in said
