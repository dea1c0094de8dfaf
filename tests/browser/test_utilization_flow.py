"""An admin's walk through the Utilisation page in headless Chromium: the demo's running work
held its GPUs for the last two hours, some of it idle; the page's per-team figures are the
utilisation API's for the same window, the charts are drawn, the window can be changed, and
the workload page draws its sparkline (screenshots at 1366x768 in ``build/screenshots/``)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

from test_pages_in_chromium import log_in, open_page, shoot

from gpupool.accounting.actions import do_close_usage, do_open_usage
from gpupool.dashboard.templatetags.dashboard import gpu_hours
from gpupool.utilization.models import ActivityWindow
from gpupool.workloads.models import Workload

BUSY = {"nlp": 0.9, "vision": 0.25}  # the share of each window a team's GPUs worked (else 0)


def held_for_two_hours(world: Any) -> None:
    """Each running workload held its GPUs for the two hours before ``world.now`` (its usage
    ends then, so the figures stay still while the test runs), the source seeing it work
    ``BUSY`` of each ten minutes."""
    start = world.now - timedelta(hours=2)
    for workload in Workload.objects.filter(state="running").select_related("queue__tenant"):
        gpus = sum(p.count * p.gpus for p in workload.pod_sets.all())
        for pod_set in workload.pod_sets.all():
            do_open_usage(workload, flavor=pod_set.flavor, gpus=pod_set.count * pod_set.gpus,
                          at=start)  # fmt: skip
        do_close_usage(workload, at=world.now)
        busy = BUSY.get(workload.queue.tenant.name if workload.queue.tenant else "", 0.0)
        for step in range(12):
            begins = start + step * timedelta(minutes=10)
            ActivityWindow.objects.create(
                workload=workload, tenant=workload.queue.tenant, queue=workload.queue,
                started_at=begins, ended_at=begins + timedelta(minutes=10), gpus=gpus,
                observed_gpu_seconds=gpus * 600.0, active_gpu_seconds=gpus * 600.0 * busy,
                mean_utilization=80.0 * busy,
            )  # fmt: skip


def test_an_admins_utilisation_page_shows_the_apis_figures(
    world: Any, live_server: Any, browser: Any, screenshots: Path
) -> None:
    held_for_two_hours(world)
    page, problems = open_page(browser)
    log_in(page, live_server.url, "admin", world.password("admin"))
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Utilisation").click()
    page.wait_for_selector("#pool-chart .main-svg")
    page.wait_for_selector("#team-chart .main-svg")
    shoot(page, screenshots, "admin-utilisation-window")

    # the API's figures for the window the page shows (its CSV link's), as JSON
    link = urlsplit(page.locator("#csv-teams").get_attribute("href") or "")
    window = {k: v for k, v in parse_qsl(link.query) if k != "format"}
    answer = page.request.get(f"{live_server.url}{link.path}?{urlencode(window)}")
    assert answer.ok
    figures = {row["tenant"]: row for row in answer.json()}
    for team in ("nlp", "vision"):
        row = page.locator(f'#utilization-teams tr[data-tenant="{team}"]')
        for column in ("allocated_gpu_hours", "active_gpu_hours", "idle_gpu_hours"):
            cell = row.locator(f'td[data-column="{column}"]').inner_text()
            assert cell == gpu_hours(figures[team][column]), (team, column)
    assert figures["nlp"]["active_share"] > figures["vision"]["active_share"]
    assert page.locator("#utilization-wasters tbody tr").count() > 0

    page.get_by_label("Window", exact=True).select_option("6h")
    page.get_by_role("button", name="Show").click()
    page.wait_for_url("**/utilization/?window=6h")
    page.wait_for_selector("#pool-chart .main-svg")

    workload = Workload.objects.filter(queue__tenant__name="vision", state="running").first()
    assert workload is not None
    page.locator("#utilization-wasters").get_by_role("link", name=workload.qualified_name()).click()
    page.wait_for_url(f"**/workloads/{workload.namespace}/{workload.name}/")
    page.wait_for_selector("#sparkline-chart .main-svg")
    shoot(page, screenshots, "admin-workload-sparkline")
    assert problems == []
