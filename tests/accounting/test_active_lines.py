"""Allocated GPU-hours split into active and idle allocated, checked against a hand count.

The pool of cost_builders (16 h100 GPUs at 2.00 per GPU-hour; guarantees a 6, b 4, c 0), two
hours from T0. Usage and what the utilisation sampler saw (activity windows):

- team-a holds 8 GPUs both hours. Its windows: [T0, T0+30m] 14,400 active GPU-s (4 GPU-h),
  [T0+30m, T0+90m] 14,400 (4 GPU-h, half in each hour), [T0+90m, T0+2h] nothing. So it worked
  6 GPU-h in hour 0 and 2 in hour 1.
- team-b holds 2 GPUs in hour 0, and the sampler saw nothing; a window of b's in hour 1, after
  its interval ended, counts nowhere (activity outside any allocation).
- team-c holds 4 GPUs both hours and works throughout.

| hour | within (active/idle) | reserved idle | above (active/idle)  | pool idle |
|------|----------------------|---------------|----------------------|-----------|
| 0    | a 4.5/1.5, b 0/2     | b 2           | a 1.5/0.5, c 4/0     | 0         |
| 1    | a 1.5/4.5            | b 4           | a 0.5/1.5, c 4/0     | 0         |
| sum  | 6 / 8                | 6             | 10 / 2               | 0         |

a's active GPU-hours are shared between its within (6) and above (2) lines in proportion:
6 x 6/8 = 4.5 and 1.5 in hour 0, 6 x 2/8 = 1.5 and 0.5 in hour 1. Idle allocated (waste): a
8 GPU-h (16.00), b 2 (4.00), c 0.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from decimal import Decimal

import pytest
from cost_builders import T0, H, Pool, use
from hypothesis import given
from hypothesis import strategies as st
from rest_framework.test import APIClient

from gpupool.accounting.actions import do_roll_up_usage
from gpupool.accounting.attribution import QueueLines, split_active
from gpupool.accounting.models import FlavorDay, FlavorHour, QueueDay, UsageDay, WorkloadDay
from gpupool.utilization.models import ActivityWindow
from gpupool.workloads.models import Workload

M = H / 60
SPLIT = ("used_within_guarantee_active", "used_within_guarantee_idle", "reserved_idle",
         "used_above_guarantee_active", "used_above_guarantee_idle", "pool_idle")  # fmt: skip


def saw(workload: Workload, start: datetime, end: datetime, active: float) -> None:
    """The sampler saw ``workload`` work ``active`` GPU-seconds from ``start`` to ``end``."""
    held = 8.0 * (end - start).total_seconds()
    ActivityWindow.objects.create(
        workload=workload, tenant=workload.queue.tenant, queue=workload.queue, started_at=start,
        ended_at=end, gpus=8, observed_gpu_seconds=held, active_gpu_seconds=active,
        mean_utilization=100.0 * active / held, last_active_at=end if active else None,
    )  # fmt: skip


@pytest.fixture
def worked(pool: Pool) -> Pool:
    """The two hours of the table, with their activity, rolled up."""
    do_roll_up_usage(until=T0)
    a = use(pool, "a", 8, T0)
    b = use(pool, "b", 2, T0, T0 + H)
    c = use(pool, "c", 4, T0)
    saw(a, T0, T0 + 30 * M, 14_400)
    saw(a, T0 + 30 * M, T0 + 90 * M, 14_400)
    saw(a, T0 + 90 * M, T0 + 2 * H, 0)
    saw(b, T0 + H, T0 + 2 * H, 3_600)
    saw(c, T0, T0 + 2 * H, 4 * 7_200)
    do_roll_up_usage(until=T0 + 2 * H)
    return pool


def numbers(row: object, fields: tuple[str, ...]) -> tuple[float, ...]:
    return tuple(float(getattr(row, name)) for name in fields)


def test_each_hours_used_lines_split_as_counted_by_hand(worked: Pool) -> None:
    hours = [numbers(row, SPLIT) for row in FlavorHour.objects.order_by("hour")]

    assert hours == [(4.5, 3.5, 2, 5.5, 0.5, 0), (1.5, 4.5, 4, 4.5, 1.5, 0)]


def test_the_split_lines_still_add_up_to_capacity_times_hours(worked: Pool) -> None:
    day = FlavorDay.objects.get()

    assert numbers(day, SPLIT) == (6, 8, 6, 10, 2, 0)
    assert sum(getattr(day, line) for line in SPLIT) == day.capacity == 32
    for row in [*FlavorHour.objects.all(), day]:
        assert row.used_within_guarantee_active + row.used_within_guarantee_idle == (
            row.used_within_guarantee
        )
        assert row.used_above_guarantee_active + row.used_above_guarantee_idle == (
            row.used_above_guarantee
        )
        assert row.used_active + row.used_idle == row.used
        assert all(getattr(row, line) >= 0 for line in SPLIT)


def test_each_teams_waste_matches_the_hand_count(worked: Pool) -> None:
    queues = {row.queue.name: row for row in QueueDay.objects.select_related("queue")}
    usage = {row.tenant.name: row for row in UsageDay.objects.select_related("tenant")}

    assert {name: float(row.used_idle) for name, row in queues.items()} == {
        "team-a": 8, "team-b": 2, "team-c": 0}  # fmt: skip
    assert numbers(queues["team-a"], ("used_within_guarantee_active", "used_above_guarantee_idle"))\
        == (6, 2)  # fmt: skip
    assert {name: (float(row.active_gpu_hours), float(row.idle_gpu_hours), float(row.idle_cost))
            for name, row in usage.items()} == {
        "a": (8, 8, 16), "b": (0, 2, 4), "c": (8, 0, 0)}  # fmt: skip
    assert sorted(
        (row.tenant_id, float(row.active_gpu_hours), float(row.idle_gpu_hours))
        for row in WorkloadDay.objects.all()
    ) == sorted(
        (row.tenant_id, float(row.active_gpu_hours), float(row.idle_gpu_hours))
        for row in usage.values()
    )


def test_the_reports_carry_the_split_in_json_and_csv(
    worked: Pool, client_as: Callable[[str], APIClient]
) -> None:
    finance = client_as("finance")
    query = "start=2026-03-10&end=2026-03-10&period=day"

    usage = finance.get(f"/api/v1/reports/usage/?{query}&by=tenant").json()["results"]
    capacity = finance.get(f"/api/v1/reports/capacity/?{query}").json()["results"]
    csv = finance.get(f"/api/v1/reports/attribution/?{query}&by=queue&format=csv")

    assert [(r["tenant"], r["idle_gpu_hours"], r["idle_cost"]) for r in usage] == [
        ("a", "8.0000", "16.0000"),
        ("b", "2.0000", "4.0000"),
        ("c", "0.0000", "0.0000"),
    ]
    (day,) = capacity
    assert sum(Decimal(day[line]) for line in SPLIT) == Decimal(day["capacity"]) == 32
    lines = b"".join(csv.streaming_content).decode().splitlines()
    header = lines[0].split(",")
    assert {"used_within_guarantee_idle", "used_above_guarantee_active", "used_idle_cost"} <= (
        set(header)
    )
    a = dict(
        zip(header, next(line for line in lines if ",team-a," in line).split(","), strict=True)
    )
    assert (a["used_active"], a["used_idle"], a["used_idle_cost"]) == (
        "8.0000",
        "8.0000",
        "16.0000",
    )


def test_a_leads_workload_report_says_what_each_workload_wasted(
    worked: Pool, client_as: Callable[[str], APIClient]
) -> None:
    rows = client_as("lead").get("/api/v1/reports/workloads/?start=2026-03-10&end=2026-03-10")

    assert [(r["tenant"], r["active_gpu_hours"], r["idle_gpu_hours"]) for r in rows.json()[
        "results"]] == [("a", "8.0000", "8.0000")]  # fmt: skip


amounts = st.decimals(min_value=0, max_value=1000, places=4)


@given(within=amounts, above=amounts, active=amounts)
def test_the_split_is_never_negative_and_adds_up_to_the_lines(
    within: Decimal, above: Decimal, active: Decimal
) -> None:
    lines = QueueLines(allocated=within + above, guarantee=within, used_within_guarantee=within,
                       reserved_idle=Decimal(0), used_above_guarantee=above,
                       pool_idle_share=Decimal(0))  # fmt: skip
    split = split_active(lines, active)

    assert all(amount >= 0 for amount in split.amounts())
    assert split.used_active == min(active, within + above)
    assert split.used_within_guarantee_active + split.used_within_guarantee_idle == within
    assert split.used_above_guarantee_active + split.used_above_guarantee_idle == above
    assert split.used_within_guarantee_active + split.used_above_guarantee_active == (
        split.used_active
    )
