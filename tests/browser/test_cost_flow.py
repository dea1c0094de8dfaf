"""Finance's walk through the Cost page in headless Chromium: it lands there, picks the month
of the demo's rolled-up usage, exports the per-team CSV from the reports API, and the CSV's
totals are the page's (screenshot at 1366x768 in ``build/screenshots/``)."""

from __future__ import annotations

import csv
from decimal import Decimal
from pathlib import Path
from typing import Any

from django.template.defaultfilters import floatformat
from test_pages_in_chromium import log_in, open_page, shoot

from gpupool.accounting.actions import do_open_usage, do_roll_up_usage
from gpupool.dashboard.templatetags.dashboard import gpu_hours
from gpupool.workloads.models import Workload

# The page's totals row: each column with the CSV column it sums, and how the page writes it.
TOTALS = {
    "used": gpu_hours,
    "used_within_guarantee": gpu_hours,
    "reserved_idle": gpu_hours,
    "used_above_guarantee": gpu_hours,
    "used_idle": gpu_hours,
    "used_cost": lambda value: floatformat(value, 2),
    "reserved_idle_cost": lambda value: floatformat(value, 2),
}


def roll_up_the_running_work(world: Any) -> str:
    """Usage of the demo's running workloads since they started (what the control loop
    records), rolled up to now; the month of the first hour counted."""
    first = world.now
    for workload in Workload.objects.filter(state="running").prefetch_related("pod_sets"):
        started = workload.started_at or world.now
        for pod_set in workload.pod_sets.all():
            gpus = pod_set.count * pod_set.gpus
            do_open_usage(workload, flavor=pod_set.flavor, gpus=gpus, at=started)
        first = min(first, started)
    do_roll_up_usage(until=world.now)
    return str(first.strftime("%Y-%m"))


def test_finance_exports_the_csv_and_its_totals_match_the_page(
    world: Any, live_server: Any, browser: Any, screenshots: Path
) -> None:
    month = roll_up_the_running_work(world)
    page, problems = open_page(browser)
    log_in(page, live_server.url, "finance", world.password("finance"))
    assert page.url.endswith("/cost/")
    page.get_by_label("Month", exact=True).fill(month)
    page.get_by_role("button", name="Show").click()
    page.wait_for_url(f"**/cost/?month={month}")
    page.wait_for_selector("#trend-chart .main-svg")
    assert "healthy capacity" in page.locator("#reconciliation").inner_text()
    shoot(page, screenshots, "finance-cost-month")

    with page.expect_download() as download:
        page.get_by_role("link", name="Per team, the month").click()
    with open(download.value.path(), newline="", encoding="utf-8") as exported:
        rows = list(csv.DictReader(exported))
    assert rows and {row["period"] for row in rows} == {month}
    shown_teams = page.locator("#cost-teams tbody tr").count()
    assert shown_teams == len(rows)
    for column, written in TOTALS.items():
        total = sum((Decimal(row[column]) for row in rows), Decimal(0))
        cell = page.locator(f'#team-totals td[data-column="{column}"]').inner_text()
        assert cell == written(total), column
    assert problems == []
