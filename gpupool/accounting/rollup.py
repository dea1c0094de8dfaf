"""What the usage roll-up counts, hour by hour; ``actions.do_roll_up_usage`` writes it.

For a run of accounting hours (at most one day) it takes the usage intervals that overlap them
and splits each into its hours: an interval's GPU-hours in an hour are its GPUs times the part
of the hour it covers (an open interval covers every hour up to the roll-up's end). From these
it counts GPU-hours and cost per hour by tenant, queue, flavor and priority class, per workload,
and per flavor the four attribution lines (``attribution.attribute_hour``) with the healthy
capacity, prices and guarantees then in force. A change of price, guarantee or capacity inside
an hour counts for the part of the hour it was in force (time-weighted).

A flavor's healthy capacity is known from the samples each run records (``CapacitySample``):
it counts from the flavor's first sample, or from its first usage when that came earlier
(usage recorded before the roll-up first ran: the first sample's capacity stands for that
time too), and is nothing before. A pool, or a flavor, that begins mid-hour so has capacity,
and pool idle, for the part of its first hour it existed, not the whole hour
(``capacity_steps``).

Active GPU-hours (docs/cost.md, "Active and idle allocated"): the activity windows the
utilisation sampler recorded (``utilization.ActivityWindow``: a workload's GPU-seconds active in
a window of about a minute, a shared GPU's pod weighed at its share of the GPU) are split into
the same hours, each window's active GPU-seconds going to the hours it covers in proportion to
the time. A workload's active GPU-hours of an hour are capped at what it held in that hour by
the rule the Utilisation page and API apply (``utilization.activity.counted_within_allocation``)
and shared among its intervals of that hour in proportion to their GPU-hours (activity the
sampler saw outside any allocation counts nowhere). Every allocated line then
splits into an active and an idle allocated part (``attribution.split_active``).

Amounts are GPU-hours to 1/10,000 (``attribution.GPU_HOURS``); a cost is GPU-hours times the
hour's price, exact.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

import numpy as np
from django.db.models import F, Min, Q, Sum
from django.db.models.functions import Trunc

from gpupool.accounting.attribution import (
    PRICE,
    ZERO,
    ActiveSplit,
    FlavorLines,
    Steps,
    attribute_hour,
    nearest,
    split_flavor,
)
from gpupool.accounting.models import CapacitySample, UsageInterval
from gpupool.accounting.periods import accounting_zone, hour_start, next_hour
from gpupool.inventory.models import Flavor, FlavorPriceChange
from gpupool.quotas.models import Queue, QueueQuotaChange
from gpupool.utilization.activity import counted_within_allocation
from gpupool.utilization.models import ActivityWindow

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
MICROSECOND = timedelta(microseconds=1)
MICROSECONDS_PER_HOUR = 3_600_000_000
OPEN = np.iinfo(np.int64).max  # the end of an interval that is still open

INTERVAL_FIELDS = (
    "workload_id",
    "tenant_id",
    "queue_id",
    "flavor_id",
    "priority_class_id",
    "gpus",
    "started_at",
    "ended_at",
)


def microseconds(at: datetime) -> int:
    """``at`` as whole microseconds since the epoch (exact)."""
    return (at - EPOCH) // MICROSECOND


def gpu_hours(value: float) -> Decimal:
    """A float amount of GPU-hours as an exact Decimal to 1/10,000."""
    return Decimal(round(value * 10_000)).scaleb(-4)


@dataclass(frozen=True, slots=True)
class Interval:
    """A usage interval as the roll-up reads it (times in microseconds; OPEN while running)."""

    workload: int
    tenant: int | None
    queue: int
    flavor: int
    priority_class: int
    gpus: float
    start: int
    end: int


def as_interval(row: Sequence[object]) -> Interval:
    """A ``values_list(*INTERVAL_FIELDS)`` row as an ``Interval``."""
    workload, tenant, queue, flavor, priority_class, gpus, started, ended = row
    assert isinstance(started, datetime)
    return Interval(
        workload=int(workload),  # type: ignore[call-overload]
        tenant=None if tenant is None else int(tenant),  # type: ignore[call-overload]
        queue=int(queue),  # type: ignore[call-overload]
        flavor=int(flavor),  # type: ignore[call-overload]
        priority_class=int(priority_class),  # type: ignore[call-overload]
        gpus=float(gpus),  # type: ignore[arg-type]
        start=microseconds(started),
        end=OPEN if ended is None else microseconds(ended),  # type: ignore[arg-type]
    )


def intervals_running_at(at: datetime) -> list[Interval]:
    """Intervals that started before ``at`` and had not ended by then (or are still open)."""
    rows = (
        UsageInterval.objects.filter(started_at__lt=at)
        .filter(Q(ended_at__isnull=True) | Q(ended_at__gt=at))
        .values_list(*INTERVAL_FIELDS)
    )
    return [as_interval(row) for row in rows]


def intervals_starting(start: datetime, end: datetime) -> list[Interval]:
    """Intervals that start in ``[start, end)``."""
    rows = UsageInterval.objects.filter(started_at__gte=start, started_at__lt=end).values_list(
        *INTERVAL_FIELDS
    )
    return [as_interval(row) for row in rows]


@dataclass(frozen=True, slots=True)
class Activity:
    """An activity window as the roll-up reads it: a workload's active GPU-seconds from
    ``start`` to ``end`` (microseconds)."""

    workload: int
    start: int
    end: int
    active_gpu_seconds: float


def activity_between(start: datetime, end: datetime) -> list[Activity]:
    """The activity that overlaps ``[start, end)`` (accounting hours), bounded by workloads x
    hours rather than by windows: the windows inside one hour are summed per workload and
    hour by the database (one ``Activity`` spanning the hour); only those across an hour's
    edge or the run's (at most one per workload and edge) are read one by one."""
    zone = accounting_zone()
    windows = ActivityWindow.objects.filter(
        ended_at__gt=start, started_at__lt=end, active_gpu_seconds__gt=0
    ).annotate(
        first=Trunc("started_at", "hour", tzinfo=zone),
        last=Trunc("ended_at", "hour", tzinfo=zone),
    )
    inside = Q(first=F("last"), started_at__gte=start, ended_at__lte=end)
    found: list[Activity] = []
    for workload, hour, active in (
        windows.filter(inside)
        .values_list("workload_id", "first")
        .annotate(active=Sum("active_gpu_seconds"))
        .order_by()
    ):
        begins = hour_start(hour, zone)
        found.append(
            Activity(
                workload,
                microseconds(begins),
                microseconds(next_hour(begins, zone)),
                float(active or 0.0),
            )
        )
    for workload, started, ended, active in windows.exclude(inside).values_list(
        "workload_id", "started_at", "ended_at", "active_gpu_seconds"
    ):
        found.append(Activity(workload, microseconds(started), microseconds(ended), float(active)))
    return found


