"""What B5's clients ask, shared by ``b5_api_load.py`` (under load, through gunicorn) and
``b5_request_cost.py`` (one request at a time, in process): the seeded year's users per role
and the API requests, by the names their statistics carry."""

from __future__ import annotations

from datetime import date, timedelta

USERNAMES = {
    "admin": "b5-admin",
    "finance": "b5-finance",
    "lead": "b5-lead-t000",
    "member": "b5-member-t000",
}

# (name, route under /api/v1/): the lists a role asks when the API has them.
LISTS = (("queues", "queues"), ("preemption events", "preemptions"), ("workloads", "workloads"))


def fixed_requests(last: date) -> list[tuple[str, str]]:
    """The reports, usage and directory requests, for the year ending ``last``."""
    year = f"start={last - timedelta(days=364)}&end={last}"
    month = f"start={last - timedelta(days=29)}&end={last}"
    return [
        ("reports/usage by tenant, year", f"/api/v1/reports/usage/?{year}&by=tenant"),
        (
            "reports/usage by queue and class, month",
            f"/api/v1/reports/usage/?{month}&by=queue,priority_class",
        ),
        ("reports/usage per day, month", f"/api/v1/reports/usage/?{month}&period=day&by=tenant"),
        (
            "reports/attribution by tenant, year",
            f"/api/v1/reports/attribution/?{year}&by=tenant&share_idle=true",
        ),
        ("reports/attribution by queue, month", f"/api/v1/reports/attribution/?{month}"),
        ("reports/capacity, year", f"/api/v1/reports/capacity/?{year}&share_idle=1"),
        ("reports/workloads, month", f"/api/v1/reports/workloads/?{month}"),
        ("usage intervals", "/api/v1/usage/"),
        ("usage intervals of a queue", "/api/v1/usage/?queue=t000"),
        ("tenants", "/api/v1/tenants/"),
        ("flavors", "/api/v1/flavors/"),
        ("memberships", "/api/v1/memberships/"),
    ]
