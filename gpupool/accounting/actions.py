"""State changes of accounting: opening and closing usage intervals, recording preemptions,
and rolling usage up into the hourly and daily tables the cost reports read."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal
from typing import Any
from zoneinfo import ZoneInfo

from django.core.exceptions import ValidationError
from django.db import models, transaction
from django.db.models import Min, QuerySet, Sum

from gpupool.accounting.attribution import ACTIVE_SPLIT, NO_SPLIT, ZERO
from gpupool.accounting.models import (
    CapacitySample,
    FlavorDay,
    FlavorHour,
    FlavorMonth,
    PreemptionEvent,
    QueueDay,
    QueueHour,
    QueueMonth,
    RollUpState,
    UsageDay,
    UsageHour,
    UsageInterval,
    UsageMonth,
    WorkloadDay,
)
from gpupool.accounting.periods import (
    accounting_zone,
    day_end,
    day_start,
    hour_start,
    hours,
    local_day,
    month_start,
    next_month,
)
from gpupool.accounting.rollup import (
    Histories,
    SegmentCount,
    activity_between,
    count_segment,
    intervals_running_at,
    intervals_starting,
    microseconds,
)
from gpupool.bulk import insert_values
from gpupool.control.models import SchedulingCycle
from gpupool.inventory.models import Flavor, healthy_capacity
from gpupool.workloads.models import Workload


@transaction.atomic
def do_open_usage(
    workload: Workload, *, flavor: Flavor, gpus: Decimal | int, at: datetime
) -> UsageInterval:
    """Start charging ``gpus`` of ``flavor`` to the workload's queue and tenant."""
    interval = UsageInterval(
        workload=workload,
        tenant=workload.queue.tenant,
        queue=workload.queue,
        flavor=flavor,
        priority_class=workload.priority_class,
        gpus=Decimal(str(gpus)),
        started_at=at,
    )
    interval.full_clean()
    interval.save()
    return interval


@transaction.atomic
def do_close_usage(workload: Workload, *, at: datetime) -> int:
    """End the workload's open usage intervals at ``at``; returns how many were closed."""
    open_intervals = UsageInterval.objects.select_for_update().filter(
        workload=workload, ended_at__isnull=True
    )
    for interval in open_intervals:
        if at < interval.started_at:
            raise ValidationError({"ended_at": f"{at} is before the interval's start"})
    return open_intervals.update(ended_at=at)


@transaction.atomic
def do_record_preemption(
    victim: Workload,
    *,
    reason: str,
    at: datetime,
    gpus_freed: Decimal | int,
    lost_gpu_hours: Decimal | int,
    preemptor: Workload | None = None,
    cycle: SchedulingCycle | None = None,
    nodes: Sequence[str] | None = None,
) -> PreemptionEvent:
    """Record that ``victim`` was stopped, by whom or why, what it lost, and on which nodes
    it ran (``nodes``; by default the nodes it is placed on now, one query)."""
    names = (
        set(victim.placements.values_list("node__name", flat=True)) if nodes is None else set(nodes)
    )
    event = PreemptionEvent(
        at=at,
        reason=reason,
        victim=victim,
        victim_queue=victim.queue,
        victim_tenant=victim.queue.tenant,
        preemptor=preemptor,
        preemptor_queue=preemptor.queue if preemptor else None,
        preemptor_tenant=preemptor.queue.tenant if preemptor else None,
        gpus_freed=Decimal(str(gpus_freed)),
        lost_gpu_hours=Decimal(str(lost_gpu_hours)),
        cycle=cycle,
        nodes=sorted(names),
    )
    event.full_clean()
    event.save()
    return event


# ----------------------------------------------------------------------------- roll-ups


@dataclass(frozen=True)
class RollUp:
    """What one roll-up run did: the hours it made final and the rows it wrote."""

    hours: int
    rows: int
    rolled_until: datetime | None