def capacity_steps(samples: Sequence[tuple[int, Decimal]], first_use: int | None) -> Steps:
    """A flavor's healthy capacity over time from its samples (instants in microseconds):
    nothing before the flavor is known to exist -- its first sample, or ``first_use`` (its
    first usage) when earlier, from which the first sample's value stands."""
    first_at, first_value = min(samples, key=lambda sample: sample[0])
    changes = list(samples)
    if first_use is not None and first_use < first_at:
        changes.append((first_use, first_value))
    return Steps(changes, before=ZERO)


@dataclass
class Histories:
    """Prices, guarantees and capacities over time, and the queue tree, for one roll-up run."""

    prices: dict[int, Steps]
    guarantees: dict[int, dict[int, Steps]]  # flavor -> queue -> guarantee GPUs over time
    capacities: dict[int, Steps]
    parents: dict[int, int | None]
    tenant_of_queue: dict[int, int | None]
    flavors: list[int]

    @classmethod
    def load(cls) -> Histories:
        """Read every flavor's prices and capacity samples, every quota's history, the tree."""
        prices: dict[int, list[tuple[int, Decimal]]] = defaultdict(list)
        for flavor_id, at, price in FlavorPriceChange.objects.values_list(
            "flavor_id", "effective_from", "hourly_price"
        ):
            prices[flavor_id].append((microseconds(at), price))
        current_price = dict(Flavor.objects.values_list("id", "hourly_price"))
        capacities: dict[int, list[tuple[int, Decimal]]] = defaultdict(list)
        for flavor_id, at, healthy in CapacitySample.objects.values_list(
            "flavor_id", "observed_at", "healthy_gpus"
        ):
            capacities[flavor_id].append((microseconds(at), healthy))
        first_use = {
            flavor_id: microseconds(first)
            for flavor_id, first in UsageInterval.objects.values("flavor_id")
            .annotate(first=Min("started_at"))
            .values_list("flavor_id", "first")
            .order_by()
        }
        guarantees: dict[int, dict[int, list[tuple[int, Decimal]]]] = defaultdict(
            lambda: defaultdict(list)
        )
        for queue_id, flavor_id, at, guarantee in QueueQuotaChange.objects.values_list(
            "queue_id", "flavor_id", "effective_from", "guarantee"
        ):
            guarantees[flavor_id][queue_id].append((microseconds(at), guarantee))
        tree = list(Queue.objects.values_list("id", "parent_id", "tenant_id"))
        return cls(
            prices={
                flavor: Steps(prices[flavor]) if prices[flavor] else Steps([], before=price)
                for flavor, price in current_price.items()
            },
            guarantees={
                flavor: {queue: Steps(steps, before=ZERO) for queue, steps in by_queue.items()}
                for flavor, by_queue in guarantees.items()
            },
            capacities={
                flavor: capacity_steps(steps, first_use.get(flavor))
                for flavor, steps in capacities.items()
            },
            parents={queue: parent for queue, parent, _ in tree},
            tenant_of_queue={queue: tenant for queue, _, tenant in tree},
            flavors=sorted(current_price),
        )


