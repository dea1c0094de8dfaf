"""The edit page of a request that is no longer a draft says so, with its state, to its own
requester (not "is not your draft: only its requester changes one", which is about someone
else's draft).

The pool (``conftest``): h100, nlp at 4 / 8 / 16; ``lena`` leads nlp, ``ada`` is an admin.
"""

from __future__ import annotations

from typing import Any

import pytest
from dashboard_pages import text
from two_teams import quota_request

from gpupool.quotas.actions import (
    do_approve_and_apply_quota_request,
    do_withdraw_quota_request,
)
from gpupool.quotas.models import QuotaRequest

pytestmark = pytest.mark.django_db


def submitted(pool: Any) -> QuotaRequest:
    """nlp's h100 quota request at 6 / 10 / 16, filed by lena."""
    return quota_request(pool, submit=True)


def edit_page(page_as: Any, request: QuotaRequest) -> str:
    response = page_as("lena").get(f"/requests/{request.pk}/edit/", follow=True)
    assert response.redirect_chain[-1][0] == f"/requests/{request.pk}/"
    return text(response)


@pytest.mark.parametrize("state", ["applied", "withdrawn"])
def test_the_requester_is_told_the_request_is_no_longer_a_draft(
    pool: Any, page_as: Any, state: str
) -> None:
    request = submitted(pool)
    if state == "applied":
        do_approve_and_apply_quota_request(request, acting_user=pool.users["ada"])
    else:
        do_withdraw_quota_request(request, acting_user=pool.users["lena"])
    request.refresh_from_db()
    assert request.state == state
    page = edit_page(page_as, request)
    assert f"Request #{request.pk} is {state}, not a draft, so it can no longer be changed." in page
    assert "not your draft" not in page


def test_a_submitted_request_s_edit_page_says_how_to_change_it(pool: Any, page_as: Any) -> None:
    request = submitted(pool)
    page = edit_page(page_as, request)
    assert f"Request #{request.pk} is submitted, not a draft" in page
    assert "withdraw it with Withdraw (it is kept, withdrawn) and file a new request" in page
    assert "not your draft" not in page
