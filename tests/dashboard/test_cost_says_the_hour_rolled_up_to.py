"""The Cost page names the hour its figures are rolled up to, not "now": the reports read the
roll-ups, which count an hour once it has ended, so at 12:40 on the pool's clock they stop at
12:00 (walk finding 12: "count up to now (10:16)" while capacity counted 5.47 of 6.8 hours).
The Utilisation page counts open usage up to now, and the Cost page says so."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from dashboard_pages import text
from django.utils import timezone
from test_cost_page import day_after_tomorrow, rolled  # noqa: F401 (the fixture)

from gpupool.control.actions import do_finish_cycle, do_start_cycle
from gpupool.control.choices import CycleStatus


def minute(moment: datetime) -> str:
    """A moment as the page writes it (``local_time``, UTC in the tests)."""
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M")


def test_a_month_under_way_says_its_figures_stop_at_the_last_hour_rolled_up(
    rolled: str,  # noqa: F811
    page_as: Any,
) -> None:
    # given usage rolled up to 12:00, and the pool's clock at 12:40 the same day
    rolled_until = day_after_tomorrow() + timedelta(hours=2)
    now = rolled_until + timedelta(minutes=40)
    cycle = do_start_cycle(at=timezone.now())
    cycle.cluster_at = now
    do_finish_cycle(cycle, at=timezone.now(), status=CycleStatus.SUCCEEDED)
    # when finance opens the month
    page = text(page_as("fin").get(f"/cost/?month={rolled}"))
    note = page.split('id="span-not-ended"', 1)[1].split("</p>", 1)[0]
    # then it says the figures count up to 12:00, the last hour rolled up, not up to now
    assert "count up to now" not in note
    assert minute(rolled_until) in note.split("the last hour rolled up", 1)[0]
    assert "the last hour rolled up" in note and minute(now) in note
    # and that the Utilisation page counts to now
    assert "The Utilisation page counts up to now" in note