@dataclass
class HourCount:
    """Everything one accounting hour adds to the roll-up tables."""

    hour: datetime
    day: date
    prices: dict[int, Decimal]
    usage: dict[tuple[int | None, int, int, int], Decimal]  # (tenant, queue, flavor, class)
    active: dict[tuple[int | None, int, int, int], Decimal]  # the same keys: active GPU-hours
    lines: dict[int, FlavorLines]  # per flavor
    splits: dict[int, dict[int, ActiveSplit]]  # per flavor, per queue: active and idle parts


@dataclass
class SegmentCount:
    """What a run of hours inside one accounting day adds: each hour, and per workload."""

    hours: list[HourCount] = field(default_factory=list)
    # (workload, flavor) -> [GPU-hours, cost, active GPU-hours] over the run's hours
    workloads: dict[tuple[int, int], list[Decimal]] = field(default_factory=dict)
    workload_homes: dict[int, tuple[int | None, int]] = field(default_factory=dict)


def count_segment(
    intervals: Sequence[Interval],
    hour_starts: Sequence[datetime],
    hour_end: datetime,
    day: date,
    histories: Histories,
    activity: Sequence[Activity] = (),
) -> SegmentCount:
    """Split ``intervals`` into the hours starting at ``hour_starts`` (the last ends at
    ``hour_end``) and count usage, cost and the attribution lines of each hour; ``activity``
    splits each allocated amount into its active and idle parts."""
    bounds = np.array(
        [microseconds(hour) for hour in hour_starts] + [microseconds(hour_end)], dtype=np.int64
    )
    count = SegmentCount()
    prices_by_hour = [
        {
            flavor: nearest(steps.average(int(bounds[j]), int(bounds[j + 1])), PRICE)
            for flavor, steps in histories.prices.items()
        }
        for j in range(len(hour_starts))
    ]
    usage_by_hour: list[dict[tuple[int | None, int, int, int], Decimal]] = [{} for _ in hour_starts]
    active_by_hour: list[dict[tuple[int | None, int, int, int], Decimal]] = [
        {} for _ in hour_starts
    ]
    if intervals:
        starts = np.fromiter((i.start for i in intervals), dtype=np.int64, count=len(intervals))
        ends = np.fromiter((i.end for i in intervals), dtype=np.int64, count=len(intervals))
        gpus = np.fromiter((i.gpus for i in intervals), dtype=np.float64, count=len(intervals))
        lows = np.maximum(starts[:, None], bounds[None, :-1])
        highs = np.minimum(ends[:, None], bounds[None, 1:])
        covered = np.clip(highs - lows, 0, None).astype(np.float64)
        amounts = covered * (gpus / MICROSECONDS_PER_HOUR)[:, None]  # GPU-hours, n x hours
        active = active_amounts(intervals, amounts, activity, bounds)
        _count_usage(intervals, amounts, usage_by_hour)
        _count_usage(intervals, active, active_by_hour)
        _count_workloads(intervals, amounts, active, prices_by_hour, count)
    for j, hour in enumerate(hour_starts):
        start, end = int(bounds[j]), int(bounds[j + 1])
        length = Decimal(end - start) / MICROSECONDS_PER_HOUR
        allocated: dict[int, dict[int, Decimal]] = defaultdict(dict)
        for (_, queue, flavor, _), amount in usage_by_hour[j].items():
            allocated[flavor][queue] = allocated[flavor].get(queue, ZERO) + amount
        worked: dict[int, dict[int, Decimal]] = defaultdict(dict)
        for (_, queue, flavor, _), amount in active_by_hour[j].items():
            worked[flavor][queue] = worked[flavor].get(queue, ZERO) + amount
        lines: dict[int, FlavorLines] = {}
        for flavor in histories.flavors:
            capacity_steps = histories.capacities.get(flavor)
            healthy = capacity_steps.average(start, end) if capacity_steps else ZERO
            guarantees = {
                queue: nearest(steps.average(start, end) * length)
                for queue, steps in histories.guarantees.get(flavor, {}).items()
            }
            used = allocated.get(flavor, {})
            if not used and not any(guarantees.values()) and healthy <= 0:
                continue
            lines[flavor] = attribute_hour(
                capacity=nearest(healthy * length),
                guarantees=guarantees,
                allocated=used,
                parents=histories.parents,
            )
        count.hours.append(
            HourCount(
                hour=hour,
                day=day,
                prices=prices_by_hour[j],
                usage=usage_by_hour[j],
                active=active_by_hour[j],
                lines=lines,
                splits={
                    flavor: split_flavor(flavor_lines, worked.get(flavor, {}))
                    for flavor, flavor_lines in lines.items()
                },
            )
        )
    return count


