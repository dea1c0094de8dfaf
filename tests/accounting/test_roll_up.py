"""The roll-up counts each hour once, after it has passed; running it again changes nothing."""

from __future__ import annotations

from datetime import date, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from cost_builders import T0, H, Pool, use
from django.test import override_settings
from django.utils import timezone

from gpupool.accounting.actions import do_close_usage, do_roll_up_usage
from gpupool.accounting.models import (
    FlavorDay,
    FlavorHour,
    QueueDay,
    QueueHour,
    RollUpState,
    UsageDay,
    UsageHour,
    WorkloadDay,
)
from gpupool.accounting.periods import accounting_zone, hour_start
from gpupool.accounting.tasks import roll_up_usage_task

pytestmark = pytest.mark.django_db

TABLES = (UsageHour, UsageDay, WorkloadDay, FlavorHour, FlavorDay, QueueHour, QueueDay)


def everything() -> dict[str, list[dict[str, Any]]]:
    """Every roll-up row, without ids, in a stable order."""
    return {
        model.__name__: sorted(
            (
                {k: v for k, v in row.items() if k != "id"}
                for row in model.objects.values()  # type: ignore[attr-defined]
            ),
            key=repr,
        )
        for model in TABLES
    }


def test_running_the_roll_up_again_changes_nothing(pool: Pool) -> None:
    use(pool, "a", 4, T0, T0 + 3 * H)
    use(pool, "c", 2, T0 + H / 2)
    first = do_roll_up_usage(until=T0 + 5 * H)
    before = everything()
    again = do_roll_up_usage(until=T0 + 5 * H)
    assert (first.hours, again.hours, again.rows) == (5, 0, 0)
    assert everything() == before


def test_an_hour_is_counted_only_once_it_has_passed(pool: Pool) -> None:
    use(pool, "a", 4, T0)
    do_roll_up_usage(until=T0 + 2 * H + timedelta(minutes=59))
    assert list(UsageHour.objects.values_list("hour", flat=True)) == [T0, T0 + H]
    assert RollUpState.objects.get().rolled_until == T0 + 2 * H


def test_an_open_interval_is_counted_for_every_finished_hour_and_goes_on_after(
    pool: Pool,
) -> None:
    job = use(pool, "b", 3, T0 + H / 2)
    do_roll_up_usage(until=T0 + 2 * H)
    assert list(UsageHour.objects.order_by("hour").values_list("gpu_hours", flat=True)) == [
        Decimal("1.5"),
        3,
    ]
    do_close_usage(job, at=T0 + 2 * H + H / 4)
    do_roll_up_usage(until=T0 + 3 * H)
    assert UsageHour.objects.get(hour=T0 + 2 * H).gpu_hours == Decimal("0.75")
    assert WorkloadDay.objects.get(workload=job).gpu_hours == Decimal("5.25")


def test_rolling_up_hour_by_hour_gives_what_one_run_gives(pool: Pool) -> None:
    use(pool, "a", 4, T0, T0 + 3 * H)
    use(pool, "b", 7, T0 + H / 3, T0 + 4 * H)
    use(pool, "c", 1, T0 + 2 * H)
    do_roll_up_usage(until=T0 + 6 * H)
    at_once = everything()
    for model in TABLES:
        model.objects.all().delete()  # type: ignore[attr-defined]
    RollUpState.objects.all().delete()
    for step in range(7):
        do_roll_up_usage(until=T0 + step * H + timedelta(minutes=5))
    assert everything() == at_once


def test_rebuilding_from_a_day_recounts_it_after_a_late_correction(pool: Pool) -> None:
    job = use(pool, "a", 4, T0, T0 + 2 * H)
    do_roll_up_usage(until=T0 + 3 * H)
    job.usage.update(gpus=2)  # a correction made by hand, after the hours were final
    do_roll_up_usage(until=T0 + 3 * H)
    assert UsageDay.objects.get().gpu_hours == 8
    do_roll_up_usage(until=T0 + 3 * H, rebuild_from=T0 + H)
    assert UsageDay.objects.get().gpu_hours == 4
    assert WorkloadDay.objects.get().gpu_hours == 4


def test_days_are_counted_in_the_accounting_time_zone(pool: Pool) -> None:
    # Kolkata is UTC+05:30: its day of 10 March ends at 18:30 UTC.
    start = datetime.fromisoformat("2026-03-10T17:00:00+00:00")
    use(pool, "a", 2, start, start + 3 * H)
    with override_settings(GPUPOOL_ACCOUNTING_TZ="Asia/Kolkata"):
        do_roll_up_usage(until=start + 4 * H)
    days = dict(UsageDay.objects.values_list("day", "gpu_hours"))
    assert days == {date(2026, 3, 10): 3, date(2026, 3, 11): 3}
    hours = list(UsageHour.objects.order_by("hour").values_list("hour", flat=True))
    assert hours[0] == datetime.fromisoformat("2026-03-10T16:30:00+00:00")
    assert RollUpState.objects.get().time_zone == "Asia/Kolkata"


def test_changing_the_accounting_time_zone_recounts_everything(pool: Pool) -> None:
    start = datetime.fromisoformat("2026-03-10T17:00:00+00:00")
    use(pool, "a", 2, start, start + 3 * H)
    do_roll_up_usage(until=start + 4 * H)
    assert dict(UsageDay.objects.values_list("day", "gpu_hours")) == {date(2026, 3, 10): 6}
    with override_settings(GPUPOOL_ACCOUNTING_TZ="Asia/Kolkata"):
        do_roll_up_usage(until=start + 4 * H)
    assert dict(UsageDay.objects.values_list("day", "gpu_hours")) == {
        date(2026, 3, 10): 3,
        date(2026, 3, 11): 3,
    }


def test_the_beat_task_rolls_up_to_the_last_finished_hour(pool: Pool) -> None:
    now = timezone.now()
    use(pool, "a", 1, now - 2 * H)
    roll_up_usage_task.apply()
    assert RollUpState.objects.get().rolled_until == hour_start(now, accounting_zone())
    assert UsageHour.objects.count() == 2
    assert roll_up_usage_task.expires
