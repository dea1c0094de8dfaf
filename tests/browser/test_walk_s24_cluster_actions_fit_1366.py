"""The Cluster page's node table fits a 1,366 px laptop window with a node's actions open (its
drain's confirmation too): the open actions took the width of the other columns, so every
node's name broke at its hyphen ("h100-" over "00"), its eight GPUs wrapped two a line, and
the table scrolled sideways."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from test_pages_in_chromium import log_in, open_page, shoot

WIDTH = 1366

MEASURE = """() => {
  const lines = (element) => {
    const range = document.createRange();
    range.selectNodeContents(element);
    return new Set([...range.getClientRects()].map((rect) => Math.round(rect.top))).size;
  };
  const wrap = document.querySelector("#node-h100-09").closest(".table-wrap");
  const row = (name) => document.querySelector(`#node-${name}`);
  const gpuLines = (name) =>
    new Set([...row(name).querySelectorAll("li.gpu")].map((gpu) => Math.round(gpu.offsetTop)))
      .size;
  return {
    scrolls_by: wrap.scrollWidth - wrap.clientWidth,
    name_lines: ["h100-07", "h100-08", "h100-09"].map((name) =>
      lines(row(name).querySelector("th"))),
    gpu_lines: ["h100-07", "h100-08", "h100-09"].map(gpuLines),
  };
}"""


def test_the_node_table_fits_1366_pixels_with_a_nodes_drain_confirmation_open(
    world: Any, live_server: Any, browser: Any, screenshots: Path
) -> None:
    page, problems = open_page(browser)
    page.set_viewport_size({"width": WIDTH, "height": 768})
    log_in(page, live_server.url, "admin", world.password("admin"))
    page.goto(f"{live_server.url}/cluster/?flavor=h100")
    # the demo's h100-07 has a GPU off the bus: the longest health reason of the table
    assert "the GPU has fallen off the bus" in page.locator("#node-h100-07").inner_text()
    row = page.locator("#node-h100-09")
    row.locator("summary", has_text="Change h100-09").click()
    row.locator("summary", has_text="Drain: evict its work").click()
    assert row.get_by_role("button", name="Yes, drain h100-09").is_visible()
    row.scroll_into_view_if_needed()
    shoot(page, screenshots, "admin-cluster-drain-open-1366")
    assert page.evaluate(MEASURE) == {
        "scrolls_by": 0,
        "name_lines": [1, 1, 1],
        "gpu_lines": [1, 1, 1],
    }
    assert problems == []
