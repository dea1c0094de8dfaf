"""Walk s23, in headless Chromium: on a waiting workload's page, "The scheduler's numbers"
(a ``<details>`` in the part that refreshes every 10 s) snapped shut at the next refresh, a few
seconds after the user opened it to read them. Once opened it stays open across refreshes;
closed, it stays closed."""

from __future__ import annotations

from typing import Any

from domain_builders import explained
from test_pages_in_chromium import log_in, open_page

from gpupool.workloads.models import Workload

FACTS = {"queue": "nlp", "flavor": "h100", "asked_gpus": 32.0, "available_gpus": 8.0}


def refreshed(page: Any) -> None:
    """Refresh the page's live part as its poll does (htmx swaps in a new copy), and wait
    until the new copy is in."""
    page.locator("#live [data-facts]").evaluate("facts => { facts.dataset.before = 'yes'; }")
    page.evaluate("htmx.ajax('GET', location.pathname, {target: '#live', swap: 'innerHTML'})")
    page.wait_for_function(
        "document.querySelector('#live [data-facts]') !== null && "
        "document.querySelector('#live [data-facts]').dataset.before === undefined"
    )


def test_the_schedulers_numbers_stay_open_when_the_page_refreshes(
    world: Any, live_server: Any, browser: Any
) -> None:
    waiting = Workload.objects.get(name="big-eval")
    explained(waiting, "quota", "nlp would exceed its capability.", FACTS, queue_rank=1.0)
    page, problems = open_page(browser)
    log_in(page, live_server.url, "nlp-member", world.password("nlp-member"))
    page.goto(f"{live_server.url}/workloads/nlp/big-eval/")
    page.wait_for_load_state("networkidle")
    facts = page.locator("#live [data-facts]")
    refreshed(page)
    assert facts.evaluate("details => details.open") is False  # closed stays closed
    facts.locator("summary").click()
    assert facts.evaluate("details => details.open") is True
    refreshed(page)
    assert facts.evaluate("details => details.open") is True
    assert facts.get_by_text("GPUs asked").is_visible()
    assert problems == []
