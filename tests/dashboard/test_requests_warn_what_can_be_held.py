"""A request whose guarantee the tree cannot hold, on the pages: after submitting it (filing
it on the Requests page, or submitting a draft on its page) the lead is warned in the words
the API answers (its ``approval_refusal``, which names the guarantee the queue can hold); and
the approval page shows no deserved shares for it, saying plainly that it cannot be approved
as it stands.

The pool (``conftest``): 15 healthy h100 GPUs; nlp and vision at 4 / 8 / 16; ``lena`` leads
nlp, ``ada`` is an admin. nlp can hold a guarantee of at most 15 - 4 = 11.
"""

from __future__ import annotations

from html import unescape
from typing import Any

import pytest
from dashboard_pages import text
from rest_framework.test import APIClient
from two_teams import quota_request

from gpupool.quotas.models import QuotaRequest

pytestmark = pytest.mark.django_db

HELD = "nlp can hold a guarantee of at most 11 h100 GPUs"
WARNING = "As things stand an admin could not approve this: "


def api_refusal(pool: Any, request: QuotaRequest) -> str:
    """The API's ``approval_refusal`` of the request, read by its requester."""
    client = APIClient()
    client.force_authenticate(pool.users["lena"])
    refusal: str = client.get(f"/api/v1/quota-requests/{request.pk}/").json()["approval_refusal"]
    return refusal


def warnings(response: Any) -> list[str]:
    return [str(message) for message in response.context["messages"] if "warning" in message.tags]


def too_much(pool: Any, *, submit: bool) -> QuotaRequest:
    return quota_request(
        pool, justification="a bigger model", submit=submit, guarantee=14, deserved=14
    )


def test_filing_on_the_requests_page_warns_as_the_api_answers(pool: Any, page_as: Any) -> None:
    form = {
        "kind": "queue-quota",
        "queue": pool.nlp_queue.pk,
        "flavor": pool.h100.pk,
        "guarantee": "14",
        "deserved": "14",
        "capability": "16",
        "justification": "a bigger model",
    }
    response = page_as("lena").post("/requests/", form, follow=True)
    request = QuotaRequest.objects.get()
    assert request.state == "submitted"
    refusal = api_refusal(pool, request)
    assert HELD in refusal
    assert warnings(response) == [WARNING + refusal]


def test_submitting_a_draft_on_its_page_warns_as_the_api_answers(pool: Any, page_as: Any) -> None:
    draft = too_much(pool, submit=False)
    response = page_as("lena").post(f"/requests/{draft.pk}/", {}, follow=True)
    draft.refresh_from_db()
    assert draft.state == "submitted"
    assert warnings(response) == [WARNING + api_refusal(pool, draft)]


def test_the_approval_page_shows_no_share_of_a_request_it_cannot_approve(
    pool: Any, page_as: Any
) -> None:
    request = too_much(pool, submit=True)
    page = unescape(text(page_as("ada").get(f"/approvals/{request.pk}/")))
    assert "This request cannot be approved as it stands" in page
    assert HELD in page
    assert "Not shown: this request cannot be approved as it stands" in page
    assert "Deserved shares when every team wants more than it can get" not in page
