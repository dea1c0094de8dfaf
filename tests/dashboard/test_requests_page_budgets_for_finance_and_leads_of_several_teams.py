"""The Requests page's budgets, and their CSV links, as each role reads them.

Finance reads every team's budgets through the API (it reads the teams' budgets and costs):
the page lists them too, read-only -- no form, no "request one with the form" -- with the same
CSV link, and tells finance who files requests instead. A lead of several teams gets every
team they lead, in the table and in both CSV links (the budgets API's ``tenant`` repeated),
and no team they are only a member of."""

from __future__ import annotations

import re
from typing import Any

from dashboard_pages import text
from domain_builders import tenant, this_month
from test_requests_page_budgets_csv import download, grant, shown_budgets
from two_teams import budget_request, quota_request

from gpupool.tenancy.actions import do_set_membership


def link(page: str, anchor: str) -> str | None:
    """Where the page's link ``id=anchor`` points, or None when the page has none."""
    found = re.search(rf'<a id="{anchor}" href="([^"]+)" download>', page)
    return found.group(1).replace("&amp;", "&") if found else None


def test_finance_reads_every_teams_budgets_with_their_csv_and_files_nothing(
    pool: Any, page_as: Any
) -> None:
    start, end = this_month()
    grant(pool, pool.nlp, start, end, "12.5")
    grant(pool, pool.vision, start, end, "77")
    client = page_as("fin")
    page = text(client.get("/requests/"))
    assert "Budgets now (every team)" in page
    assert shown_budgets(page) == ["nlp/high", "vision/high"]
    csv_url = link(page, "csv-budgets")
    assert csv_url is not None
    got = download(client, csv_url)
    assert [f"{row['tenant']}/{row['priority_class']}" for row in got] == shown_budgets(page)
    # Read-only: no form to file, nothing to withdraw, and no "request one".
    assert "data-request-form" not in page and "New request" not in page
    assert "withdraw" not in page.lower() and "request one with the form" not in page
    # What the page is for, and who files instead.
    assert "each team's priority budgets now" in page
    who_files = page[page.index("data-reads-only") :]
    assert "file none: a team's lead asks" in who_files
    assert 'href="/cost/"' in who_files


def test_finance_is_told_when_no_team_has_a_budget(pool: Any, page_as: Any) -> None:
    page = text(page_as("fin").get("/requests/"))
    assert "Budgets now (every team)" in page
    assert "No team has a priority budget for today's period" in page
    assert "request one with the form" not in page
    assert "No request yet: a team's lead files them" in page
    assert link(page, "csv-budgets") is None


def test_a_lead_of_two_teams_gets_both_in_the_table_and_the_csv_links(
    pool: Any, page_as: Any
) -> None:
    start, end = this_month()
    lena = pool.users["lena"]
    do_set_membership(lena, pool.vision, role="lead", acting_user=None)
    speech = tenant("speech", members=(lena,))  # only a member: not hers to ask for
    for team in (pool.nlp, pool.vision, speech):
        grant(pool, team, start, end, "10")
    nlp_s = budget_request(pool, "5", by="lena", submit=True)
    vision_s = quota_request(pool, by="vera", team="vision", submit=True)
    client = page_as("lena")
    page = text(client.get("/requests/"))
    assert shown_budgets(page) == ["nlp/high", "vision/high"]
    budgets_url = link(page, "csv-budgets")
    assert budgets_url is not None and "tenant=nlp&tenant=vision" in budgets_url
    got = download(client, budgets_url)
    assert [f"{row['tenant']}/{row['priority_class']}" for row in got] == shown_budgets(page)
    # The requests' CSV has the rows the list shows: both teams' (vera's of vision too).
    listed = [int(pk) for pk in re.findall(r'<td><a href="/requests/(\d+)/">', page)]
    requests_url = link(page, "csv-requests")
    assert requests_url is not None
    rows = download(client, requests_url)
    assert [int(row["id"]) for row in rows] == listed
    assert sorted(listed) == sorted([nlp_s.pk, vision_s.pk])
    assert {row["tenant"] for row in rows} == {"nlp", "vision"}


def test_a_lead_of_one_team_names_it_once(pool: Any, page_as: Any) -> None:
    start, end = this_month()
    grant(pool, pool.nlp, start, end, "10")
    page = text(page_as("lena").get("/requests/"))
    budgets_url = link(page, "csv-budgets")
    assert budgets_url is not None
    assert re.findall(r"tenant=([^&]+)", budgets_url) == ["nlp"]
