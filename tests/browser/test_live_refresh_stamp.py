"""In headless Chromium: a page whose part refreshes itself (``#live``, polled by htmx) says
when it was last refreshed, in the stamp beside "refreshes every N s" in its head. The stamp
sits outside the swapped part, and stayed empty: it is found in the document now."""

from __future__ import annotations

from typing import Any

from test_pages_in_chromium import log_in, open_page


def test_a_refreshed_page_says_when_it_was_updated(
    world: Any, live_server: Any, browser: Any
) -> None:
    page, problems = open_page(browser)
    log_in(page, live_server.url, "nlp-member", world.password("nlp-member"))
    page.goto(f"{live_server.url}/workloads/")
    page.wait_for_load_state("networkidle")
    stamp = page.locator("[data-updated]")
    assert stamp.text_content() == ""  # not refreshed yet
    page.evaluate("htmx.ajax('GET', location.pathname, {target: '#live', swap: 'innerHTML'})")
    page.wait_for_function("document.querySelector('[data-updated]').textContent !== ''")
    assert (stamp.text_content() or "").startswith(" · updated ")
    assert problems == []
