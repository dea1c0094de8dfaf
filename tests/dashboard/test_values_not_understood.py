"""A value of a page's URL the page cannot take -- a month past the calendar, a window or a
state it does not know -- is said beside its field, with what is shown instead; never a 500,
never silently replaced."""

from __future__ import annotations

from typing import Any

import pytest
from dashboard_pages import text
from django.utils import timezone
from two_teams import submit

from gpupool.accounting.periods import next_month

MONTH_ERROR = 'id="month-not-understood"'


@pytest.mark.parametrize("month", ["9999-12", "0001-12"], ids=["after", "before"])
def test_a_month_the_calendar_cannot_count_is_a_field_error_not_a_500(
    pool: Any, page_as: Any, month: str
) -> None:
    response = page_as("fin").get(f"/cost/?month={month}")
    assert response.status_code == 200
    page = text(response)
    assert MONTH_ERROR in page and 'role="alert"' in page and 'aria-invalid="true"' in page
    assert f"“{month}” was not understood: the months shown run from 0002-01 to 9999-11" in page
    this_month = timezone.localdate().strftime("%Y-%m")
    assert f'value="{this_month}"' in page


@pytest.mark.parametrize("month", ["9999-11", "0002-01"], ids=["last", "first"])
def test_the_first_and_last_months_shown_are_counted(pool: Any, page_as: Any, month: str) -> None:
    page = text(page_as("fin").get(f"/cost/?month={month}"))
    assert MONTH_ERROR not in page and 'min="0002-01" max="9999-11"' in page


@pytest.mark.parametrize("month", ["2026-13", "abc"])
def test_a_month_not_understood_says_so_and_which_month_is_shown(
    pool: Any, page_as: Any, month: str
) -> None:
    page = text(page_as("fin").get(f"/cost/?month={month}"))
    shown = timezone.localdate().strftime("%B %Y")
    assert MONTH_ERROR in page
    assert f"“{month}” was not understood: a month is written YYYY-MM (2026-03)" in page
    assert f"Showing {shown} instead." in page


def test_no_month_asked_shows_this_month_without_a_word(pool: Any, page_as: Any) -> None:
    assert MONTH_ERROR not in text(page_as("fin").get("/cost/"))


def test_no_month_follows_december_9999_and_the_error_says_so() -> None:
    from datetime import date

    assert next_month(date(9999, 11, 1)) == date(9999, 12, 1)
    with pytest.raises(OverflowError, match="no month follows 9999-12"):
        next_month(date(9999, 12, 1))


@pytest.mark.parametrize("query", ["until=9999-12-31", "since=0001-01-01"], ids=["until", "since"])
def test_an_audit_day_past_the_calendar_is_a_field_error_not_a_500(
    pool: Any, page_as: Any, query: str
) -> None:
    response = page_as("ada").get(f"/audit/?{query}")
    assert response.status_code == 200
    page = text(response)
    day = query.split("=")[1]
    assert f"{day} is out of range: pick a day from 0001-01-02 to 9999-12-30." in page
    assert 'class="errorlist"' in page and "No change matches these filters" in page


def test_an_audit_day_inside_the_calendar_filters(pool: Any, page_as: Any) -> None:
    page = text(page_as("ada").get("/audit/?since=0001-01-02&until=9999-12-30"))
    assert "out of range" not in page and "No change matches" not in page


def test_a_window_not_understood_says_so_and_shows_the_last_24h(pool: Any, page_as: Any) -> None:
    page = text(page_as("lena").get("/utilization/?window=abc"))
    assert 'id="window-not-understood"' in page and 'aria-invalid="true"' in page
    assert "“abc” was not understood: a window is one of 6h, 24h, 7d." in page
    assert "Showing the last 24h instead." in page
    assert '<option value="24h" selected>' in page
    assert "not understood" not in text(page_as("lena").get("/utilization/?window=7d"))


def test_a_state_not_understood_says_so_and_shows_every_state(pool: Any, page_as: Any) -> None:
    submit(pool, "train", pool.nlp_queue, "max")
    page = text(page_as("max").get("/workloads/?state=bogus"))
    assert 'id="state-not-understood"' in page and 'aria-invalid="true"' in page
    assert "“bogus” was not understood: a state is one of pending, admitted" in page
    assert "Showing every state instead." in page and "nlp/train" in page
    assert "not understood" not in text(page_as("max").get("/workloads/?state=pending"))
