"""The Requests page links the budgets API's CSV beside its budgets table: the budgets it
lists (the period that covers the pool's today; a lead's of the team they lead, not of a team
they are only a member of; an admin's of every team), with each period's last day."""

from __future__ import annotations

import csv
import io
import re
from datetime import date, timedelta
from decimal import Decimal
from typing import Any

from dashboard_pages import text
from django.utils import timezone

from gpupool.quotas.actions import do_grant_budget
from gpupool.tenancy.actions import do_set_membership


def grant(pool: Any, team: Any, start: date, end: date, gpu_hours: str) -> Any:
    return do_grant_budget(
        team,
        pool.high,
        period_start=start,
        period_end=end,
        gpu_hours=gpu_hours,
        acting_user=None,
    )


def csv_link(page: str) -> str | None:
    """Where the budgets' "as CSV" link points, or None when the page has none."""
    link = re.search(r'<a id="csv-budgets" href="([^"]+)" download>', page)
    return link.group(1).replace("&amp;", "&") if link else None


def download(client: Any, url: str) -> list[dict[str, str]]:
    answer = client.get(url)
    assert answer.status_code == 200, answer.content
    return list(csv.DictReader(io.StringIO(b"".join(answer.streaming_content).decode())))


def shown_budgets(page: str) -> list[str]:
    """The budgets table's rows, as ``team/class``."""
    return re.findall(r'<tr data-budget="([^"]+)">', page)


def test_a_leads_csv_holds_the_budgets_the_page_lists(pool: Any, page_as: Any) -> None:
    today = timezone.localdate()
    start, end = today - timedelta(days=3), today + timedelta(days=27)
    grant(pool, pool.nlp, start, end, "12.5")
    grant(pool, pool.nlp, start - timedelta(days=40), start, "99")  # last period: not listed
    grant(pool, pool.vision, start, end, "77")
    # lena leads nlp and is only a member of vision: the API lets her read vision's
    # budgets, the page lists nlp's (hers to ask for), and so does its link.
    do_set_membership(pool.users["lena"], pool.vision, role="member", acting_user=None)
    client = page_as("lena")
    page = text(client.get("/requests/"))
    assert shown_budgets(page) == ["nlp/high"]
    link = csv_link(page)
    assert link is not None
    got = download(client, link)
    assert [f"{row['tenant']}/{row['priority_class']}" for row in got] == shown_budgets(page)
    assert Decimal(got[0]["gpu_hours"]) == Decimal("12.5")
    assert got[0]["period_start"] == f"{start:%Y-%m-%d}"
    assert got[0]["period_last_day"] == f"{end - timedelta(days=1):%Y-%m-%d}"


def test_an_admins_csv_holds_every_teams_budgets(pool: Any, page_as: Any) -> None:
    today = timezone.localdate()
    for team in (pool.nlp, pool.vision):
        grant(pool, team, today, today + timedelta(days=30), "10")
    client = page_as("ada")
    page = text(client.get("/requests/"))
    link = csv_link(page)
    assert link is not None
    got = download(client, link)
    assert [f"{row['tenant']}/{row['priority_class']}" for row in got] == shown_budgets(page)
    assert shown_budgets(page) == ["nlp/high", "vision/high"]


def test_no_link_where_the_page_lists_no_budget(pool: Any, page_as: Any) -> None:
    today = timezone.localdate()
    grant(pool, pool.nlp, today, today + timedelta(days=30), "10")
    member = text(page_as("max").get("/requests/"))  # leads nothing: no budgets section
    assert csv_link(member) is None and not shown_budgets(member)
    empty = text(page_as("vera").get("/requests/"))  # vision has no budget now
    assert csv_link(empty) is None and not shown_budgets(empty)
