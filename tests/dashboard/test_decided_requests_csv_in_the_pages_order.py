"""The Approvals page lists the requests decided or withdrawn with the latest step first (a
withdrawn request has no decision: its step is the withdrawal), and its "as CSV" link holds
them in that same order (the requests API's ``?ordering=-last_step_at``), not newest filed
first. The API sorts any list of requests by that latest step."""

from __future__ import annotations

import csv
import io
import re
from typing import Any

from dashboard_pages import text
from two_teams import budget_request, quota_request

from gpupool.quotas.actions import (
    do_approve_and_apply_quota_request,
    do_reject_quota_request,
    do_withdraw_quota_request,
)


def decided_on_the_page(page: str) -> list[int]:
    """The ids the "Decided or withdrawn lately" table lists, in its order."""
    section = page[page.index('id="decided-title"') :]
    return [int(pk) for pk in re.findall(r'<td><a href="/approvals/(\d+)/">#', section)]


def decided_csv(client: Any, page: str) -> list[int]:
    found = re.search(r'<a id="csv-decided" href="([^"]+)" download>', page)
    assert found is not None
    answer = client.get(found.group(1).replace("&amp;", "&"))
    assert answer.status_code == 200, answer.content
    body = b"".join(answer.streaming_content).decode()
    return [int(row["id"]) for row in csv.DictReader(io.StringIO(body))]


def test_the_decided_csv_is_in_the_pages_order_latest_step_first(pool: Any, page_as: Any) -> None:
    # Filed oldest first: first, withdrawn, rejected; decided the other way round.
    first = quota_request(pool, by="lena", submit=True)
    withdrawn = budget_request(pool, "5", by="lena", submit=True)
    rejected = quota_request(pool, by="vera", team="vision", submit=True)
    do_reject_quota_request(rejected, acting_user=pool.users["ada"], note="not now")
    do_withdraw_quota_request(withdrawn, acting_user=pool.users["lena"])
    do_approve_and_apply_quota_request(first, acting_user=pool.users["ada"], note="fits")
    client = page_as("ada")
    page = text(client.get("/approvals/"))
    latest_step_first = [first.pk, withdrawn.pk, rejected.pk]
    assert decided_on_the_page(page) == latest_step_first
    assert decided_csv(client, page) == latest_step_first
    assert "latest step first" in page


def test_the_api_sorts_requests_by_their_latest_step(pool: Any, page_as: Any) -> None:
    older = quota_request(pool, by="lena", submit=True)
    newer = quota_request(pool, by="vera", team="vision", submit=True)
    do_reject_quota_request(older, acting_user=pool.users["ada"], note="not now")
    answer = page_as("ada").get("/api/v1/quota-requests/", {"ordering": "-last_step_at"})
    assert answer.status_code == 200, answer.json()
    assert [row["id"] for row in answer.json()["results"]] == [older.pk, newer.pk]
    answer = page_as("ada").get("/api/v1/quota-requests/", {"ordering": "last_step_at"})
    assert [row["id"] for row in answer.json()["results"]] == [newer.pk, older.pk]
