"""A person's walk through the pages in headless Chromium: each role logs in, lands on its
home page and opens every page the menu offers (screenshots at 1366x768 in
``build/screenshots/``); a lead asks for quota, an admin approves it with its impact and a
what-if in view, and the queue's quota changes on the page."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from gpupool.quotas.models import QueueQuota, QuotaRequest

HOMES = {
    "admin": "/overview/",
    "finance": "/cost/",
    "nlp-lead": "/workloads/",
    "vision-member": "/workloads/",
}


def open_page(browser: Any) -> tuple[Any, list[str]]:
    """A new tab, and the list its script errors and failed requests are collected in."""
    page = browser.new_page()
    problems: list[str] = []
    page.on("pageerror", lambda error: problems.append(f"script error: {error}"))
    page.on(
        "console",
        lambda message: (
            problems.append(f"console: {message.text}") if message.type == "error" else None
        ),
    )
    page.on(
        "response",
        lambda response: (
            problems.append(f"{response.status} {response.url}") if response.status >= 400 else None
        ),
    )
    return page, problems


def log_in(page: Any, server: str, username: str, password: str) -> None:
    """Open the site, be sent to the login page, and log in as a person does."""
    page.goto(f"{server}/")
    assert "/login/" in page.url
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_load_state()


def log_out(page: Any) -> None:
    """Press the header's Log out button."""
    page.get_by_role("button", name="Log out").click()
    page.wait_for_url(re.compile(r".*/login/$"))


def shoot(page: Any, folder: Path, name: str) -> None:
    """Screenshots: what a 1366x768 window shows (``NAME.png``) and the whole page at its
    width (``NAME-full.png``)."""
    page.screenshot(path=str(folder / f"{name}.png"))
    page.screenshot(path=str(folder / f"{name}-full.png"), full_page=True)


@pytest.mark.parametrize("username", list(HOMES))
def test_each_role_lands_on_its_home_and_walks_every_page_of_its_menu(
    world: Any, live_server: Any, browser: Any, screenshots: Path, username: str
) -> None:
    page, problems = open_page(browser)
    shoot_name = username.split("-")[-1] if "-" in username else username
    page.goto(f"{live_server.url}/")
    shoot(page, screenshots, "login")
    log_in(page, live_server.url, username, world.password(username))
    assert page.url == f"{live_server.url}{HOMES[username]}"
    menu = page.get_by_role("navigation", name="Main").get_by_role("link")
    titles = [menu.nth(index).inner_text() for index in range(menu.count())]
    assert titles, "the menu offers no page"
    for title in titles:
        page.get_by_role("navigation", name="Main").get_by_role("link", name=title).click()
        page.wait_for_load_state("networkidle")
        current = page.get_by_role("navigation", name="Main").locator('[aria-current="page"]')
        assert current.inner_text() == title
        assert page.locator("h1").count() == 1
        # charts drawn by plotly.js from the wheel, where the page has any
        for chart in page.locator(".chart").all():
            chart.locator(".main-svg").first.wait_for()
        slug = title.lower().replace(" ", "-")
        shoot(page, screenshots, f"{shoot_name}-{slug}")
    # times are shown in the viewer's zone (the browser's: Europe/Paris)
    assert page.locator("[data-zone]").inner_text() == "Europe/Paris"
    log_out(page)
    assert problems == []


def test_keyboard_users_skip_to_the_content_and_see_where_the_focus_is(
    world: Any, live_server: Any, browser: Any
) -> None:
    page, _ = open_page(browser)
    log_in(page, live_server.url, "admin", world.password("admin"))
    page.keyboard.press("Tab")
    skip = page.get_by_role("link", name="Skip to content")
    assert skip.evaluate("element => element === document.activeElement")
    assert skip.evaluate("element => getComputedStyle(element).top") != "-45px"
    outline = skip.evaluate("element => getComputedStyle(element).outlineStyle")
    assert outline == "solid"
    page.keyboard.press("Enter")
    assert page.evaluate("document.activeElement.id") == "main"