def active_amounts(
    intervals: Sequence[Interval],
    amounts: np.ndarray,
    activity: Sequence[Activity],
    bounds: np.ndarray,
) -> np.ndarray:
    """Active GPU-hours of each interval in each hour (n x hours, like ``amounts``).

    Each window's active GPU-seconds go to the hours it covers in proportion to the time;
    a workload's active GPU-hours of an hour count up to what it held in that hour
    (``utilization.activity.counted_within_allocation``, the Utilisation page's and API's
    rule too) and are shared among its intervals of that hour in proportion to their
    GPU-hours, each so within its own."""
    active = np.zeros_like(amounts)
    if not activity:
        return active
    owners = np.fromiter((i.workload for i in intervals), dtype=np.int64, count=len(intervals))
    workloads, owner_index = np.unique(owners, return_inverse=True)
    owner_index = owner_index.reshape(-1)
    seen = np.fromiter((a.workload for a in activity), dtype=np.int64, count=len(activity))
    place = np.searchsorted(workloads, seen)
    known = (place < len(workloads)) & (workloads[np.minimum(place, len(workloads) - 1)] == seen)
    if not known.any():
        return active
    kept = [a for a, keep in zip(activity, known, strict=True) if keep]
    starts = np.fromiter((a.start for a in kept), dtype=np.int64, count=len(kept))
    ends = np.fromiter((a.end for a in kept), dtype=np.int64, count=len(kept))
    seconds = np.fromiter((a.active_gpu_seconds for a in kept), dtype=np.float64, count=len(kept))
    lengths = np.maximum(ends - starts, 1).astype(np.float64)
    lows = np.maximum(starts[:, None], bounds[None, :-1])
    highs = np.minimum(ends[:, None], bounds[None, 1:])
    covered = np.clip(highs - lows, 0, None).astype(np.float64)
    hours = covered * (seconds / 3600 / lengths)[:, None]  # active GPU-hours, windows x hours
    per_workload = np.zeros((len(workloads), amounts.shape[1]))
    np.add.at(per_workload, place[known], hours)
    held = np.zeros_like(per_workload)
    np.add.at(held, owner_index, amounts)
    counted = counted_within_allocation(held, per_workload)
    with np.errstate(divide="ignore", invalid="ignore"):
        share = np.where(held[owner_index] > 0, amounts / held[owner_index], 0.0)
    result: np.ndarray = np.minimum(counted[owner_index] * share, amounts)
    return result


