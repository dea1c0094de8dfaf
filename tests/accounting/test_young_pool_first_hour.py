"""A pool, or a flavor, that begins mid-hour has healthy capacity only from then: its first
hour's capacity (and so its pool idle) counts the part of the hour it existed, not the whole
hour. Capacity is known from the roll-up's samples (it records each flavor's healthy GPUs at
every run); before a flavor's first sample it counts from the flavor's first usage when that
came earlier (usage recorded before the roll-up first ran), and is nothing before either."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from cost_builders import T0, H, Pool, use
from domain_builders import node

from gpupool.accounting.actions import do_roll_up_usage
from gpupool.accounting.models import FlavorHour
from gpupool.inventory.actions import do_save_flavor
from gpupool.inventory.models import Flavor

pytestmark = pytest.mark.django_db

LINES = ("used_within_guarantee", "reserved_idle", "used_above_guarantee", "pool_idle")


def hour_of(flavor: Flavor, hour: object) -> FlavorHour:
    return FlavorHour.objects.get(flavor=flavor, hour=hour)


def test_a_pool_that_starts_at_twenty_past_has_forty_minutes_of_capacity_in_its_first_hour(
    pool: Pool,
) -> None:
    """16 GPUs from T0+20m (the first roll-up sees them), 2 of them used from T0+30m."""
    do_roll_up_usage(until=T0 + timedelta(minutes=20))
    use(pool, "c", 2, T0 + timedelta(minutes=30))
    do_roll_up_usage(until=T0 + 2 * H)

    first, second = hour_of(pool.h100, T0), hour_of(pool.h100, T0 + H)
    assert first.capacity == Decimal("10.6667")  # 16 GPUs x 40 minutes
    assert first.used == 1
    # Idle is what was there and unused: 40 minutes' 16 GPUs less the 1 GPU-hour used (the
    # guarantees of a and b, 10 GPU-hours, reserve nearly all of it; the rest is pool idle).
    assert first.reserved_idle + first.pool_idle == Decimal("9.6667")
    assert sum(getattr(first, line) for line in LINES) == first.capacity
    assert second.capacity == 16  # whole hours after the first are whole


def test_a_flavor_added_mid_hour_counts_capacity_from_when_it_was_seen(pool: Pool) -> None:
    """The pool has run for an hour when an a100 node joins at T0+1h15m."""
    use(pool, "a", 4, T0)
    do_roll_up_usage(until=T0 + H)
    a100 = do_save_flavor(
        Flavor(name="a100", sharing="exclusive", gpu_memory_gb=80, hourly_price=Decimal("1")),
        acting_user=None,
        at=T0,
    )
    node("m1", a100, gpus=8)
    do_roll_up_usage(until=T0 + H + timedelta(minutes=15))
    do_roll_up_usage(until=T0 + 3 * H)

    assert hour_of(a100, T0 + H).capacity == 6  # 8 GPUs x 45 minutes
    assert hour_of(a100, T0 + H).pool_idle == 6
    assert hour_of(a100, T0 + 2 * H).capacity == 8
    assert hour_of(pool.h100, T0 + H).capacity == 16


def test_usage_recorded_before_the_first_sample_still_has_capacity_under_it(
    pool: Pool,
) -> None:
    """Usage from T0+30m, rolled up for the first time hours later: the first sample's
    capacity counts from the first usage (the flavor existed then), not from the hour's
    start, and nothing of it before."""
    use(pool, "a", 4, T0 + timedelta(minutes=30), T0 + 2 * H)
    do_roll_up_usage(until=T0 + 3 * H)

    first = hour_of(pool.h100, T0)
    assert first.capacity == 8  # 16 GPUs x 30 minutes
    assert first.used == 2
    assert hour_of(pool.h100, T0 + H).capacity == 16
