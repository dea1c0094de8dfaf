"""The Cost page's tables fit a 1,400 px window: a month of the demo pool (hundreds of
thousands of GPU-hours, money in the hundreds of thousands) shows every money column without
scrolling sideways, every number whole on one line (screenshot ``finance-cost-1400``), and
so do a year's figures, in the millions."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

from test_pages_in_chromium import log_in, open_page, shoot

from gpupool.accounting.actions import do_open_usage, do_roll_up_usage
from gpupool.workloads.models import Workload

WIDTH = 1400

# Per table: how far its box reaches past the window and past its scrolling wrapper, and the
# number cells whose text is cut or wrapped, or that end past the window's right edge.
MEASURE = """(width) => [...document.querySelectorAll("#cost-teams, #cost-pool")].map((table) => {
  const wrap = table.closest(".table-wrap");
  const cells = [...table.querySelectorAll("td.number, th.number")];
  const oneLine = (cell) => {
    const range = document.createRange();
    range.selectNodeContents(cell);
    return range.getClientRects().length <= 1;
  };
  return {
    table: table.id,
    past_window: Math.max(0, Math.ceil(table.getBoundingClientRect().right - width)),
    scrolls_by: wrap.scrollWidth - wrap.clientWidth,
    cut: cells.filter((cell) => cell.tagName === "TD" && (
      cell.scrollWidth > cell.clientWidth || !oneLine(cell)
      || cell.getBoundingClientRect().right > width)).map((cell) => cell.textContent),
    numbers: cells.filter((cell) => cell.tagName === "TD").length,
  };
})"""


def a_month_of_use(world: Any) -> str:
    """The demo's running work holding its GPUs since a month before now, rolled up: the
    month before now's (a whole month of it)."""
    start = world.now - timedelta(days=62)
    for workload in Workload.objects.filter(state="running").prefetch_related("pod_sets"):
        for pod_set in workload.pod_sets.all():
            gpus = pod_set.count * pod_set.gpus
            do_open_usage(workload, flavor=pod_set.flavor, gpus=gpus, at=start)
    do_roll_up_usage(until=world.now)
    first_of_this_month = world.now.replace(day=1)
    return (first_of_this_month - timedelta(days=1)).strftime("%Y-%m")


def test_the_cost_tables_fit_a_1400_pixel_window_with_every_number_whole(
    world: Any, live_server: Any, browser: Any, screenshots: Path
) -> None:
    month = a_month_of_use(world)
    page, problems = open_page(browser)
    page.set_viewport_size({"width": WIDTH, "height": 900})
    log_in(page, live_server.url, "finance", world.password("finance"))
    page.goto(f"{live_server.url}/cost/?month={month}")
    page.wait_for_selector("#cost-teams tbody tr")
    shoot(page, screenshots, "finance-cost-1400")

    measured = page.evaluate(MEASURE, WIDTH)

    assert [table["table"] for table in measured] == ["cost-teams", "cost-pool"]
    assert all(table["numbers"] >= 7 for table in measured)
    assert [(t["table"], t["past_window"], t["scrolls_by"], t["cut"]) for t in measured] == [
        ("cost-teams", 0, 0, []),
        ("cost-pool", 0, 0, []),
    ]
    assert page.evaluate("document.documentElement.scrollWidth") <= WIDTH
    # A year of a pool this size: each number three characters longer (48,960 -> 1,048,960).
    page.evaluate(
        """() => document.querySelectorAll("#cost-teams td.number, #cost-pool td.number")
          .forEach((cell) => { cell.textContent = "1,0" + cell.textContent; })"""
    )
    longer = page.evaluate(MEASURE, WIDTH)
    assert [(t["table"], t["past_window"], t["scrolls_by"], t["cut"]) for t in longer] == [
        ("cost-teams", 0, 0, []),
        ("cost-pool", 0, 0, []),
    ]
    assert problems == []
