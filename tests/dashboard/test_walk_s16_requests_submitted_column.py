"""Walk-through s16: the Requests page's list says when each request was submitted (filed
with the admins: ``QuotaRequest.submitted_at``), not when its draft was started; a draft says
it is not submitted yet.

The pool (``conftest``): ``lena`` leads nlp.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from html import unescape
from typing import Any

from dashboard_pages import rows, text
from two_teams import quota_request

from gpupool.quotas.actions import do_submit_quota_request
from gpupool.quotas.models import QuotaRequest


def draft(pool: Any) -> QuotaRequest:
    """lena's draft for nlp's h100 levels, started on 1 March 2026 at 09:00 UTC."""
    request = quota_request(pool, justification="a deadline")
    QuotaRequest.objects.filter(pk=request.pk).update(
        created_at=datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
    )
    request.refresh_from_db()
    return request


def test_the_list_says_when_a_request_was_submitted_not_when_its_draft_began(
    pool: Any, page_as: Any
) -> None:
    request = do_submit_quota_request(draft(pool), acting_user=pool.users["lena"])
    assert request.submitted_at is not None
    page = text(page_as("lena").get("/requests/"))
    assert '<th scope="col">Submitted</th>' in page and '<th scope="col">Filed</th>' not in page
    row = unescape(rows(page)).split("</tr>", 1)[0]
    assert f"{request.submitted_at:%Y-%m-%d %H:%M} UTC" in row
    assert "2026-03-01 09:00" not in row


def test_a_draft_says_it_is_not_submitted_yet(pool: Any, page_as: Any) -> None:
    draft(pool)
    row = unescape(rows(text(page_as("lena").get("/requests/")))).split("</tr>", 1)[0]
    assert re.search(r"not yet \(a draft since <time [^>]*>2026-03-01 09:00 UTC</time>\)", row)