@transaction.atomic
def do_roll_up_usage(*, until: datetime, rebuild_from: datetime | None = None) -> RollUp:
    """Roll usage up to the last accounting hour that has ended by ``until`` (the beat task
    passes now): GPU-hours and cost per hour and day by tenant, queue, flavor and class, per
    workload and day, and each flavor's four attribution lines.

    Incremental and idempotent: an hour is counted once, after it has passed, and is final
    from then on, so running again with the same ``until`` changes nothing. Each run also
    records each flavor's healthy capacity as observed at ``until`` (when it changed). A
    change of ``GPUPOOL_ACCOUNTING_TZ`` recounts everything; ``rebuild_from`` recounts from the
    start of that accounting day (after usage was corrected by hand).
    """
    zone = accounting_zone()
    state, _ = RollUpState.objects.select_for_update().get_or_create(
        name="usage", defaults={"time_zone": zone.key}
    )
    _observe_capacity(until)
    if state.time_zone != zone.key:
        _forget_from(None)
        state.rolled_until, state.time_zone, state.version = None, zone.key, uuid.uuid4()
    elif rebuild_from is not None and state.rolled_until is not None:
        restart = day_start(local_day(rebuild_from, zone), zone)
        if restart < state.rolled_until:
            _forget_from(restart)
            state.rolled_until, state.version = restart, uuid.uuid4()
    final = hour_start(until, zone)
    start = state.rolled_until or _first_hour(zone)
    if start is None or start >= final:
        state.save()
        return RollUp(hours=0, rows=0, rolled_until=state.rolled_until)
    histories = Histories.load()
    carry = intervals_running_at(start)
    cursor, counted, rows = start, 0, 0
    while cursor < final:
        day = local_day(cursor, zone)
        segment_end = min(day_end(day, zone), final)
        active = carry + intervals_starting(cursor, segment_end)
        hour_starts = hours(cursor, segment_end, zone)
        worked = activity_between(cursor, segment_end)
        count = count_segment(active, hour_starts, segment_end, day, histories, worked)
        rows += _write_hours(count, histories)
        rows += _write_workload_day(day, count)
        rows += _write_days(day)
        counted += len(hour_starts)
        boundary = microseconds(segment_end)
        carry = [interval for interval in active if interval.end > boundary]
        cursor = segment_end
    state.rolled_until = final
    state.version = uuid.uuid4()
    state.save()
    return RollUp(hours=counted, rows=rows, rolled_until=final)


def _observe_capacity(at: datetime) -> None:
    """Sample each flavor's healthy capacity at ``at`` when it differs from the last sample
    (samples never go back in time)."""
    latest: dict[int, tuple[datetime, Decimal]] = {}
    for flavor_id, observed, healthy in CapacitySample.objects.order_by(
        "flavor_id", "observed_at"
    ).values_list("flavor_id", "observed_at", "healthy_gpus"):
        latest[flavor_id] = (observed, healthy)
    for flavor in Flavor.objects.all():
        healthy = healthy_capacity(flavor)
        last = latest.get(flavor.pk)
        if last is not None and (at <= last[0] or last[1] == healthy):
            continue
        CapacitySample.objects.create(flavor=flavor, observed_at=at, healthy_gpus=healthy)


def _first_hour(zone: ZoneInfo) -> datetime | None:
    """Where counting starts: the hour of the first usage or the first capacity sample."""
    found = [
        UsageInterval.objects.aggregate(first=Min("started_at"))["first"],
        CapacitySample.objects.aggregate(first=Min("observed_at"))["first"],
    ]
    known = [at for at in found if at is not None]
    return hour_start(min(known), zone) if known else None


def _forget_from(start: datetime | None) -> None:
    """Delete the roll-ups from the accounting day that begins at ``start`` (all if None)."""
    hourly: tuple[type[models.Model], ...] = (UsageHour, QueueHour, FlavorHour)
    daily: tuple[type[models.Model], ...] = (UsageDay, QueueDay, FlavorDay, WorkloadDay)
    monthly: tuple[type[models.Model], ...] = (UsageMonth, QueueMonth, FlavorMonth)
    if start is None:
        for model in (*hourly, *daily, *monthly):
            model._default_manager.all().delete()
        return
    first_day = local_day(start, accounting_zone())
    for model in hourly:
        model._default_manager.filter(hour__gte=start).delete()
    for model in daily:
        model._default_manager.filter(day__gte=first_day).delete()
    for model in monthly:  # the first month is recounted from its remaining days
        model._default_manager.filter(month__gte=month_start(first_day)).delete()


