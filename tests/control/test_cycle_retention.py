"""The cycle log's retention: a row per scheduling cycle, every few seconds, is kept whole for
``GPUPOOL_CYCLE_RETENTION_DAYS``; older hours are thinned to the cycles the charts over time
read (the last succeeded cycle of each hour with each charted part of the record), and the
newest cycle of each kind something reads the last of is kept whatever its age."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.utils import timezone
from domain_builders import flavor, priority_class, queue, tenant

from gpupool.accounting.actions import do_record_preemption
from gpupool.accounting.models import PreemptionEvent
from gpupool.control import runner
from gpupool.control.actions import do_thin_cycles
from gpupool.control.choices import CycleStatus
from gpupool.control.models import SchedulingCycle
from gpupool.workloads.actions import PodSetSpec, do_submit_workload

pytestmark = pytest.mark.django_db

CUT = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
CHARTED = {"queues": {}, "counts": {}}
SAMPLED = {"queues": {}, "fragmentation": {}}


def cycle(at: datetime, status: str = CycleStatus.SUCCEEDED, outcome: Any = None,
          totals: Any = None) -> int:  # fmt: skip
    row = SchedulingCycle.objects.create(
        started_at=at,
        finished_at=None if status == CycleStatus.RUNNING else at + timedelta(seconds=1),
        status=status,
        outcome=CHARTED if outcome is None else outcome,
        totals=totals or {},
    )
    return row.pk


def left() -> set[int]:
    return set(SchedulingCycle.objects.values_list("id", flat=True))


def test_an_old_hour_keeps_its_last_succeeded_cycle_of_each_charted_part() -> None:
    hour = CUT - timedelta(hours=5)
    early = cycle(hour + timedelta(minutes=1), outcome=SAMPLED)  # the hour's last sample
    queues_only = [cycle(hour + timedelta(minutes=m)) for m in (2, 3, 4)]
    failed_later = cycle(hour + timedelta(minutes=50), status=CycleStatus.FAILED, outcome={})
    skipped = cycle(hour + timedelta(minutes=55), status=CycleStatus.SKIPPED, outcome={})
    next_hour = [cycle(hour + timedelta(hours=1, minutes=m)) for m in (0, 30)]
    recent = [cycle(CUT + timedelta(minutes=m)) for m in (1, 2, 3)]  # kept whole
    cycle(CUT + timedelta(minutes=4), totals={"cycles": 9})

    deleted = do_thin_cycles(before=CUT)

    kept = {early, queues_only[-1], next_hour[-1], *recent}
    assert left() - {SchedulingCycle.objects.latest("started_at", "id").pk} == kept
    assert deleted == 2 + 2 + 1  # two of the hour's queue samples, the failed and skipped,
    # the next hour's first; and nothing more when it runs again
    assert failed_later not in left() and skipped not in left()
    assert do_thin_cycles(before=CUT) == 0


def test_the_cut_is_rounded_down_to_the_hour_so_an_hour_is_thinned_whole() -> None:
    hour = CUT - timedelta(hours=1)
    inside = [cycle(hour + timedelta(minutes=m)) for m in (10, 20, 40)]
    cycle(CUT + timedelta(hours=1))  # the newest

    assert do_thin_cycles(before=hour + timedelta(minutes=30)) == 0  # the hour is not over
    assert do_thin_cycles(before=CUT + timedelta(minutes=59)) == 2
    assert left() & set(inside) == {inside[-1]}


def test_the_newest_cycles_are_kept_whatever_their_age() -> None:
    """A loop stopped longer than the retention: the health check, ``/metrics`` and the pool's
    clock still read its last cycles."""
    old = CUT - timedelta(days=30)
    carried = cycle(old, totals={"cycles": 3})
    succeeded = cycle(old + timedelta(minutes=1), outcome={"counts": {}})
    failed = cycle(old + timedelta(minutes=2), status=CycleStatus.FAILED, outcome={})
    skipped = cycle(old + timedelta(minutes=3), status=CycleStatus.SKIPPED, outcome={})
    running = cycle(old + timedelta(minutes=4), status=CycleStatus.RUNNING, outcome={})

    assert do_thin_cycles(before=CUT) == 1  # the failed one: the newest of nothing
    assert failed not in left()
    assert left() == {carried, succeeded, skipped, running}
    again = cycle(CUT + timedelta(minutes=1), totals={"cycles": 4})  # the loop runs again
    assert do_thin_cycles(before=CUT) == 3
    assert left() == {carried, again}  # the old hour's last sample of the queues


def test_a_bounded_call_decides_only_on_hours_it_read_whole_and_the_next_goes_on() -> None:
    first, second = CUT - timedelta(hours=3), CUT - timedelta(hours=2)
    a = [cycle(first + timedelta(minutes=m)) for m in (1, 2, 3)]
    b = [cycle(second + timedelta(minutes=m)) for m in (1, 2, 3)]
    cycle(CUT + timedelta(minutes=1))

    # Read 4 rows at a time: the first hour whole, then from the second hour's start on; at
    # most 1 x 3 rows deleted a call.
    assert do_thin_cycles(before=CUT, batch=3, batches=1, page=4) == 3
    assert left() & {*a, *b} == {a[-1], b[1], b[-1]}
    assert do_thin_cycles(before=CUT, batch=3, batches=1, page=4) == 1
    assert left() & {*a, *b} == {a[-1], b[-1]}


def test_an_hour_of_more_cycles_than_a_page_is_read_whole() -> None:
    hour = CUT - timedelta(hours=3)
    crowded = [cycle(hour + timedelta(minutes=m)) for m in range(6)]
    cycle(CUT + timedelta(minutes=1))

    assert do_thin_cycles(before=CUT, page=2) == 5
    assert left() & set(crowded) == {crowded[-1]}


def test_a_preemption_keeps_its_record_when_its_cycle_is_thinned() -> None:
    h100 = flavor("h100", hourly_price=Decimal("2.5"))
    priority_class("normal", default=True)
    team = queue("team-a", parent=queue("root"), tenant=tenant("a"))
    victim = do_submit_workload(
        "victim", queue=team, pod_sets=[PodSetSpec(1, gpus=4, flavor=h100)], at=CUT
    )
    hour = CUT - timedelta(hours=2)
    evicting = SchedulingCycle.objects.get(pk=cycle(hour + timedelta(minutes=1)))
    cycle(hour + timedelta(minutes=2))
    cycle(CUT + timedelta(minutes=1))
    event = do_record_preemption(
        victim, reason="node-failure", at=hour, gpus_freed=4, lost_gpu_hours=1, cycle=evicting
    )

    assert do_thin_cycles(before=CUT) == 1
    event.refresh_from_db()
    assert (event.cycle_id, event.lost_gpu_hours, event.victim_id) == (None, 1, victim.pk)
    assert PreemptionEvent.objects.count() == 1


def test_the_loop_s_retention_run_thins_the_cycle_log_on_the_wall_clock(settings: Any) -> None:
    """The retention step of ``gpupool loop`` (and of beat's retention task) thins what is
    older than ``GPUPOOL_CYCLE_RETENTION_DAYS`` on the wall clock, which stamps the rows."""
    now = timezone.now()
    old_hour = (now - timedelta(days=9)).replace(minute=0, second=0, microsecond=0)
    old = [cycle(old_hour + timedelta(minutes=m)) for m in (5, 10, 15)]
    fresh = [cycle(now - timedelta(days=6, minutes=m)) for m in (1, 2)]
    cycle(now)
    settings.GPUPOOL_CYCLE_RETENTION_DAYS = 7

    assert runner.thin_cycles() == 2
    assert left() & {*old, *fresh} == {old[-1], *fresh}
