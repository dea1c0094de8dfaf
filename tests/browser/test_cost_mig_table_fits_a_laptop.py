"""The Cost page's MIG table fits a laptop's 1366x768 window: a month of the demo pool with
work of the MIG flavor beside the whole-GPU work shows every column of "MIG flavors, in MIG
instance-hours" without scrolling sideways, every number whole on one line (screenshot
``finance-cost-mig-1366``). Its eight columns of hours each wrote "MIG instance-hours" after
the number, so the table was about 1,700 px wide, past the window even at 1920x1080 (the
page's column is 1,283 px wide there too); the caption and the Charged column's header name
the unit once instead, as the whole-GPU table's "Charged GPU-hours" does."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

from django.contrib.auth import get_user_model
from test_cost_page_fits_1400 import MEASURE, a_month_of_use
from test_pages_in_chromium import log_in, open_page, shoot

from gpupool.accounting.actions import do_open_usage
from gpupool.inventory.models import Flavor
from gpupool.quotas.models import Queue
from gpupool.workloads.actions import PodSetSpec, do_submit_workload

MIG_FLAVOR = "a100-3g.40gb"  # the demo's MIG flavor (seed-demo)
# The MIG table's box and its wrapper, measured as the 1,400 px test measures the others.
MIG_MEASURE = MEASURE.replace("#cost-teams, #cost-pool", "#cost-teams-mig")


def mig_notebooks(world: Any) -> None:
    """Every team's notebook on 4 MIG instances, held since two months before now (a whole
    month of MIG instance-hours in the month the page shows)."""
    flavor = Flavor.objects.get(name=MIG_FLAVOR)
    start = world.now - timedelta(days=62)
    for team in ("nlp", "vision", "speech", "search", "ads", "recsys"):
        workload = do_submit_workload(
            f"{team}-mig-notebook",
            queue=Queue.objects.get(name=team),
            pod_sets=[PodSetSpec(count=1, gpus=4, flavor=flavor)],
            submitter=get_user_model().objects.get(username=f"{team}-member"),
            at=start,
        )
        do_open_usage(workload, flavor=flavor, gpus=4, at=start)


def test_the_cost_pages_mig_table_fits_a_1366_pixel_window(
    world: Any, live_server: Any, browser: Any, screenshots: Path
) -> None:
    mig_notebooks(world)
    month = a_month_of_use(world)  # (rolls the MIG notebooks' month up too)
    page, problems = open_page(browser)
    log_in(page, live_server.url, "finance", world.password("finance"))
    page.goto(f"{live_server.url}/cost/?month={month}")
    page.wait_for_selector("#cost-teams-mig tbody tr")
    shoot(page, screenshots, "finance-cost-mig-1366")

    width = page.viewport_size["width"]
    assert width == 1366
    (measured,) = page.evaluate(MIG_MEASURE, width)
    assert measured["numbers"] >= 6 * 9  # six teams' rows of nine figures
    assert (measured["past_window"], measured["scrolls_by"], measured["cut"]) == (0, 0, [])
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    caption = page.locator("#cost-teams-mig caption").inner_text()
    assert caption == "MIG flavors, in MIG instance-hours"
    assert "Charged MIG instance-hours" in page.locator("#cost-teams-mig thead").inner_text()
    assert problems == []
