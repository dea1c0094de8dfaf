"""Walk-through s16: a team's lead sees the team's priority budgets on the Requests page
before asking for more ("Your budgets now"): per class, the period that covers the pool's
today, GPU-hours granted, spent, reserved for running protected windows and remaining (the
kept balance), in the pages' number format, read in one query; an empty state when the team
has none; other teams' budgets only to admins."""

from __future__ import annotations

import re
from datetime import date, timedelta
from typing import Any

from dashboard_pages import text
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from gpupool.quotas.actions import do_grant_budget, do_reserve_budget, do_spend_budget

NO_BUDGET = "No priority budget: your work runs at the default class; request one with the form."


def grant(pool: Any, team: Any, start: date, end: date, gpu_hours: str) -> Any:
    return do_grant_budget(
        team,
        pool.high,
        period_start=start,
        period_end=end,
        gpu_hours=gpu_hours,
        acting_user=None,
    )


def this_period() -> tuple[date, date]:
    today = timezone.localdate()
    return today - timedelta(days=3), today + timedelta(days=27)


def budget_row(page: str, key: str) -> list[str]:
    """The cells of the budgets table's row for ``team/class``."""
    found = re.search(rf'<tr data-budget="{key}">(.*?)</tr>', page)
    assert found is not None, page
    return re.findall(r"<td[^>]*>(.*?)</td>", found.group(1))


def test_a_lead_sees_granted_spent_reserved_and_remaining(pool: Any, page_as: Any) -> None:
    start, end = this_period()
    budget = grant(pool, pool.nlp, start, end, "1234.5")
    now = timezone.now()
    do_spend_budget(budget, gpu_hours="100.25", workload=None, at=now)
    do_reserve_budget(budget, gpu_hours="34", workload=None, at=now)
    grant(pool, pool.nlp, start - timedelta(days=40), start, "99")  # last period: not shown
    grant(pool, pool.vision, start, end, "77")  # another team's
    page = text(page_as("lena").get("/requests/"))
    assert "Your budgets now" in page
    assert budget_row(page, "nlp/high") == [
        "nlp",
        "high",
        f"{start:%Y-%m-%d} to {end - timedelta(days=1):%Y-%m-%d} (included)",
        "1,234.5 GPU-h",
        "100.25 GPU-h",
        "34 GPU-h",
        "1,100.25 GPU-h",
    ]
    assert page.count("<tr data-budget=") == 1  # neither last period's nor vision's
    assert NO_BUDGET not in page


def test_a_team_without_a_budget_is_told_so(pool: Any, page_as: Any) -> None:
    grant(pool, pool.vision, *this_period(), "77")
    page = text(page_as("lena").get("/requests/"))
    assert "Your budgets now" in page and NO_BUDGET in page
    assert "<tr data-budget=" not in page


def test_a_member_who_leads_nothing_sees_no_budgets_section(pool: Any, page_as: Any) -> None:
    grant(pool, pool.nlp, *this_period(), "10")
    page = text(page_as("max").get("/requests/"))
    assert "budgets now" not in page


def test_an_admin_sees_every_teams_budgets(pool: Any, page_as: Any) -> None:
    grant(pool, pool.nlp, *this_period(), "10")
    grant(pool, pool.vision, *this_period(), "77")
    page = text(page_as("ada").get("/requests/"))
    assert "Budgets now (every team)" in page
    assert budget_row(page, "vision/high")[-1] == "77 GPU-h"
    assert budget_row(page, "nlp/high")[-1] == "10 GPU-h"


def test_the_budgets_are_read_in_one_query_however_many(pool: Any, page_as: Any) -> None:
    client = page_as("ada")
    grant(pool, pool.nlp, *this_period(), "10")
    client.get("/requests/")
    with CaptureQueriesContext(connection) as one:
        client.get("/requests/")
    grant(pool, pool.vision, *this_period(), "77")
    with CaptureQueriesContext(connection) as two:
        page = text(client.get("/requests/"))
    assert page.count("<tr data-budget=") == 2
    budget_reads = [q for q in two.captured_queries if "prioritybudget" in q["sql"].lower()]
    assert len(budget_reads) == 1, budget_reads
    assert len(two.captured_queries) == len(one.captured_queries)
