"""Walk-through E: the admin's pages narrow to a phone (390 px) without the page itself
scrolling sideways, as docs/dashboard.md promises ("wide tables scroll on their own"). The
Overview's allocation tables, the Utilisation page's two idle tables and the Preemptions
page's tables sat outside a ``table-wrap`` and pushed the page (header, menu and all) past
the screen; the Audit page's "Action" filter and the Cluster page's "Nodes" filter, as wide
as their longest option, did the same."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from test_pages_in_chromium import log_in, open_page, shoot

PHONE = {"width": 390, "height": 844}
PAGES = ["overview", "utilization", "preemptions", "audit", "cluster", "approvals", "requests"]


def test_the_admins_pages_fit_a_390_pixel_phone_screen(
    world: Any, live_server: Any, browser: Any, screenshots: Path
) -> None:
    page, problems = open_page(browser)
    page.set_viewport_size(PHONE)
    log_in(page, live_server.url, "admin", world.password("admin"))
    past_the_screen = {}
    for name in PAGES:
        page.goto(f"{live_server.url}/{name}/")
        page.wait_for_load_state("networkidle")
        shoot(page, screenshots, f"admin-{name}-390")
        past_the_screen[name] = page.evaluate(
            "() => document.documentElement.scrollWidth - document.documentElement.clientWidth"
        )
    assert past_the_screen == dict.fromkeys(PAGES, 0)
    assert problems == []
