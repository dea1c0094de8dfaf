"""The cost reports read the roll-ups: by tenant, queue, flavor and class, per day and month."""

from __future__ import annotations

from datetime import date
from decimal import Decimal
from typing import Any

import pytest
from cost_builders import Pool

from gpupool.accounting.reports import (
    ReportQuery,
    attribution_report,
    capacity_report,
    usage_report,
    workload_report,
)

pytestmark = pytest.mark.django_db

MARCH = ReportQuery(start=date(2026, 3, 1), end=date(2026, 3, 31))


def plain(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows with whole numbers as ints and other Decimals as floats, for readable asserts."""
    return [
        {
            key: (int(value) if value == int(value) else float(value))
            if isinstance(value, Decimal)
            else value
            for key, value in row.items()
        }
        for row in rows
    ]


def test_usage_by_tenant_per_month_is_gpu_hours_and_cost_at_each_hours_price(
    period: Pool,
) -> None:
    rows = usage_report(MARCH, by=["tenant"]).rows()
    # No activity was recorded: every allocated GPU-hour is idle allocated.
    assert plain(rows) == [
        {"period": "2026-03", "tenant": tenant, "gpu_hours": hours, "cost": cost,
         "active_gpu_hours": 0, "idle_gpu_hours": hours, "active_cost": 0, "idle_cost": cost}
        for tenant, hours, cost in (("a", 16, 40), ("b", 12, 34), ("c", 8, 16))
    ]  # fmt: skip


def test_usage_per_day_keeps_every_dimension(period: Pool) -> None:
    query = ReportQuery(start=date(2026, 3, 10), end=date(2026, 3, 10), period="day")
    rows = usage_report(query).rows()
    assert [row["period"] for row in rows] == ["2026-03-10"] * 3
    assert set(rows[0]) == {
        "period",
        "tenant",
        "queue",
        "flavor",
        "priority_class",
        "gpu_hours",
        "cost",
        "active_gpu_hours",
        "idle_gpu_hours",
        "active_cost",
        "idle_cost",
    }
    assert (rows[0]["queue"], rows[0]["flavor"], rows[0]["priority_class"]) == (
        "team-a",
        "h100",
        "normal",
    )


def test_a_caller_scoped_to_tenants_sees_only_their_rows(period: Pool) -> None:
    tenant_a = period.queues["a"].tenant_id
    scoped = ReportQuery(start=MARCH.start, end=MARCH.end, tenants=[tenant_a])
    assert [row["tenant"] for row in usage_report(scoped, by=["tenant"]).rows()] == ["a"]
    assert [row["queue"] for row in attribution_report(scoped).rows()] == ["team-a"]
    assert {row["tenant"] for row in workload_report(scoped).rows()} == {"a"}


def test_filters_keep_the_named_tenants_queues_and_flavors(period: Pool) -> None:
    query = ReportQuery(start=MARCH.start, end=MARCH.end, filters={"queue": ["team-b", "team-c"]})
    assert [row["queue"] for row in usage_report(query, by=["queue"]).rows()] == [
        "team-b",
        "team-c",
    ]
    none = ReportQuery(start=MARCH.start, end=MARCH.end, filters={"flavor": ["a100"]})
    assert usage_report(none).rows() == []


def test_attribution_by_tenant_charges_reserved_idle_to_the_guarantees_holder(
    period: Pool,
) -> None:
    rows = attribution_report(MARCH, by=["tenant"], share_idle=True).rows()
    lines = {
        row["tenant"]: (
            row["used_within_guarantee"],
            row["reserved_idle"],
            row["used_above_guarantee"],
            row["pool_idle_share"],
        )
        for row in rows
    }
    assert lines == {
        "a": (16, 5, 0, Decimal("1.8")),
        "b": (12, 11, 0, Decimal("0.4")),
        "c": (0, 0, 8, Decimal("1.8")),
    }
    costs = {row["tenant"]: row["reserved_idle_cost"] for row in rows}
    assert costs == {"a": 11, "b": 27, "c": 0}


def test_the_capacity_report_adds_up_to_capacity_times_hours(period: Pool) -> None:
    [row] = capacity_report(MARCH, share_idle=True).rows()
    assert plain([row]) == [
        {
            "period": "2026-03",
            "flavor": "h100",
            "capacity": 56,
            "used": 36,
            "used_within_guarantee": 28,
            "reserved_idle": 16,
            "used_above_guarantee": 8,
            "pool_idle": 4,
            "pool_idle_shared": 4,
            # no activity recorded: the used lines are wholly idle allocated
            "used_active": 0,
            "used_idle": 36,
            "used_within_guarantee_active": 0,
            "used_within_guarantee_idle": 28,
            "used_above_guarantee_active": 0,
            "used_above_guarantee_idle": 8,
            "capacity_cost": 136,
            "used_cost": 90,
            "used_within_guarantee_cost": 74,
            "reserved_idle_cost": 38,
            "used_above_guarantee_cost": 16,
            "pool_idle_cost": 8,
            "pool_idle_shared_cost": 8,
            "used_active_cost": 0,
            "used_idle_cost": 90,
            "used_within_guarantee_active_cost": 0,
            "used_within_guarantee_idle_cost": 74,
            "used_above_guarantee_active_cost": 0,
            "used_above_guarantee_idle_cost": 16,
        }
    ]


def test_the_workload_report_puts_the_costliest_first(period: Pool) -> None:
    rows = plain(workload_report(MARCH).rows())
    assert [(row["name"], row["gpu_hours"], row["cost"]) for row in rows] == [
        ("job-1", 16, 40),
        ("job-4", 10, 30),
        ("job-3", 8, 16),
        ("job-2", 2, 4),
    ]
    assert (rows[0]["namespace"], rows[0]["tenant"], rows[0]["queue"]) == ("a", "a", "team-a")


@pytest.mark.parametrize(
    ("start", "end"),
    [(date(2026, 3, 10), date(2026, 3, 10)), (date(2026, 2, 15), date(2026, 3, 31))],
    ids=["a cut month from the days", "a cut month and a whole one"],
)
def test_a_month_reads_the_same_from_its_days_as_from_the_monthly_roll_up(
    period: Pool, start: date, end: date
) -> None:
    query = ReportQuery(start=start, end=end)
    assert usage_report(query).rows() == usage_report(MARCH).rows()
    assert attribution_report(query).rows() == attribution_report(MARCH).rows()
    assert capacity_report(query).rows() == capacity_report(MARCH).rows()


def test_days_outside_the_range_are_left_out(period: Pool) -> None:
    april = ReportQuery(start=date(2026, 4, 1), end=date(2026, 4, 30))
    assert usage_report(april).rows() == []
    assert capacity_report(april).rows() == []
