"""Every hour of healthy capacity lands in exactly one of four lines, checked by hand.

The period: four hours from T0. Half-way (T0 + 2 h) three things change at once: team-b's
guarantee goes from 4 to 10 GPUs, the price from 2.00 to 3.00, and four GPUs of n2 fail, so the
healthy capacity drops from 16 to 12 while 16 GPUs are guaranteed: every guarantee is scaled by
12 / 16 (team-a 4.5, team-b 7.5).

Usage: team-a 4 GPUs throughout; team-b 2 GPUs in hour 0, then 5 GPUs from hour 2 (still
running at the end); team-c 4 GPUs in hours 0 and 1.

| hour | capacity | within guarantee | reserved idle     | above guarantee | pool idle |
|------|----------|------------------|-------------------|-----------------|-----------|
| 0    | 16       | a 4, b 2         | a 2, b 2          | c 4             | 2         |
| 1    | 16       | a 4              | a 2, b 4          | c 4             | 2         |
| 2    | 12       | a 4, b 5         | a 0.5, b 2.5      | 0               | 0         |
| 3    | 12       | a 4, b 5         | a 0.5, b 2.5      | 0               | 0         |
| sum  | 56       | 28               | 16                | 8               | 4         |

Costs: hours 0-1 at 2.00 and hours 2-3 at 3.00, so capacity costs 32 x 2 + 24 x 3 = 136.
"""

from __future__ import annotations

from decimal import Decimal

import pytest
from cost_builders import T0, H, Pool

from gpupool.accounting.models import FlavorDay, FlavorHour, QueueDay, QueueHour

pytestmark = pytest.mark.django_db

LINES = ("used_within_guarantee", "reserved_idle", "used_above_guarantee", "pool_idle")


def test_the_four_lines_of_each_hour_are_the_hand_computed_ones(period: Pool) -> None:
    hours = FlavorHour.objects.order_by("hour").values_list("capacity", *LINES)
    assert [tuple(int(v) if v == int(v) else float(v) for v in row) for row in hours] == [
        (16, 6, 4, 4, 2),
        (16, 4, 6, 4, 2),
        (12, 9, 3, 0, 0),
        (12, 9, 3, 0, 0),
    ]


def test_the_period_adds_up_to_capacity_times_hours_and_no_line_is_negative(
    period: Pool,
) -> None:
    day = FlavorDay.objects.get()
    assert day.capacity == 56
    assert [getattr(day, line) for line in LINES] == [28, 16, 8, 4]
    assert sum(getattr(day, line) for line in LINES) == day.capacity
    for row in [*FlavorHour.objects.all(), *QueueHour.objects.all()]:
        assert all(getattr(row, line) >= 0 for line in LINES if hasattr(row, line))
    for hour in FlavorHour.objects.all():
        assert sum(getattr(hour, line) for line in LINES) == hour.capacity


def test_guarantees_are_scaled_to_the_healthy_capacity_after_the_failure(period: Pool) -> None:
    scales = list(FlavorHour.objects.order_by("hour").values_list("guarantee_scale", flat=True))
    assert scales == [1, 1, Decimal("0.75"), Decimal("0.75")]
    late = QueueHour.objects.filter(hour=T0 + 3 * H).order_by("queue__name")
    assert [(row.queue.name, row.guarantee) for row in late] == [
        ("team-a", Decimal("4.5")),
        ("team-b", Decimal("7.5")),
    ]


def test_each_queue_is_charged_its_lines_at_the_price_of_each_hour(period: Pool) -> None:
    rows = {row.queue.name: row for row in QueueDay.objects.select_related("queue")}
    a, b, c = rows["team-a"], rows["team-b"], rows["team-c"]
    assert (a.used, a.used_within_guarantee, a.reserved_idle, a.used_above_guarantee) == (
        16,
        16,
        5,
        0,
    )
    assert (a.used_cost, a.reserved_idle_cost) == (8 * 2 + 8 * 3, 4 * 2 + 1 * 3)
    assert (b.used, b.used_within_guarantee, b.reserved_idle) == (12, 12, 11)
    assert (b.used_cost, b.reserved_idle_cost) == (2 * 2 + 10 * 3, 6 * 2 + 5 * 3)
    assert (c.used, c.used_above_guarantee, c.used_above_guarantee_cost) == (8, 8, 16)


def test_the_costs_of_the_lines_add_up_to_the_cost_of_the_capacity(period: Pool) -> None:
    day = FlavorDay.objects.get()
    costs = [getattr(day, f"{line}_cost") for line in LINES]
    assert costs == [74, 38, 16, 8]
    assert sum(costs) == day.capacity_cost == 136


def test_pool_idle_can_be_shared_out_in_proportion_to_each_hours_use(period: Pool) -> None:
    # Hour 0: 2 idle among 10 used (a 4, b 2, c 4); hour 1: 2 idle among 8 (a 4, c 4).
    shares = {
        row.queue.name: (row.pool_idle_share, row.pool_idle_share_cost)
        for row in QueueDay.objects.select_related("queue")
    }
    assert shares == {
        "team-a": (Decimal("1.8"), Decimal("3.6")),
        "team-b": (Decimal("0.4"), Decimal("0.8")),
        "team-c": (Decimal("1.8"), Decimal("3.6")),
    }
    day = FlavorDay.objects.get()
    assert (day.pool_idle_shared, day.pool_idle_shared_cost) == (day.pool_idle, day.pool_idle_cost)
