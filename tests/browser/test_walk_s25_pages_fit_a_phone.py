"""Walk s25, in headless Chromium on a phone's screen (390x844): a lead's pages are made for a
laptop first but narrow to a phone without breaking (``dashboard.css``). On Overview,
Requests, Utilisation, Preemptions and Cluster the whole page scrolled sideways, its header
band ending halfway: tables not in a ``table-wrap`` (which scrolls on its own) and the Cluster
page's filter, whose longest choice is wider than the screen, ran off its right edge."""

from __future__ import annotations

from typing import Any

from test_pages_in_chromium import log_in, open_page

PHONE = {"width": 390, "height": 844}

# What runs off the page's right edge, each outermost such element that no element scrolling
# on its own holds: its tag and the start of its text.
RUNS_OFF = """() => {
  const width = document.documentElement.clientWidth;
  const scrolls = element => {
    for (let at = element.parentElement; at && at !== document.body; at = at.parentElement) {
      if (getComputedStyle(at).overflowX !== "visible") return true;
    }
    return false;
  };
  return [...document.querySelectorAll("main *")]
    .filter(element => element.getBoundingClientRect().right > width + 1 && !scrolls(element))
    .filter(element => element.parentElement.getBoundingClientRect().right <= width + 1)
    .map(element => element.tagName + ": " + element.textContent.trim().slice(0, 40));
}"""


def test_every_page_of_a_leads_menu_fits_a_phone_without_scrolling_sideways(
    world: Any, live_server: Any, browser: Any
) -> None:
    page, problems = open_page(browser)
    page.set_viewport_size(PHONE)
    log_in(page, live_server.url, "nlp-lead", world.password("nlp-lead"))
    menu = page.get_by_role("navigation", name="Main").get_by_role("link")
    links = [menu.nth(index).get_attribute("href") for index in range(menu.count())]
    assert "/requests/" in links
    wide = {}
    for link in [*links, "/workloads/nlp/big-eval/"]:
        page.goto(f"{live_server.url}{link}")
        page.wait_for_load_state("networkidle")
        off = page.evaluate(RUNS_OFF)
        if off or page.evaluate("document.documentElement.scrollWidth") > PHONE["width"]:
            wide[link] = off
    assert wide == {}
    assert problems == []


def test_on_a_laptop_the_requests_quotas_now_fit_their_column(
    world: Any, live_server: Any, browser: Any
) -> None:
    # Its amounts in MIG instances ran the table past the column's right edge at 1366 px;
    # held in a table-wrap, it would hide its last column behind a scroll bar instead.
    page, problems = open_page(browser)
    log_in(page, live_server.url, "nlp-lead", world.password("nlp-lead"))
    page.goto(f"{live_server.url}/requests/")
    quotas = page.locator("h3", has_text="Your queues' quotas now").locator("xpath=..")
    table = quotas.locator("table")
    assert "MIG instances" in table.inner_text()
    fits = table.evaluate(
        """table => {
          const column = table.closest("section").getBoundingClientRect();
          const box = table.getBoundingClientRect();
          const holder = table.parentElement;
          return box.right <= column.right + 1 && holder.scrollWidth <= holder.clientWidth;
        }"""
    )
    assert fits
    assert problems == []
