"""Read-only figures of GPU use against allocation, as plain rows, for the command line, the
API and the dashboard's pages (allocated against used, top wasters, sparklines).

Allocated GPU-hours come from accounting's usage intervals; active GPU-hours from the
activity windows the sampler recorded. Both are clipped to the asked window (a window or an
interval that straddles its edge counts its share inside it). Idle is allocated less active,
everywhere (teams, queues, workloads, and accounting's cost reports alike): time the source did
not observe counts as idle, and each row says how much of it was unobserved (allocated less
observed), so a gap in the source's samples reads as that and not as waste alone. Active
never exceeds allocated: the sampler records a shared flavor's pod at its share of the GPU
the source sees whole, and a workload's seconds seen count up to what it held
(``within_allocation``: ``activity.counted_within_allocation``, the rule the cost roll-up
applies too).

Bounded whatever the pool: the windows wholly inside the asked one are summed by the database
(one grouped query), and only those that straddle its two edges (at most two per workload) are
read and clipped here. An open usage interval (work still running) counts up to the pool's
clock (``open_until``), as in the cost reports: a window reaching into the future holds only
what has happened. ``hourly_utilization``, the Utilisation page's time series, reads the
hours the usage roll-up has counted from its hourly table (``accounting.UsageHour``) and only
the hours since from the intervals and windows.

GPU-hours only: a MIG flavor's usage counts its MIG instances (``inventory.units``), never
added to GPUs, so every figure here is of the whole-GPU flavors' usage (``WHOLE_GPU_USAGE``,
one filter for the intervals and the roll-up's hours: a MIG workload holds nothing here, so
its activity counts nothing either), and the views say which MIG flavors they leave out
(``left_out_flavors``), as the Cost page's trend does; the cost reports count MIG
instance-hours apart, in their ``unit``.

Measured or not, one rule (``measured``, ``source_name``) for every view: without a
utilisation source (``GPUPOOL_UTILIZATION_SOURCE`` names none: ``none``, or ``kubernetes``
without Prometheus) no GPU-hour was measured, so none is called active or idle. The API, the
Utilisation and Cost pages, the cost reports and ``manage.py gpupool utilization`` then give
allocation alone: ``tenant_utilization``'s rows have their measured figures
(``MEASURED_FIELDS``) null (and, ``with_source``, say ``"source": "none"``), and the cost
reports' active and idle allocated columns are null (``not_measured``).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection
from datetime import datetime
from typing import Any

import numpy as np
from django.conf import settings
from django.db.models import (
    DateTimeField,
    DurationField,
    ExpressionWrapper,
    F,
    Q,
    Sum,
    Value,
)
from django.db.models.functions import Coalesce, Greatest, Least, Trunc

from gpupool.accounting.models import RollUpState, UsageHour, UsageInterval
from gpupool.accounting.periods import accounting_zone, hour_start, hours
from gpupool.api.access import Access
from gpupool.control.clock import pool_now
from gpupool.inventory.choices import Sharing
from gpupool.inventory.models import Flavor
from gpupool.quotas.models import Queue
from gpupool.utilization.activity import counted_within_allocation
from gpupool.utilization.models import ActivityWindow
from gpupool.utilization.sampling import source_configured
from gpupool.workloads.models import Workload

NO_TENANT = "-"  # usage charged to a queue without a tenant (the pool's own)

# The source named when none measures (``GPUPOOL_UTILIZATION_SOURCE`` names none).
NO_SOURCE = "none"
# A team row's figures that only a utilisation source measures: null without one.
MEASURED_FIELDS = ("active_gpu_hours", "idle_gpu_hours", "unobserved_gpu_hours", "active_share")


# The usage (intervals, the roll-up's hours) these figures count: the whole-GPU flavors'. A
# MIG flavor's counts MIG instances, never added to GPU-hours (``left_out_flavors``).
WHOLE_GPU_USAGE = ~Q(flavor__sharing=Sharing.MIG)


def left_out_flavors() -> list[str]:
    """The flavors whose usage the GPU-hours here leave out, by name: the MIG flavors, whose
    hours count MIG instances (the cost reports give them apart, in their ``unit``)."""
    return list(
        Flavor.objects.filter(sharing=Sharing.MIG).order_by("name").values_list("name", flat=True)
    )


def measured() -> bool:
    """Whether a utilisation source measures what the GPUs do (``source_configured``): without
    one every view gives allocation alone and calls no GPU-hour active or idle."""
    return source_configured()


def source_name() -> str:
    """The utilisation source that measures the figures (``GPUPOOL_UTILIZATION_SOURCE``), or
    ``none`` (``NO_SOURCE``) when it names none (``none``, or a cluster's lack of one)."""
    return str(settings.GPUPOOL_UTILIZATION_SOURCE) if measured() else NO_SOURCE


def not_measured(rows: list[dict[str, Any]], fields: Collection[str]) -> list[dict[str, Any]]:
    """``rows`` as they are when a source measures; without one, each row's ``fields`` (those
    only a source measures) null: not measured, rather than all idle."""
    if not measured():
        for row in rows:
            row.update(dict.fromkeys(name for name in fields if name in row))
    return rows


def _overlap_s(start: datetime, end: datetime, since: datetime, until: datetime) -> float:
    return max((min(end, until) - max(start, since)).total_seconds(), 0.0)


def _at(moment: datetime) -> Value:
    """A moment as a timestamp the database compares and subtracts (not a text on SQLite)."""
    return Value(moment, output_field=DateTimeField())


def _share(start: datetime, end: datetime, since: datetime, until: datetime) -> float:
    """The part of an activity window from ``start`` to ``end`` inside ``[since, until]``."""
    length = (end - start).total_seconds()
    if length <= 0:
        return 1.0 if since <= end <= until else 0.0
    return _overlap_s(start, end, since, until) / length


def _windows(since: datetime, until: datetime, tenant_ids: Collection[int] | None = None) -> Any:
    windows = ActivityWindow.objects.filter(ended_at__gt=since, started_at__lt=until)
    return windows if tenant_ids is None else windows.filter(tenant_id__in=tenant_ids)


def within_allocation(held_s: float, observed_s: float, active_s: float) -> tuple[float, float]:
    """A workload's (observed, active) GPU-seconds that count against the ``held_s`` it was
    allocated: each at most that (``activity.counted_within_allocation``, the one rule the
    cost roll-up's ``active_amounts`` applies too), active at most observed."""
    observed, active = counted_within_allocation(
        np.array([held_s]), np.array([observed_s, min(active_s, observed_s)])
    )
    return float(observed), float(active)


def _seen_seconds(
    fields: tuple[str, ...],
    since: datetime,
    until: datetime,
    tenant_ids: Collection[int] | None = None,
) -> dict[tuple[Any, ...], list[float]]:
    """GPU-seconds (observed, active) as the source recorded them per ``fields`` (field
    paths), the windows clipped to ``[since, until]``: one grouped query over the windows
    inside, and the edge windows read one by one."""
    windows = _windows(since, until, tenant_ids)
    totals: dict[tuple[Any, ...], list[float]] = defaultdict(lambda: [0.0, 0.0])
    inside = (
        windows.filter(started_at__gte=since, ended_at__lte=until)
        .values_list(*fields)
        .annotate(observed=Sum("observed_gpu_seconds"), active=Sum("active_gpu_seconds"))
        .order_by()
    )
    width = len(fields)
    for row in inside:
        totals[tuple(row[:width])][0] += row[width] or 0.0
        totals[tuple(row[:width])][1] += row[width + 1] or 0.0
    edges = windows.filter(Q(started_at__lt=since) | Q(ended_at__gt=until)).values_list(
        *fields, "started_at", "ended_at", "observed_gpu_seconds", "active_gpu_seconds"
    )
    for row in edges:
        start, end, observed, active = row[width:]
        share = _share(start, end, since, until)
        totals[tuple(row[:width])][0] += observed * share
        totals[tuple(row[:width])][1] += active * share
    return totals


def seconds_by(
    key: str,
    since: datetime,
    until: datetime,
    tenant_ids: Collection[int] | None = None,
    *,
    held: dict[Any, float] | None = None,
) -> dict[Any, tuple[float, float]]:
    """GPU-seconds (observed, active) of the activity windows in ``[since, until]`` per
    ``key`` (a field path such as ``tenant__name`` or ``workload_id``), clipped to the window,
    each workload's counted up to what it held there (``within_allocation``: never more
    than allocated; ``held``: the workloads' allocated GPU-seconds in the window, when
    already read)."""
    fields = ("workload_id",) if key == "workload_id" else ("workload_id", key)
    seen = _seen_seconds(fields, since, until, tenant_ids)
    if not seen:
        return {}
    if held is None:
        held = allocated_seconds_by("workload_id", since, until, tenant_ids)
    per_workload: dict[int, list[float]] = defaultdict(lambda: [0.0, 0.0])
    for (workload, *_), (observed, active) in seen.items():
        per_workload[workload][0] += observed
        per_workload[workload][1] += active
    ids = list(per_workload)
    counted_observed_of, counted_active_of = counted_within_allocation(
        np.fromiter((held.get(pk, 0.0) for pk in ids), dtype=np.float64, count=len(ids)),
        np.array([per_workload[pk] for pk in ids], dtype=np.float64).reshape(-1, 2).T,
    )
    counted = {
        pk: (float(o), float(a))
        for pk, o, a in zip(ids, counted_observed_of, counted_active_of, strict=True)
    }
    totals: dict[Any, list[float]] = defaultdict(lambda: [0.0, 0.0])
    for row, (observed, active) in seen.items():
        workload_observed, workload_active = per_workload[row[0]]
        counted_observed, counted_active = counted[row[0]]
        # The workload's counted seconds, shared among its rows as it was seen in them.
        totals[row[-1]][0] += (
            counted_observed * observed / workload_observed if workload_observed else 0.0
        )
        totals[row[-1]][1] += counted_active * active / workload_active if workload_active else 0.0
    return {name: (observed, active) for name, (observed, active) in totals.items()}


def open_until(until: datetime, now: datetime | None = None) -> datetime:
    """Where an open usage interval (work still running) ends inside a window that ends at
    ``until``: ``now`` (default the pool's clock, ``pool_now``) when that comes first. As the
    cost reports count it (an open interval covers the hours up to the roll-up's end, never
    one still to come), so a window in the future holds no GPU-hours that have not happened."""
    return min(until, now if now is not None else pool_now())


def _intervals(since: datetime, until: datetime, open_end: datetime) -> Any:
    """The usage intervals of the whole-GPU flavors (``WHOLE_GPU_USAGE``) with time inside
    ``[since, until]``, an open one counted up to ``open_end`` (``open_until``)."""
    held = Q(ended_at__gt=since)
    if open_end > since:
        held |= Q(ended_at__isnull=True, started_at__lt=open_end)
    return UsageInterval.objects.filter(held, WHOLE_GPU_USAGE, started_at__lt=until)


def allocated_seconds_by(
    key: str,
    since: datetime,
    until: datetime,
    tenant_ids: Collection[int] | None = None,
    *,
    now: datetime | None = None,
) -> dict[Any, float]:
    """GPU-seconds allocated in the window per ``key`` (a usage interval's field path such as
    ``tenant__name``, ``queue_id`` or ``workload_id``), the usage intervals clipped to it, an
    open one ending at ``now`` (``open_until``: default the pool's clock); ``tenant_ids``
    limits it to those tenants (None: every tenant, and the pool's own)."""
    totals: dict[Any, float] = defaultdict(float)
    open_end = open_until(until, now)
    intervals = _intervals(since, until, open_end)
    if tenant_ids is not None:
        intervals = intervals.filter(tenant_id__in=tenant_ids)
    # Each interval clipped to the window, summed by the database per key and GPU count
    # (a handful of rows, not one per interval: a day of a busy pool has tens of thousands).
    inside = ExpressionWrapper(
        Least(Coalesce("ended_at", _at(open_end)), _at(until)) - Greatest("started_at", _at(since)),
        output_field=DurationField(),
    )
    rows = (
        intervals.values_list(key, "gpus")
        .annotate(held=Sum(inside))
        .values_list(key, "gpus", "held")
        .order_by()
    )
    for name, gpus, held in rows:
        seconds = max(held.total_seconds(), 0.0) if held is not None else 0.0
        totals[name] += float(gpus) * seconds
    return dict(totals)


def allocated_gpu_hours(
    since: datetime, until: datetime, tenant_ids: Collection[int] | None = None
) -> dict[str, float]:
    """GPU-hours allocated per tenant name in the window (usage intervals clipped to it);
    ``tenant_ids`` limits it to those tenants (None: every tenant, and the pool's own)."""
    totals: dict[str, float] = defaultdict(float)
    for name, seconds in allocated_seconds_by("tenant__name", since, until, tenant_ids).items():
        totals[name or NO_TENANT] += seconds / 3600
    return dict(totals)


def _idle_figures(held_s: float, observed_s: float, active_s: float) -> dict[str, float]:
    """Idle GPU-hours (held less active) and, of them, unobserved ones (held less what the
    source observed) of one row, from its GPU-seconds."""
    return {
        "idle_gpu_hours": round(max(held_s - active_s, 0.0) / 3600, 4),
        "unobserved_gpu_hours": round(max(held_s - observed_s, 0.0) / 3600, 4),
    }


def tenant_utilization(
    since: datetime,
    until: datetime,
    tenant_ids: Collection[int] | None = None,
    *,
    with_source: bool = False,
) -> list[dict[str, Any]]:
    """Per tenant: allocated, active and idle GPU-hours in the window (of idle, those the
    source did not observe), and the active share of allocated; tenants by name
    (``tenant_ids``: only those; ``with_source``: each row also names the source that measured
    it, ``source_name``, as the API and the command line write it). Without a source the
    measured figures (``MEASURED_FIELDS``) are null: allocation alone is known, and no
    GPU-hour is called idle."""
    held: dict[str, float] = defaultdict(float)
    for name, seconds in allocated_seconds_by("tenant__name", since, until, tenant_ids).items():
        held[name or NO_TENANT] += seconds
    seen: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    for name, (observed, active) in seconds_by("tenant__name", since, until, tenant_ids).items():
        seen[name or NO_TENANT][0] += observed
        seen[name or NO_TENANT][1] += active
    source = source_name()
    rows = []
    for tenant in sorted(set(held) | set(seen)):
        held_s, (observed_s, active_s) = held.get(tenant, 0.0), seen.get(tenant, (0.0, 0.0))
        rows.append(
            {
                "tenant": tenant,
                "allocated_gpu_hours": round(held_s / 3600, 4),
                "active_gpu_hours": round(active_s / 3600, 4),
                **_idle_figures(held_s, observed_s, active_s),
                "active_share": round(active_s / held_s, 4) if held_s else None,
            }
        )
        if with_source:
            rows[-1]["source"] = source
    return not_measured(rows, MEASURED_FIELDS)


def _most_idle(
    key: str, since: datetime, until: datetime, limit: int, tenant_ids: Collection[int] | None
) -> list[tuple[Any, float, dict[str, float]]]:
    """The ``limit`` values of ``key`` (``workload_id`` or ``queue_id``) that held GPUs idle
    longest in the window, most first (ties by key), each with its GPU-seconds held and its
    idle figures; those with no idle time are left out."""
    held = allocated_seconds_by(key, since, until, tenant_ids)
    seen = seconds_by(key, since, until, tenant_ids, held=held if key == "workload_id" else None)
    figures = {
        pk: _idle_figures(held.get(pk, 0.0), *seen.get(pk, (0.0, 0.0)))
        for pk in set(held) | set(seen)
        if pk is not None
    }
    ranked = sorted(figures, key=lambda pk: (-figures[pk]["idle_gpu_hours"], pk))
    return [
        (pk, held.get(pk, 0.0), figures[pk])
        for pk in ranked[:limit]
        if figures[pk]["idle_gpu_hours"] > 0
    ]


def top_wasters(
    since: datetime,
    until: datetime,
    limit: int = 10,
    tenant_ids: Collection[int] | None = None,
    *,
    owners: bool = False,
) -> list[dict[str, Any]]:
    """The workloads that held GPUs idle longest in the window (held less active, as the
    team figures and the cost reports count it), most first (``tenant_ids``: only those
    tenants' workloads; ``owners``: each row also says who submitted it)."""
    ranked = _most_idle("workload_id", since, until, limit, tenant_ids)
    workloads = Workload.objects.select_related("queue__tenant", "submitter").in_bulk(
        [pk for pk, _, _ in ranked]
    )
    rows = []
    for pk, held_s, figures in ranked:
        workload = workloads[pk]
        tenant = workload.queue.tenant
        rows.append(
            {
                "workload": workload.qualified_name(),
                "queue": workload.queue.name,
                "tenant": tenant.name if tenant is not None else NO_TENANT,
                "held_gpu_hours": round(held_s / 3600, 4),
                **figures,
            }
        )
        if owners:
            rows[-1]["owner"] = workload.submitter.get_username() if workload.submitter else ""
    return rows


def queue_waste(since: datetime, until: datetime, limit: int = 10) -> list[dict[str, Any]]:
    """Per queue, GPU-hours held and held idle in the window (counted as for the teams), the
    most idle first (the level at which teams see each other: no workload names)."""
    ranked = _most_idle("queue_id", since, until, limit, None)
    queues = Queue.objects.select_related("tenant").in_bulk([pk for pk, _, _ in ranked])
    rows = []
    for pk, held_s, figures in ranked:
        queue = queues[pk]
        tenant = queue.tenant
        rows.append(
            {
                "queue": queue.name,
                "tenant": tenant.name if tenant is not None else NO_TENANT,
                "held_gpu_hours": round(held_s / 3600, 4),
                **figures,
            }
        )
    return rows


def hourly_utilization(
    since: datetime, until: datetime, tenant_ids: Collection[int] | None = None
) -> tuple[list[datetime], dict[str, list[float]], dict[str, list[float]]]:
    """Per accounting hour from the one holding ``since`` to ``until``: each tenant's
    GPU-hours allocated and active (an hour's GPU-hours are its mean GPUs; the current hour
    is counted up to ``until``). Hours the roll-up has counted come from ``UsageHour``; the
    rest from the intervals and from the windows grouped by the hour they start in.
    Returns (hour starts, allocated per tenant, active per tenant)."""
    zone = accounting_zone()
    starts = hours(since, until, zone)
    position = {hour: index for index, hour in enumerate(starts)}
    allocated: dict[str, list[float]] = defaultdict(lambda: [0.0] * len(starts))
    active: dict[str, list[float]] = defaultdict(lambda: [0.0] * len(starts))
    if not starts:
        return starts, {}, {}
    rolled = RollUpState.objects.filter(name="usage").values_list("rolled_until", flat=True)
    counted_until = min(max(rolled.first() or starts[0], starts[0]), until)
    counted = UsageHour.objects.filter(WHOLE_GPU_USAGE, hour__gte=starts[0], hour__lt=counted_until)
    if tenant_ids is not None:
        counted = counted.filter(tenant_id__in=tenant_ids)
    for hour, tenant, held, worked in (
        counted.values_list("hour", "tenant__name")
        .annotate(held=Sum("gpu_hours"), worked=Sum("active_gpu_hours"))
        .order_by()
    ):
        allocated[tenant or NO_TENANT][position[hour]] += float(held)
        active[tenant or NO_TENANT][position[hour]] += float(worked)
    if counted_until < until:
        _add_recent(counted_until, until, tenant_ids, position, allocated, active)
    return starts, dict(sorted(allocated.items())), dict(sorted(active.items()))


def _add_recent(
    since: datetime,
    until: datetime,
    tenant_ids: Collection[int] | None,
    position: dict[datetime, int],
    allocated: dict[str, list[float]],
    active: dict[str, list[float]],
) -> None:
    """Add the hours not rolled up yet, from the intervals and the windows themselves: each
    workload's active GPU-seconds of an hour counted up to what it held in that hour
    (``activity.counted_within_allocation``, as the roll-up's hours count them)."""
    zone = accounting_zone()
    open_end = open_until(until)
    intervals = _intervals(since, until, open_end)
    if tenant_ids is not None:
        intervals = intervals.filter(tenant_id__in=tenant_ids)
    ordered = sorted(position)
    spans = [
        (position[hour], max(hour, since), min(later, until))
        for hour, later in zip(ordered, [*ordered[1:], until], strict=True)
        if hour >= hour_start(since, zone)
    ]
    held: dict[tuple[int, int], float] = defaultdict(float)  # (workload, hour) -> GPU-s
    for workload, tenant, gpus, started, ended in intervals.values_list(
        "workload_id", "tenant__name", "gpus", "started_at", "ended_at"
    ):
        for index, low, high in spans:
            seconds = _overlap_s(started, ended or open_end, low, high)
            if seconds > 0:
                allocated[tenant or NO_TENANT][index] += float(gpus) * seconds / 3600
                held[(workload, index)] += float(gpus) * seconds
    windows = _windows(since, until, tenant_ids).annotate(
        first=Trunc("started_at", "hour", tzinfo=zone),
        last=Trunc("ended_at", "hour", tzinfo=zone),
    )
    # (workload, hour) -> tenant, observed and active GPU-seconds the source saw.
    seen: dict[tuple[int, int], list[Any]] = {}

    def add(workload: int, index: int, tenant: str | None, observed: float, busy: float) -> None:
        row = seen.setdefault((workload, index), [tenant or NO_TENANT, 0.0, 0.0])
        row[1] += observed
        row[2] += busy

    # Windows inside one hour, summed by the database; those across an hour's edge (at most
    # one per workload and edge) read and split in proportion to the time.
    within = (
        windows.filter(started_at__gte=since, first=F("last"))
        .values_list("first", "workload_id", "tenant__name")
        .annotate(observed=Sum("observed_gpu_seconds"), seconds=Sum("active_gpu_seconds"))
        .order_by()
    )
    for hour, workload, tenant, observed, seconds in within:
        found = position.get(hour_start(hour, zone))
        if found is not None:
            add(workload, found, tenant, observed or 0.0, seconds or 0.0)
    across = windows.filter(Q(started_at__lt=since) | ~Q(first=F("last"))).values_list(
        "workload_id", "tenant__name", "started_at", "ended_at", "observed_gpu_seconds",
        "active_gpu_seconds",
    )  # fmt: skip
    for workload, tenant, start, end, observed, seconds in across:
        for index, low, high in spans:
            share = _share(start, end, low, high)
            if share > 0 and low < end and start < high:
                add(workload, index, tenant, observed * share, seconds * share)
    keys = list(seen)
    counted = counted_within_allocation(
        np.fromiter((held.get(key, 0.0) for key in keys), dtype=np.float64, count=len(keys)),
        np.fromiter((seen[key][2] for key in keys), dtype=np.float64, count=len(keys)),
    )
    for (workload, index), seconds in zip(keys, counted, strict=True):
        active[seen[(workload, index)][0]][index] += float(seconds) / 3600


def workload_sparkline(
    workload: Workload, since: datetime, until: datetime
) -> list[dict[str, Any]]:
    """A workload's mean utilisation window by window (end time, percent, GPUs)."""
    return [
        {
            "at": window.ended_at,
            "utilization": round(window.mean_utilization, 1),
            "gpus": window.gpus,
        }
        for window in _windows(since, until)
        .filter(workload=workload)
        .only("ended_at", "mean_utilization", "gpus")
        .order_by("ended_at")
    ]


def named_tenants_of(access: Access) -> frozenset[int] | None:
    """The tenants whose workloads the caller may see by name in the lists of work holding
    GPUs idle (None: every tenant's): the per-workload cost report's scope
    (``accounting.reports.cost_scope``), since a workload's idle GPU-hours are a line of its
    cost (``reports/workloads/`` gives them too): admins and finance every team's, leads and
    members their own teams' (docs/cost.md, "Who reads what"). The one rule of the
    Utilisation page and of ``wasters/``; who submitted each is ``shows_owners``'."""
    from gpupool.accounting.reports import cost_scope  # (reports reads this module)

    return cost_scope(access)


def shows_owners(access: Access) -> bool:
    """Whether the lists of work holding GPUs idle say who submitted each workload: to
    admins, leads and members, not to finance (cost data, not the people behind it; the
    cost reports name no submitter either)."""
    return access.admin or not access.finance