def test_a_lead_asks_for_quota_and_an_admin_approves_it_with_its_impact_in_view(
    world: Any, live_server: Any, browser: Any, screenshots: Path
) -> None:
    server = live_server.url
    page, problems = open_page(browser)
    # the lead files the request on Requests (vision's: the demo keeps nlp's own h100 request
    # open, and a second open request for one queue and flavor is refused)
    log_in(page, server, "vision-lead", world.password("vision-lead"))
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Requests").click()
    page.get_by_label("Queue", exact=True).select_option(label="vision")
    page.get_by_label("Flavor").select_option(label="h100")
    page.get_by_label("Guarantee (GPUs or MIG instances)").fill("34")
    page.get_by_label("Deserved (GPUs or MIG instances)").fill("53")
    page.get_by_label("Capability (GPUs or MIG instances)").fill("160")
    page.get_by_label("Justification").fill("Two more guaranteed GPUs for the eval harness.")
    shoot(page, screenshots, "lead-requests-filled")
    page.get_by_role("button", name="Submit for approval").click()
    page.wait_for_url(re.compile(r".*/requests/\d+/$"))
    asked = QuotaRequest.objects.get(justification__startswith="Two more")
    assert page.locator("h1").inner_text().startswith(f"Request #{asked.pk}")
    assert "submitted" in page.locator("h1").inner_text()
    log_out(page)

    # the admin sees it waiting, opens it, replays recent demand and approves it
    log_in(page, server, "admin", world.password("admin"))
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Approvals").click()
    page.get_by_role("link", name=f"#{asked.pk}", exact=True).click()
    assert page.get_by_text("Approving it breaks no quota rule").is_visible()
    assert page.get_by_role("heading", name="Whose deserved share moves").is_visible()
    page.get_by_label("Days to replay").fill("5")
    page.get_by_role("button", name="Replay recent demand").click()
    # htmx polls the run: a progress bar while it runs, then each team's change in waits
    page.get_by_text(re.compile(r"What-if #\d+ (replayed|failed)")).wait_for(timeout=60_000)
    assert page.locator("#what-if progress").count() == 0
    result = page.locator("#what-if").inner_text()
    assert "replayed" in result, result
    page.locator("#what-if-chart .main-svg").first.wait_for()
    shoot(page, screenshots, "admin-approval-with-impact")
    page.get_by_label("Comment").fill("Fits research's guarantee; revisit in June.")
    page.get_by_role("button", name="Approve and apply").click()
    page.wait_for_url(re.compile(r".*/approvals/$"))
    assert page.get_by_text(f"Request #{asked.pk} approved and applied").is_visible()

    # the queue's quota changed on the Queues page
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Queues").click()
    page.get_by_role("link", name="h100").click()
    row = page.locator('tr[data-queue="vision"]')
    assert row.locator('[data-level="guarantee"]').inner_text() == "34 GPUs"
    assert QueueQuota.objects.get(queue__name="vision", flavor__name="h100").guarantee == 34
    shoot(page, screenshots, "admin-queues-after-approval")
    log_out(page)

    # the lead follows it to the end
    log_in(page, server, "vision-lead", world.password("vision-lead"))
    page.goto(f"{server}/requests/{asked.pk}/")
    assert "applied" in page.locator("h1").inner_text()
    assert page.get_by_text("revisit in June").first.is_visible()
    assert problems == []


def test_an_admin_cordons_a_node_from_the_cluster_page(
    world: Any, live_server: Any, browser: Any
) -> None:
    page, problems = open_page(browser)
    log_in(page, live_server.url, "admin", world.password("admin"))
    page.goto(f"{live_server.url}/cluster/?flavor=h100")
    row = page.locator("#node-h100-02")
    row.get_by_text("Change h100-02").click()
    row.get_by_label("Why cordon h100-02").fill("fan replacement")
    row.get_by_role("button", name="Cordon").click()
    page.wait_for_load_state()
    assert page.get_by_text("h100-02 is cordoned").is_visible()
    assert "cordoned: no new placements" in page.locator("#node-h100-02").inner_text()
    assert problems == []


def test_the_heatmap_names_a_gpu_in_words_when_pointed_at(
    world: Any, live_server: Any, browser: Any
) -> None:
    page, problems = open_page(browser)
    log_in(page, live_server.url, "vision-member", world.password("vision-member"))
    page.goto(f"{live_server.url}/fragmentation/?flavor=h100")
    heatmap = page.locator("#gpu-heatmap")
    heatmap.locator(".main-svg").first.wait_for()
    box = heatmap.locator(".nsewdrag").first.bounding_box()
    assert box is not None
    # the top-left cell: h100-00's GPU 0, which nlp holds
    page.mouse.move(box["x"] + 8, box["y"] + 6)
    page.mouse.click(box["x"] + 8, box["y"] + 6)
    page.get_by_text("h100-00 GPU 0").first.wait_for()
    assert "nlp" in page.locator("#gpu-detail").inner_text()
    page.get_by_label("Highlight").select_option("vision")
    assert problems == []


def test_a_new_user_of_the_demo_finds_the_demo_users_on_the_login_page(
    world: Any, live_server: Any, browser: Any, screenshots: Path, settings: Any
) -> None:
    settings.DEBUG = True  # as make demo runs
    page, problems = open_page(browser)
    page.goto(f"{live_server.url}/")
    demo = page.get_by_role("region", name="Demo users")
    assert demo.get_by_role("cell", name="finance-demo").is_visible()
    shoot(page, screenshots, "login-demo")
    password = demo.get_by_role("row", name=re.compile("^finance ")).get_by_role("cell").nth(1)
    log_in(page, live_server.url, "finance", password.inner_text())
    assert page.url == f"{live_server.url}/cost/"
    assert problems == []