USAGE_COLUMNS = (
    "hour",
    "day",
    "tenant_id",
    "queue_id",
    "flavor_id",
    "priority_class_id",
    "gpu_hours",
    "cost",
    "active_gpu_hours",
    "idle_gpu_hours",
    "active_cost",
    "idle_cost",
)
LINES = ("used_within_guarantee", "reserved_idle", "used_above_guarantee")
FLAVOR_HOUR_COLUMNS = (
    "hour",
    "day",
    "flavor_id",
    "hourly_price",
    "guaranteed",
    "guarantee_scale",
    "capacity",
    "used",
    *LINES,
    "pool_idle",
    "pool_idle_shared",
    "capacity_cost",
    "used_cost",
    *(f"{line}_cost" for line in LINES),
    "pool_idle_cost",
    "pool_idle_shared_cost",
    *ACTIVE_SPLIT,
    *(f"{part}_cost" for part in ACTIVE_SPLIT),
)
QUEUE_HOUR_COLUMNS = (
    "hour",
    "day",
    "queue_id",
    "tenant_id",
    "flavor_id",
    "guarantee",
    "used",
    *LINES,
    "pool_idle_share",
    "used_cost",
    *(f"{line}_cost" for line in LINES),
    "pool_idle_share_cost",
    *ACTIVE_SPLIT,
    *(f"{part}_cost" for part in ACTIVE_SPLIT),
)
SCALE = Decimal("0.000001")


def _write_hours(count: SegmentCount, histories: Histories) -> int:
    """Insert the usage, flavor and queue rows of each counted hour."""
    usage: list[tuple[object, ...]] = []
    flavors: list[tuple[object, ...]] = []
    queues: list[tuple[object, ...]] = []
    for hour in count.hours:
        for (tenant, queue, flavor, priority_class), amount in sorted(
            hour.usage.items(), key=lambda item: item[0][1:]
        ):
            price = hour.prices[flavor]
            active = min(hour.active.get((tenant, queue, flavor, priority_class), ZERO), amount)
            idle = amount - active
            usage.append(
                (
                    *(hour.hour, hour.day, tenant, queue, flavor, priority_class),
                    *(amount, amount * price, active, idle, active * price, idle * price),
                )
            )
        for flavor, lines in sorted(hour.lines.items()):
            price = hour.prices[flavor]
            split = sum(hour.splits[flavor].values(), NO_SPLIT).amounts()
            amounts = (
                lines.capacity,
                lines.used,
                lines.used_within_guarantee,
                lines.reserved_idle,
                lines.used_above_guarantee,
                lines.pool_idle,
                lines.pool_idle_shared,
            )
            flavors.append(
                (
                    hour.hour,
                    hour.day,
                    flavor,
                    price,
                    lines.guaranteed,
                    lines.scale.quantize(SCALE),
                    *amounts,
                    *(amount * price for amount in amounts),
                    *split,
                    *(amount * price for amount in split),
                )
            )
            for queue, part in lines.queues.items():
                parts = (
                    part.allocated,
                    part.used_within_guarantee,
                    part.reserved_idle,
                    part.used_above_guarantee,
                    part.pool_idle_share,
                )
                if not any(parts) and not part.guarantee:
                    continue
                queue_split = hour.splits[flavor][queue].amounts()
                queues.append(
                    (
                        hour.hour,
                        hour.day,
                        queue,
                        histories.tenant_of_queue.get(queue),
                        flavor,
                        part.guarantee,
                        *parts,
                        *(amount * price for amount in parts),
                        *queue_split,
                        *(amount * price for amount in queue_split),
                    )
                )
    return (
        insert_values(UsageHour, USAGE_COLUMNS, usage)
        + insert_values(FlavorHour, FLAVOR_HOUR_COLUMNS, flavors)
        + insert_values(QueueHour, QUEUE_HOUR_COLUMNS, queues)
    )


