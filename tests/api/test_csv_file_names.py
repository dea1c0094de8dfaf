"""Every CSV download of the API has a name of its own: the Cost page's "per team, the month"
and "per team, day by day" (the attribution report by tenant, per month and per day) were
both ``attribution-<start>-<end>.csv``, so the second download overwrote or renamed the
first; the per-workload cost report was ``workloads-...``, the workloads list's name."""

from __future__ import annotations

from typing import Any

import pytest

pytestmark = pytest.mark.django_db

DAYS = "start=2026-12-01&end=2026-12-31"
# The Cost page's four downloads (``dashboard.views.cost``'s ``csv`` links), in its order.
COST_PAGE = {
    f"/api/v1/reports/attribution/?{DAYS}&by=tenant&period=month": (
        "attribution-by-tenant-per-month-2026-12-01-2026-12-31"
    ),
    f"/api/v1/reports/attribution/?{DAYS}&by=tenant&period=day": (
        "attribution-by-tenant-per-day-2026-12-01-2026-12-31"
    ),
    f"/api/v1/reports/capacity/?{DAYS}&period=month": "capacity-per-month-2026-12-01-2026-12-31",
    f"/api/v1/reports/workloads/?{DAYS}": "workload-costs-2026-12-01-2026-12-31",
}
EVERY_LIST = [
    *COST_PAGE,
    f"/api/v1/reports/usage/?{DAYS}",
    f"/api/v1/reports/usage/?{DAYS}&period=day&by=tenant,flavor",
    f"/api/v1/reports/attribution/?{DAYS}&share_idle=true",
    f"/api/v1/reports/capacity/?{DAYS}&period=month&share_idle=true",
    "/api/v1/usage/",
    "/api/v1/workloads/",
    "/api/v1/budgets/",
    "/api/v1/quota-requests/",
    "/api/v1/preemptions/",
    "/api/v1/utilization/tenants/",
    "/api/v1/utilization/wasters/",
]


def file_name(client: Any, url: str) -> str:
    """The name ``url`` downloads as CSV under."""
    answer = client.get(url + ("&" if "?" in url else "?") + "format=csv")
    assert answer.status_code == 200, answer.content
    disposition = answer["Content-Disposition"]
    assert disposition.startswith('attachment; filename="') and disposition.endswith('.csv"')
    return disposition.removeprefix('attachment; filename="').removesuffix('.csv"')


def test_the_cost_pages_downloads_have_a_name_each(api_as: Any) -> None:
    client = api_as("admin")
    assert {url: file_name(client, url) for url in COST_PAGE} == COST_PAGE


def test_no_two_csv_downloads_share_a_name(api_as: Any) -> None:
    client = api_as("admin")
    names = [file_name(client, url) for url in EVERY_LIST]
    assert len(set(names)) == len(names), sorted(names)
