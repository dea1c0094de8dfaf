"""Quota and budget requests as people read them:

- a request's amounts are decimal strings, as every GPU amount of the API, whether they came
  as JSON numbers (the demo's seeded request) or strings (the CLI and the page), and a request
  stored before that (with numbers) reads the same;
- an admin's own submitted request is not listed as waiting for their decision: the Approvals
  page lists it apart, naming who can decide it (another admin) or saying nobody can;
- a budget request's period reads with its last day, included, as the Cost page's "End
  (included)", not with the stored end (the first day after it); the API says that day too,
  ``period_last_day``, beside ``period_end``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import date, timedelta
from typing import Any

import pytest
from django.test import Client
from domain_builders import period_fields
from rest_framework.test import APIClient
from two_teams import Pool

from gpupool.quotas.models import PriorityBudget, QuotaRequest
from gpupool.tenancy.models import SiteRole

pytestmark = pytest.mark.django_db


def page_of(pool: Pool, name: str) -> Client:
    client = Client()
    client.force_login(pool.users[name])
    return client


def section(page: str, title_id: str) -> str:
    """The HTML of the page's section titled by ``title_id`` ("" when there is none)."""
    found = re.search(rf'<section aria-labelledby="{title_id}".*?</section>', page, re.S)
    return found.group(0) if found else ""


# ----------------------------------------------------------------------------- R4 amounts


def test_request_amounts_are_decimal_strings_however_they_were_sent(
    api_as: Callable[[str], APIClient], file_request: Callable[..., dict[str, Any]]
) -> None:
    numbers = file_request(payload={"guarantee": 8, "deserved": 12.0, "capability": 24})
    strings = file_request(
        queue="vision",
        by="vera",
        payload={"guarantee": "8", "deserved": "12.0", "capability": "24.000"},
    )
    asked = {"guarantee": "8", "deserved": "12", "capability": "24"}
    assert numbers["payload"] == strings["payload"] == asked
    assert QuotaRequest.objects.get(pk=numbers["id"]).payload == asked  # stored so, too


def test_a_request_stored_with_numbers_is_listed_with_decimal_strings(
    api_as: Callable[[str], APIClient], file_request: Callable[..., dict[str, Any]]
) -> None:
    filed = file_request(submit=True)
    QuotaRequest.objects.filter(pk=filed["id"]).update(
        payload={"guarantee": 36, "deserved": 53, "capability": 160}
    )  # as the demo's seeded request was stored before
    listed = api_as("ada").get("/api/v1/quota-requests/").json()["results"]
    assert [row["payload"] for row in listed] == [
        {"guarantee": "36", "deserved": "53", "capability": "160"}
    ]
    detail = api_as("lena").get(f"/api/v1/quota-requests/{filed['id']}/").json()
    assert detail["payload"] == {"guarantee": "36", "deserved": "53", "capability": "160"}


# ----------------------------------------------------------------------------- R8 own requests


def test_an_admin_s_own_request_waits_for_another_admin_not_for_them(
    pool: Pool, file_request: Callable[..., dict[str, Any]]
) -> None:
    own = file_request(by="ada", submit=True)
    theirs = file_request(by="vera", queue="vision", submit=True)
    page = page_of(pool, "ada").get("/approvals/").content.decode()
    waiting = section(page, "pending-title")
    assert f'href="/approvals/{theirs["id"]}/"' in waiting
    assert f'href="/approvals/{own["id"]}/"' not in waiting
    apart = section(page, "own-title")
    assert (
        f'href="/requests/{own["id"]}/"' in apart and "another admin decides these (alan)" in apart
    )
    other = section(page_of(pool, "alan").get("/approvals/").content.decode(), "pending-title")
    assert f'href="/approvals/{own["id"]}/"' in other  # alan decides it
    detail = page_of(pool, "ada").get(f"/approvals/{own['id']}/").content.decode()
    assert "another admin decides it. Admins who can: alan." in detail


def test_the_only_admin_is_told_nobody_can_decide_their_own_request(
    pool: Pool, file_request: Callable[..., dict[str, Any]]
) -> None:
    own = file_request(by="ada", submit=True)
    SiteRole.objects.filter(user=pool.users["alan"]).delete()
    page = page_of(pool, "ada").get("/approvals/").content.decode()
    assert f'href="/approvals/{own["id"]}/"' not in section(page, "pending-title")
    apart = section(page, "own-title")
    assert "you are the only admin, so nobody can decide these" in apart
    assert "Nothing waits for your decision" in page
    detail = page_of(pool, "ada").get(f"/approvals/{own['id']}/").content.decode()
    assert "You are the only admin, so nobody can: withdraw it" in detail


# ----------------------------------------------------------------------------- R7 periods


def test_a_period_reads_with_its_last_day_included() -> None:
    from gpupool.quotas.models import period_words

    assert period_words(date(2027, 1, 5), date(2027, 1, 9)) == "2027-01-05 to 2027-01-08 (included)"
    assert (
        period_words(date(2026, 12, 1), date(2027, 1, 1)) == "2026-12-01 to 2026-12-31 (included)"
    )


def test_budget_periods_on_the_pages_and_in_the_api_summary_say_their_last_day(
    pool: Pool, api_as: Callable[[str], APIClient], file_request: Callable[..., dict[str, Any]]
) -> None:
    fields = period_fields()
    start, end = (
        date.fromisoformat(fields["period_start"]),
        date.fromisoformat(fields["period_end"]),
    )
    PriorityBudget.objects.create(tenant=pool.nlp, priority_class=pool.high, gpu_hours=10, **fields)
    filed = file_request(
        kind="budget",
        queue=None,
        flavor=None,
        tenant="nlp",
        priority_class="high",
        payload={"gpu_hours": "5"},
        submit=True,
        **fields,
    )
    shown = f"{start:%Y-%m-%d} to {end - timedelta(days=1):%Y-%m-%d} (included)"
    assert filed["summary"] == f"budget of nlp at high, {shown}: 5 GPU-hours more"
    # the API keeps period_end (the first day after it) and says the last day beside it
    [listed] = api_as("lena").get("/api/v1/quota-requests/").json()["results"]
    for answer in (filed, listed):
        assert (answer["period_end"], answer["period_last_day"]) == (
            end.isoformat(),
            (end - timedelta(days=1)).isoformat(),
        )
    requests_page = page_of(pool, "lena").get("/requests/").content.decode()
    assert f"<td>{shown}</td>" in requests_page  # the budgets now table
    approval = page_of(pool, "ada").get(f"/approvals/{filed['id']}/").content.decode()
    assert f"budget at high, {shown}</caption>" in approval
