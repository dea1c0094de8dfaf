"""The Cost page's pool table (the four lines per flavor) fits a laptop's 1366x768 window with
a full month of the demo pool in it, the MIG flavor's row included (screenshot
``finance-cost-pool-1366``): five-digit GPU-hours each written "GPU-h" after the number, and
the MIG row's "MIG instance-hours" in each of its five cells, took the table about 8 px past
the page's column. Each row now names its unit once (its "Hours in" cell), its hours plain
numbers, as the MIG teams' table names the unit once (test_cost_mig_table_fits_a_laptop)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from test_cost_mig_table_fits_a_laptop import MIG_FLAVOR, mig_notebooks
from test_cost_page_fits_1400 import MEASURE, a_month_of_use
from test_pages_in_chromium import log_in, open_page, shoot

# The pool table's box and its wrapper, measured as the other Cost tables are.
POOL_MEASURE = MEASURE.replace("#cost-teams, #cost-pool", "#cost-pool")
# Each figure of the pool table at its widest in a month: the number a cell opens with (the
# rest of its text, a unit the page writes there, kept) as 88,888.88 hours, the row's last
# cell (money) as 888,888.88.
STRETCH = """() => document.querySelectorAll("#cost-pool td.number").forEach((cell) => {
  const widest = cell.nextElementSibling ? "88,888.88" : "888,888.88";
  cell.textContent = cell.textContent.replace(/^[0-9,]+(\\.[0-9]+)?/, widest);
})"""


def test_the_cost_pages_pool_table_fits_a_1366_pixel_window_naming_each_unit_once(
    world: Any, live_server: Any, browser: Any, screenshots: Path
) -> None:
    mig_notebooks(world)
    month = a_month_of_use(world)
    page, problems = open_page(browser)
    log_in(page, live_server.url, "finance", world.password("finance"))
    page.goto(f"{live_server.url}/cost/?month={month}")
    page.wait_for_selector("#cost-pool tbody tr")
    shoot(page, screenshots, "finance-cost-pool-1366")

    width = page.viewport_size["width"]
    assert width == 1366
    (measured,) = page.evaluate(POOL_MEASURE, width)
    rows = page.locator("#cost-pool tbody tr")
    assert measured["numbers"] >= rows.count() * 6  # every flavor's six figures
    assert (measured["past_window"], measured["scrolls_by"], measured["cut"]) == (0, 0, [])
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    # A month of a pool whose every line has hours (the walk's): five-digit hours to the
    # hundredth in each of the four lines and the capacity, six-digit money.
    page.evaluate(STRETCH)
    assert page.locator("#cost-pool td.number").first.inner_text().startswith("88,888.88")
    (stretched,) = page.evaluate(POOL_MEASURE, width)
    assert (stretched["past_window"], stretched["scrolls_by"], stretched["cut"]) == (0, 0, [])
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    page.reload()
    mig = rows.filter(has=page.locator(f"td:text-is('{MIG_FLAVOR}')"))
    assert mig.inner_text().count("MIG instance-hours") == 1
    assert mig.locator("[data-unit]").inner_text() == "MIG instance-hours"
    h100 = rows.filter(has=page.locator("td:text-is('h100')"))
    assert h100.locator("[data-unit]").inner_text() == "GPU-hours"
    assert "GPU-h" not in h100.locator("td.number").all_inner_texts()[0]
    assert problems == []
