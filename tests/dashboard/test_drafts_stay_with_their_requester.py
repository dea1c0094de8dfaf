"""A draft is its requester's own until they submit it, as its page says: the Requests and
Approvals pages neither list nor open another person's draft (an admin's included), the
scope the API's ``quotas.queries.visible_quota_requests`` gives them."""

from __future__ import annotations

from typing import Any

from dashboard_pages import text
from two_teams import quota_request

from gpupool.quotas.actions import do_submit_quota_request
from gpupool.quotas.models import QuotaRequest


def draft_of(pool: Any, by: str) -> QuotaRequest:
    """A draft of nlp for h100 (guarantee 4, deserved 9, capability 16)."""
    return quota_request(pool, by=by, justification="plans not yet shared", guarantee=4, deserved=9)


def test_an_admin_neither_lists_nor_opens_a_leads_draft(pool: Any, page_as: Any) -> None:
    draft = draft_of(pool, "lena")
    admin = page_as("ada")
    assert f"/requests/{draft.pk}/" not in text(admin.get("/requests/"))
    assert f"/approvals/{draft.pk}/" not in text(admin.get("/approvals/"))
    assert admin.get(f"/requests/{draft.pk}/").status_code == 404
    assert admin.get(f"/approvals/{draft.pk}/").status_code == 404
    assert admin.get(f"/approvals/{draft.pk}/what-if/").status_code == 404


def test_its_requester_sees_it_and_the_page_says_who_else_will(pool: Any, page_as: Any) -> None:
    draft = draft_of(pool, "lena")
    lead = page_as("lena")
    assert f"/requests/{draft.pk}/" in text(lead.get("/requests/"))
    page = text(lead.get(f"/requests/{draft.pk}/"))
    assert "only you see it until you submit it" in page and "Submit for approval" in page
    assert "The audit log, which admins read, records that it was made" in page


def test_once_submitted_the_admin_opens_it(pool: Any, page_as: Any) -> None:
    draft = draft_of(pool, "lena")
    do_submit_quota_request(draft, acting_user=pool.users["lena"])
    admin = page_as("ada")
    assert f"/approvals/{draft.pk}/" in text(admin.get("/approvals/"))
    assert admin.get(f"/approvals/{draft.pk}/").status_code == 200


def test_an_admins_own_draft_is_listed_to_them_and_hidden_from_the_lead(
    pool: Any, page_as: Any
) -> None:
    draft = draft_of(pool, "ada")
    assert f"/requests/{draft.pk}/" in text(page_as("ada").get("/requests/"))
    assert page_as("ada").get(f"/approvals/{draft.pk}/").status_code == 200
    assert page_as("lena").get(f"/requests/{draft.pk}/").status_code == 404
