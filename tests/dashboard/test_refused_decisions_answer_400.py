"""A decision the approval page refuses (bad input, or a request no longer submitted: a second
press of the button, a form left open while another admin decided) is the approval page again,
answered 400 as the dashboard's other refused forms are, with the comment typed kept where the
form is still offered and the refusal said; it answered 200, as if it had gone through."""

from __future__ import annotations

from typing import Any

from dashboard_pages import text
from test_requests_and_approvals import filed

from gpupool.quotas.models import QuotaRequest


def test_a_rejection_without_a_comment_is_refused_with_400_on_the_approval_page(
    pool: Any, page_as: Any
) -> None:
    request = filed(pool)
    response = page_as("ada").post(f"/approvals/{request.pk}/", {"decision": "reject"})
    assert response.status_code == 400
    page = text(response)
    assert 'id="decide-title"' in page
    assert "say why the request is rejected" in page
    assert QuotaRequest.objects.get(pk=request.pk).state == "submitted"


def test_a_comment_too_long_is_refused_with_400_and_kept(pool: Any, page_as: Any) -> None:
    request = filed(pool)
    typed = "z" * 10_001
    response = page_as("ada").post(
        f"/approvals/{request.pk}/", {"decision": "approve", "decision_note": typed}
    )
    assert response.status_code == 400
    page = text(response)
    assert "at most 10,000 characters, not 10,001" in page
    assert typed in page  # the comment typed, back in its field
    assert QuotaRequest.objects.get(pk=request.pk).state == "submitted"


def test_a_decision_posted_without_its_button_says_which_to_press(pool: Any, page_as: Any) -> None:
    request = filed(pool)
    response = page_as("ada").post(
        f"/approvals/{request.pk}/", {"decision": "maybe", "decision_note": "kept"}
    )
    assert response.status_code == 400
    page = text(response)
    assert "Not decided: press Approve and apply or Reject." in page
    assert "kept</textarea>" in page  # the comment typed, back in its field
    assert QuotaRequest.objects.get(pk=request.pk).state == "submitted"


def test_a_second_press_of_approve_is_refused_with_400_saying_the_request_is_decided(
    pool: Any, page_as: Any
) -> None:
    request = filed(pool)
    client = page_as("ada")
    decision = {"decision": "approve", "decision_note": "fits"}
    first = client.post(f"/approvals/{request.pk}/", decision)
    assert first.status_code == 302
    again = client.post(f"/approvals/{request.pk}/", decision)
    assert again.status_code == 400
    page = text(again)
    # said once, by the page's reason (the action's own refusal said it again)
    assert page.count("Not decided:") == 1
    assert "Not decided: This request is applied; only submitted requests are decided." in page
    assert "can no longer be approved or rejected" not in page
    request.refresh_from_db()
    assert (request.state, request.decision_note) == ("applied", "fits")


def test_an_admin_deciding_their_own_request_is_refused_with_400(pool: Any, page_as: Any) -> None:
    request = filed(pool, by="ada")
    response = page_as("ada").post(
        f"/approvals/{request.pk}/", {"decision": "approve", "decision_note": ""}
    )
    assert response.status_code == 400
    page = text(response)
    assert page.count("Not decided:") == 1
    assert "Not decided: You filed this request, so another admin decides it." in page
