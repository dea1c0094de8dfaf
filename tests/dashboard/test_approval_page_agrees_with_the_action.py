"""The approval page offers Approve only when the approval action would take it: the page
and ``do_approve_and_apply_quota_request`` both ask ``quotas.actions.decision_refusal``. It
shows one verdict, with its reason, and never "does not fit" beside "stays inside its
parent's guarantee" (the demo's request #2: a child's guarantee past its parent's, while the
guarantees at the top of the tree stay as they are)."""

from __future__ import annotations

from typing import Any

import pytest
from dashboard_pages import text
from django.core.exceptions import PermissionDenied, ValidationError
from domain_builders import quota, this_month, user
from two_teams import budget_request, quota_request

from gpupool.quotas.actions import (
    decision_refusal,
    do_approve_and_apply_quota_request,
)
from gpupool.quotas.models import PriorityBudget, QueueQuota

ENABLED_APPROVE = '<button type="submit" name="decision" value="approve">'
DISABLED_APPROVE = '<button type="submit" name="decision" value="approve" disabled'


@pytest.fixture
def parent_holds_quota(pool: Any) -> Any:
    """Root queue ``pool`` guarantees 8 h100 GPUs, which nlp's 4 and vision's 4 fill."""
    quota(pool.root, pool.h100, 8, 16, 16)
    return pool


def test_a_request_past_its_parents_guarantee_gets_one_verdict_and_no_approve_button(
    parent_holds_quota: Any, page_as: Any
) -> None:
    # given nlp asks for a guarantee of 6 inside a parent that guarantees 8 (vision holds 4)
    pool = parent_holds_quota
    request = quota_request(pool, by="lena", submit=True, guarantee=6)
    client = page_as("ada")
    # when the admin opens it
    page = text(client.get(f"/approvals/{request.pk}/"))
    # then it does not fit, saying why, and nothing on the page says otherwise
    assert "does not fit" in page
    assert "the guarantees inside pool would total 10 h100 GPUs" in page
    assert "stays inside its parent's guarantee" not in page
    assert "<strong>8 GPUs</strong>" in page  # the top-level guarantees do stay at 8
    # and Approve is shown disabled, with the action's own reason beside it
    assert ENABLED_APPROVE not in page and DISABLED_APPROVE in page
    reason = page.split('id="approve-refused"', 1)[1].split("</p>", 1)[0]
    assert "the change would not fit" in reason and "inside pool would total 10" in reason
    # and Reject is still offered
    assert 'name="decision" value="reject"' in page
    # and approving anyway (a crafted POST) is refused, changing nothing
    answer = text(
        client.post(f"/approvals/{request.pk}/", {"decision": "approve", "decision_note": "ok"})
    )
    assert "Not decided: the change would not fit" in answer  # the sentence, as the API's
    request.refresh_from_db()
    assert request.state == "submitted"
    assert QueueQuota.objects.get(queue=pool.nlp_queue, flavor=pool.h100).guarantee == 4


def test_an_admin_sees_why_they_do_not_decide_their_own_request(
    parent_holds_quota: Any, page_as: Any
) -> None:
    request = quota_request(parent_holds_quota, by="ada", submit=True, guarantee=4)
    page = text(page_as("ada").get(f"/approvals/{request.pk}/"))
    assert "You filed this request, so another admin decides it." in page
    assert 'name="decision"' not in page


def test_a_decided_request_offers_no_decision(parent_holds_quota: Any, page_as: Any) -> None:
    request = quota_request(parent_holds_quota, by="lena", submit=True, guarantee=4)
    do_approve_and_apply_quota_request(request, acting_user=user("alan", admin=True))
    page = text(page_as("ada").get(f"/approvals/{request.pk}/"))
    assert "This request is applied; only submitted requests are decided." in page
    assert 'name="decision"' not in page


CASES = [
    ("a quota change inside its parent is offered and taken", "quota", "lena", 4, True),
    ("a quota change past its parent's guarantee is neither", "quota", "lena", 6, False),
    ("one's own request is neither offered nor taken", "quota", "ada", 4, False),
    ("a budget addition to its period is offered and taken", "budget", "lena", 0, True),
    # Filing refuses a wrong period end now; the budget's end moving after submission is what
    # approval still finds.
    ("a budget addition whose budget's end moved since is neither", "budget", "lena", 1, False),
]


@pytest.mark.parametrize(
    ("kind", "by", "amount", "approvable"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_the_page_offers_approve_exactly_when_the_action_takes_it(
    parent_holds_quota: Any, page_as: Any, kind: str, by: str, amount: int, approvable: bool
) -> None:
    pool = parent_holds_quota
    if kind == "quota":
        request = quota_request(pool, by=by, submit=True, guarantee=amount)
    else:
        request = budget_request(pool, "10", by=by, granted=20, submit=True)
        if amount:  # the budget now ends a month later than the request says
            PriorityBudget.objects.filter(tenant=pool.nlp, priority_class=pool.high).update(
                period_end=this_month(months=1)[1]
            )
    admin = pool.users["ada"]
    refusal = decision_refusal(request, acting_user=admin, approve=True)
    offered = ENABLED_APPROVE in text(page_as("ada").get(f"/approvals/{request.pk}/"))
    try:
        do_approve_and_apply_quota_request(request, acting_user=admin, note="ok")
    except (ValidationError, PermissionDenied) as refused:
        # the action refuses with the very refusal the page was given
        assert refusal is not None and str(refused) == str(refusal)
        taken = False
    else:
        taken = True
    assert offered == taken == approvable == (refusal is None)
