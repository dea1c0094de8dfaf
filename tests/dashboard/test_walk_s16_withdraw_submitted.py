"""Walk-through s16: a lead who filed a request by mistake withdraws it from its page before
an admin decides. The page offers Withdraw behind a confirmation to its requester only; the
request stays listed as withdrawn (on the lead's requests page and the admins' approvals
page), and the approval page offers no decision on it, saying why.

The pool (``conftest``): nlp and vision at 4 / 8 / 16 of 15 healthy h100 GPUs; ``lena``
leads nlp, ``max`` is a member of nlp, ``ada`` is an admin.
"""

from __future__ import annotations

from html import unescape
from typing import Any

from dashboard_pages import text
from two_teams import quota_request

from gpupool.audit.models import AuditEvent
from gpupool.quotas.models import QuotaRequest


def submitted(pool: Any) -> QuotaRequest:
    """lena's submitted request for nlp's h100 levels 6 / 10 / 16."""
    return quota_request(pool, justification="filed by mistake", submit=True)


def test_the_requester_is_offered_withdraw_with_a_confirmation_on_a_submitted_request(
    pool: Any, page_as: Any
) -> None:
    request = submitted(pool)
    page = text(page_as("lena").get(f"/requests/{request.pk}/"))
    confirm = page.split('<details class="withdraw" id="withdraw-confirm">', 1)[1]
    confirm = confirm.split("</details>", 1)[0]
    assert "<summary>Withdraw this request…</summary>" in confirm
    assert 'name="withdraw"' in confirm and f"Yes, withdraw request #{request.pk}" in confirm
    admin = text(page_as("ada").get(f"/requests/{request.pk}/"))
    assert 'name="withdraw"' not in admin  # an admin sees it, but it is not theirs


def test_withdrawing_keeps_the_request_listed_as_withdrawn_and_audits_it(
    pool: Any, page_as: Any
) -> None:
    request = submitted(pool)
    response = page_as("lena").post(f"/requests/{request.pk}/", {"withdraw": "1"}, follow=True)
    assert response.redirect_chain[-1][0] == f"/requests/{request.pk}/"
    page = unescape(text(response))
    assert f"Request #{request.pk} is withdrawn" in page
    assert ">withdrawn</span>" in page  # its state badge
    assert "lena withdrew it" in page and "data-withdrawn" in page
    assert "<strong>withdrawn</strong>" in page  # a step of its own
    assert 'name="withdraw"' not in page
    assert QuotaRequest.objects.get(pk=request.pk).state == "withdrawn"
    assert AuditEvent.objects.filter(action="quotas.withdraw_quota_request").count() == 1
    listed = text(page_as("lena").get("/requests/"))
    assert f'href="/requests/{request.pk}/"' in listed and ">withdrawn</span>" in listed


def test_the_admins_see_it_withdrawn_and_are_offered_no_decision(pool: Any, page_as: Any) -> None:
    request = submitted(pool)
    page_as("lena").post(f"/requests/{request.pk}/", {"withdraw": "1"})
    approvals = text(page_as("ada").get("/approvals/"))
    waiting = approvals.split('id="pending-title"', 1)[1].split('id="decided-title"', 1)[0]
    assert f"#{request.pk}<" not in waiting
    assert "withdrawn by its requester" in approvals.split('id="decided-title"', 1)[1]
    detail = unescape(text(page_as("ada").get(f"/approvals/{request.pk}/")))
    assert "lena withdrew this request before a decision; there is nothing to decide." in detail
    refused = page_as("ada").post(
        f"/approvals/{request.pk}/", {"decision": "approve", "decision_note": ""}
    )
    assert refused.status_code == 400
    # said once, by the page's reason (the action's refusal said it again in other words)
    assert (
        "Not decided: lena withdrew this request before a decision; there is nothing to decide."
        in unescape(text(refused))
    )
    assert QuotaRequest.objects.get(pk=request.pk).state == "withdrawn"


def test_nobody_but_its_requester_withdraws_it_from_the_page(pool: Any, page_as: Any) -> None:
    request = submitted(pool)
    response = page_as("ada").post(f"/requests/{request.pk}/", {"withdraw": "1"}, follow=True)
    assert "was not withdrawn: only the requester withdraws a request" in unescape(text(response))
    assert QuotaRequest.objects.get(pk=request.pk).state == "submitted"