def _groups(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct rows of ``keys`` and, for each input row, the index of its group."""
    distinct, inverse = np.unique(keys, axis=0, return_inverse=True)
    return distinct, inverse.reshape(-1)


def _count_usage(
    intervals: Sequence[Interval],
    amounts: np.ndarray,
    usage_by_hour: list[dict[tuple[int | None, int, int, int], Decimal]],
) -> None:
    """GPU-hours per hour by (tenant, queue, flavor, class)."""
    keys = np.array(
        [
            (-1 if i.tenant is None else i.tenant, i.queue, i.flavor, i.priority_class)
            for i in intervals
        ],
        dtype=np.int64,
    )
    distinct, inverse = _groups(keys)
    for j, usage in enumerate(usage_by_hour):
        sums = np.bincount(inverse, weights=amounts[:, j], minlength=len(distinct))
        for g in np.flatnonzero(sums > 0):
            value = gpu_hours(float(sums[g]))
            if value > 0:
                tenant, queue, flavor, priority_class = (int(v) for v in distinct[g])
                usage[(None if tenant < 0 else tenant, queue, flavor, priority_class)] = value


def _count_workloads(
    intervals: Sequence[Interval],
    amounts: np.ndarray,
    active: np.ndarray,
    prices_by_hour: list[dict[int, Decimal]],
    count: SegmentCount,
) -> None:
    """GPU-hours, cost and active GPU-hours per (workload, flavor) over the segment's hours."""
    keys = np.array([(i.workload, i.flavor) for i in intervals], dtype=np.int64)
    distinct, inverse = _groups(keys)
    for i in intervals:
        count.workload_homes.setdefault(i.workload, (i.tenant, i.queue))
    for j, prices in enumerate(prices_by_hour):
        sums = np.bincount(inverse, weights=amounts[:, j], minlength=len(distinct))
        worked = np.bincount(inverse, weights=active[:, j], minlength=len(distinct))
        for g in np.flatnonzero(sums > 0):
            value = gpu_hours(float(sums[g]))
            if value <= 0:
                continue
            workload, flavor = int(distinct[g][0]), int(distinct[g][1])
            totals = count.workloads.setdefault((workload, flavor), [ZERO, ZERO, ZERO])
            totals[0] += value
            totals[1] += value * prices[flavor]
            totals[2] += min(gpu_hours(float(worked[g])), value)