def _write_workload_day(day: date, count: SegmentCount) -> int:
    """Add the counted hours to each workload's row of ``day``."""
    if not count.workloads:
        return 0
    totals: dict[tuple[int, int], list[Decimal]] = {}
    homes = dict(count.workload_homes)
    existing = WorkloadDay.objects.filter(day=day)
    for workload, flavor, tenant, queue, amount, cost, active in existing.values_list(
        "workload_id", "flavor_id", "tenant_id", "queue_id", "gpu_hours", "cost", "active_gpu_hours"
    ):
        totals[(workload, flavor)] = [amount, cost, active]
        homes.setdefault(workload, (tenant, queue))
    for key, (amount, cost, active) in count.workloads.items():
        found = totals.setdefault(key, [Decimal(0), Decimal(0), Decimal(0)])
        found[0] += amount
        found[1] += cost
        found[2] += active
    existing.delete()
    return insert_values(
        WorkloadDay,
        (
            *("day", "workload_id", "flavor_id", "tenant_id", "queue_id"),
            *("gpu_hours", "cost", "active_gpu_hours", "idle_gpu_hours"),
        ),
        (
            (day, workload, flavor, *homes[workload], amount, cost, active, amount - active)
            for (workload, flavor), (amount, cost, active) in sorted(totals.items())
        ),
    )


USAGE_KEYS = ("tenant_id", "queue_id", "flavor_id", "priority_class_id")
USAGE_AMOUNTS = USAGE_COLUMNS[6:]
FLAVOR_KEYS = ("flavor_id",)
FLAVOR_AMOUNTS = FLAVOR_HOUR_COLUMNS[6:]
QUEUE_KEYS = ("queue_id", "tenant_id", "flavor_id")
QUEUE_AMOUNTS = QUEUE_HOUR_COLUMNS[5:]


def _write_days(day: date) -> int:
    """Recount ``day``'s daily rows from its hourly rows, then its month's from the days."""
    first = month_start(day)
    month = {"day__gte": first, "day__lt": next_month(first)}
    hours = {"day": day}
    return (
        _recount(
            UsageDay, ("day", day), UsageHour.objects.filter(**hours), USAGE_KEYS, USAGE_AMOUNTS
        )
        + _recount(
            FlavorDay, ("day", day), FlavorHour.objects.filter(**hours), FLAVOR_KEYS, FLAVOR_AMOUNTS
        )
        + _recount(
            QueueDay, ("day", day), QueueHour.objects.filter(**hours), QUEUE_KEYS, QUEUE_AMOUNTS
        )
        + _recount(
            UsageMonth,
            ("month", first),
            UsageDay.objects.filter(**month),
            USAGE_KEYS,
            USAGE_AMOUNTS,
        )
        + _recount(
            FlavorMonth,
            ("month", first),
            FlavorDay.objects.filter(**month),
            FLAVOR_KEYS,
            FLAVOR_AMOUNTS,
        )
        + _recount(
            QueueMonth,
            ("month", first),
            QueueDay.objects.filter(**month),
            QUEUE_KEYS,
            QUEUE_AMOUNTS,
        )
    )


def _recount(
    target: type[models.Model],
    period: tuple[str, date],
    source: QuerySet[Any],
    keys: Sequence[str],
    amounts: Sequence[str],
) -> int:
    """Replace ``target``'s rows of one period by ``source``'s sums per ``keys``."""
    field, value = period
    target._default_manager.filter(**{field: value}).delete()
    sums = source.values(*keys).annotate(**{f"sum_{a}": Sum(a) for a in amounts}).order_by()
    return insert_values(
        target,
        (field, *keys, *amounts),
        ((value, *(row[k] for k in keys), *(row[f"sum_{a}"] for a in amounts)) for row in sums),
    )
