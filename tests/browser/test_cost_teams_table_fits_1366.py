"""The Cost page's teams table fits a 1,366 px laptop window with the row of the pool's own
queues in it: that row's name, "(no team: the pool's own queues)", was kept on one line and
widened the Team column until the table scrolled sideways, hiding most of "Cost charged"."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

from domain_builders import queue, quota
from test_cost_page_fits_1400 import MEASURE, a_month_of_use
from test_pages_in_chromium import log_in, open_page, shoot

from gpupool.inventory.models import Flavor
from gpupool.quotas.models import Queue, QueueQuotaChange

WIDTH = 1366


def test_the_teams_table_with_the_no_team_row_fits_a_1366_pixel_window(
    world: Any, live_server: Any, browser: Any, screenshots: Path
) -> None:
    # A queue of no team, guaranteed 2 h100 GPUs it never uses since before the month
    # shown: its row is charged reserved idle.
    shared = queue("shared", parent=Queue.objects.get(parent=None))
    quota(shared, Flavor.objects.get(name="h100"), 2, 2, 4)
    QueueQuotaChange.objects.filter(queue=shared).update(
        effective_from=world.now - timedelta(days=90)
    )
    month = a_month_of_use(world)
    page, problems = open_page(browser)
    page.set_viewport_size({"width": WIDTH, "height": 768})
    log_in(page, live_server.url, "finance", world.password("finance"))
    page.goto(f"{live_server.url}/cost/?month={month}")
    page.wait_for_selector("#cost-teams tbody tr")
    shoot(page, screenshots, "finance-cost-1366")

    assert page.locator('#cost-teams a[href="#no-team"]').count() == 1
    # The demo pool's busy month, each team in the ten thousands of GPU-hours (11,402.74
    # GPU-h): each number two characters longer than this world's.
    page.evaluate(
        """() => document.querySelectorAll("#cost-teams td.number, #cost-pool td.number")
          .forEach((cell) => { cell.textContent = "10" + cell.textContent; })"""
    )
    measured = page.evaluate(MEASURE, WIDTH)
    assert [(t["table"], t["past_window"], t["scrolls_by"], t["cut"]) for t in measured] == [
        ("cost-teams", 0, 0, []),
        ("cost-pool", 0, 0, []),
    ]
    assert problems == []
