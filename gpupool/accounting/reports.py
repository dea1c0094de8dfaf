"""Cost and usage reports: the queries behind ``/api/v1/reports/`` and the dashboard's Cost page.

Every report reads the daily roll-ups (``do_roll_up_usage`` writes them), never the usage
intervals, so a year of history answers as fast as a week. A report is a ``Report``: its
columns and its rows, a database query that the API pages through or streams as CSV, each row a
plain dict. Periods are accounting days or months (``GPUPOOL_ACCOUNTING_TZ``); the figures cover
the hours rolled up so far (every finished hour, once the beat has run).

- ``usage_report``: GPU-hours and cost by tenant, queue, flavor and priority class, each split
  into active (the GPUs worked) and idle allocated;
- ``attribution_report``: per tenant or queue and flavor, the lines its usage and guarantees
  take: used within guarantee, reserved idle (charged to the queue holding the guarantee), used
  above guarantee, and optionally its share of the pool idle (in proportion to use); each used
  line also split into its active and idle allocated parts; and what it is charged (used plus
  reserved idle, ``charged`` and ``charged_cost``);
- ``capacity_report``: per flavor, the healthy capacity and the four lines adding up to it,
  the used ones split the same way;
- ``workload_report``: GPU-hours, cost, active and idle GPU-hours per workload.

Without a utilisation source (``utilization.queries.measured``: ``GPUPOOL_UTILIZATION_SOURCE``
names none) no GPU-hour was measured, so none is called active or idle: every report's
active and idle allocated columns (``MEASURED_COLUMNS``) are null -- "not measured" -- rather
than all its usage idle; the other figures are as ever.

With ``units`` (the API asks for it) a report's rows are grouped by the unit of their hours
too and say it (``unit``: GPU-hours, or a MIG flavor's MIG instance-hours, never added
together; ``UNIT``).

``cost_scope`` says whose rows a caller reads: finance and admins every tenant's, leads and
members their own tenants'. The capacity report is the pool's, and every caller reads it.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, timedelta
from decimal import ROUND_HALF_EVEN, Decimal
from typing import Any, Literal, TypeVar

from django.core.cache import cache
from django.db.models import Case, CharField, F, Model, Q, QuerySet, Sum, Value, When
from django.db.models.functions import TruncMonth

from gpupool.accounting.models import (
    FlavorDay,
    FlavorMonth,
    QueueDay,
    QueueMonth,
    RollUpState,
    UsageDay,
    UsageMonth,
    WorkloadDay,
)
from gpupool.accounting.periods import month_start, next_month
from gpupool.api.access import Access
from gpupool.inventory.choices import Sharing
from gpupool.inventory.units import GPU_UNIT, flavor_unit
from gpupool.utilization.queries import not_measured, source_name
from gpupool.workloads.models import Workload

Period = Literal["day", "month"]
PERIODS: tuple[Period, ...] = ("day", "month")

USAGE_DIMENSIONS = ("tenant", "queue", "flavor", "priority_class")
ATTRIBUTION_DIMENSIONS = ("tenant", "queue", "flavor")
FILTERS = ("tenant", "queue", "flavor", "priority_class")

# Dimension -> the ORM path of its name, on every roll-up table.
NAME_OF = {
    "tenant": "tenant__name",
    "queue": "queue__name",
    "flavor": "flavor__name",
    "priority_class": "priority_class__name",
}

# What the Cost page and the reports' CSVs write for the rows of the queues of no tenant (JSON
# keeps null, a machine value, as docs/api.md says): the pool's own queues, an organization's
# parent queue most often, whose reserved idle is the part of its guarantee its teams'
# guarantees do not hold (docs/cost.md).
NO_TEAM = "(no team: the pool's own queues)"

# The longest span a report covers: its end at most this many days after its start (a daily
# report of it is still paged). The reports API and the Cost page's range both refuse more.
LONGEST_SPAN_DAYS = 3 * 366

# The decimal places the reports write each GPU-hour and cost figure with (JSON and CSV), half
# to even: the Cost page shows the figures so written, so its cells are the CSVs' to the places
# it rounds to (``gpupool.number_formats``), rather than rounding the exact cost twice apart.
REPORT_PLACES = 4

QUEUE_LINES = ("used_within_guarantee", "reserved_idle", "used_above_guarantee")
FLAVOR_LINES = (*QUEUE_LINES, "pool_idle")
# Each allocated line split into the part the GPUs worked and the part they sat idle.
ACTIVE_LINES = (
    "used_active",
    "used_idle",
    "used_within_guarantee_active",
    "used_within_guarantee_idle",
    "used_above_guarantee_active",
    "used_above_guarantee_idle",
)
USAGE_AMOUNTS = (
    "gpu_hours",
    "cost",
    "active_gpu_hours",
    "idle_gpu_hours",
    "active_cost",
    "idle_cost",
)
# The columns only a utilisation source measures (the active and idle allocated parts and
# their cost, of every report): null without one (``utilization.queries.not_measured``).
MEASURED_COLUMNS = (
    *ACTIVE_LINES,
    *(f"{line}_cost" for line in ACTIVE_LINES),
    *USAGE_AMOUNTS[2:],
)


# How long a value read from the roll-ups is cached at most: a new roll-up version (every
# hour counted changes it) makes another key long before.
REPORT_CACHE_S = 3600
T = TypeVar("T")


def _unit_of_rows() -> Case:
    """In SQL, the unit a roll-up row's hours count: its flavor's (``flavor_unit`` of each
    ``sharing``: a MIG flavor's are MIG instance-hours, never added to GPU-hours)."""
    return Case(
        *(When(flavor__sharing=of, then=Value(flavor_unit(of))) for of in Sharing.values),
        default=Value(GPU_UNIT),
        output_field=CharField(),
    )


def roll_up_version() -> uuid.UUID | None:
    """The roll-ups' version, which changes whenever they do (None before anything is
    rolled up): what values read from them are cached by."""
    return RollUpState.objects.filter(name="usage").values_list("version", flat=True).first()


def cached_by_roll_up(name: str, parts: Sequence[Any], build: Callable[[], T]) -> T:
    """``build()``, kept in Django's cache under ``name``, the ``parts`` (JSON) and the
    roll-ups' version: what is read from the roll-ups cannot change before the next roll-up
    (nor, measured or not, before the utilisation source does: ``source_name``). Built
    afresh, and not kept, before anything is rolled up."""
    version = roll_up_version()
    if version is None:
        return build()
    text = json.dumps([str(version), source_name(), name, list(parts)], default=str)
    key = "gpupool:rolled:" + hashlib.sha256(text.encode()).hexdigest()
    found: T | None = cache.get(key)
    if found is None:
        found = build()
        cache.set(key, found, REPORT_CACHE_S)
    return found


def cost_scope(access: Access) -> frozenset[int] | None:
    """The tenants whose cost rows ``access`` reads: None (every tenant) for admins and
    finance, else the caller's own tenants (as ``TenantScoped`` with ``finance_sees_all``)."""
    if access.admin or access.finance:
        return None
    return access.tenant_ids


def span_refusal(start: date, end: date) -> dict[str, str]:
    """What is wrong with the days ``start`` to ``end`` as a report's span, by the parameter
    to blame (``start``, ``end``): an end before the start, or more than
    ``LONGEST_SPAN_DAYS`` between them. Empty when the span is fine. The one rule the reports
    API (a 400) and the Cost page's range (beside its fields) both apply."""
    if end < start:
        return {"end": f"must not be before start ({end} is before {start})"}
    if (end - start).days > LONGEST_SPAN_DAYS:
        return {
            "start": f"a report covers at most {LONGEST_SPAN_DAYS} days from start to end "
            f"({(end - start).days} asked)"
        }
    return {}


def written(value: Decimal) -> Decimal:
    """A report's figure as the reports write it: to ``REPORT_PLACES``, half to even."""
    return value.quantize(Decimal(1).scaleb(-REPORT_PLACES), rounding=ROUND_HALF_EVEN)


@dataclass(frozen=True)
class ReportQuery:
    """What a report covers: accounting days ``start`` to ``end`` (both included), by day or
    by month, and names to keep per dimension (empty: all)."""

    start: date
    end: date
    period: Period = "month"
    filters: Mapping[str, Sequence[str]] = field(default_factory=dict)
    tenants: Collection[int] | None = None  # the caller's scope: None reads every tenant


Finish = Callable[[list[dict[str, Any]]], list[dict[str, Any]]]


@dataclass(frozen=True)
class Report:
    """A report's columns and its rows: a query of plain dicts, finished a batch at a time
    by ``finish`` (which may read what the rows name, once per batch); without a utilisation
    source its ``MEASURED_COLUMNS`` are null (not measured)."""

    columns: tuple[str, ...]
    query: QuerySet[Any, dict[str, Any]]
    finish: Finish

    def finished(self, batch: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """A batch of the query's rows finished, the unmeasured figures null."""
        return not_measured(self.finish(batch), MEASURED_COLUMNS)

    def rows(self, query: Any = None) -> list[dict[str, Any]]:
        """The rows (of ``query``, a page of this report's query, when given)."""
        return self.finished(list(self.query if query is None else query))

    def stream(self, chunk_size: int = 2000) -> Iterator[dict[str, Any]]:
        """Every row, fetched in chunks (for CSV exports of long reports)."""
        batch: list[dict[str, Any]] = []
        for row in self.query.iterator(chunk_size=chunk_size):
            batch.append(row)
            if len(batch) >= chunk_size:
                yield from self.finished(batch)
                batch = []
        yield from self.finished(batch)


def _label(period: Period) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """Write the row's period as a label: ``2026-03-10`` for a day, ``2026-03`` for a month."""
    pattern = "%Y-%m" if period == "month" else "%Y-%m-%d"

    def finish(row: dict[str, Any]) -> dict[str, Any]:
        row["period"] = row["period"].strftime(pattern)
        return row

    return finish


def _named(query: ReportQuery, rows: QuerySet[Any], *, scoped: bool = True) -> QuerySet[Any]:
    """``rows`` of the query's names and (when ``scoped``) of the caller's tenants."""
    for dimension, names in query.filters.items():
        if names:
            rows = rows.filter(**{f"{NAME_OF[dimension]}__in": list(names)})
    if scoped and query.tenants is not None:
        rows = rows.filter(tenant__in=list(query.tenants))
    return rows


def _whole_months(start: date, end: date) -> tuple[date, date, date] | None:
    """The months that the days ``start`` to ``end`` (both included) cover whole: the first
    one's first day, the last one's first day and its last day; None when they cover none.
    Correct to the calendar's two ends (no month before January 1, none after December 9999)."""
    if start.day == 1:
        first = start
    elif (start.year, start.month) == (date.max.year, date.max.month):
        return None
    else:
        first = next_month(month_start(start))
    if end == date.max or (end + timedelta(days=1)).day == 1:
        last, last_day = month_start(end), end
    elif month_start(end) == date.min:
        return None
    else:
        last_day = month_start(end) - timedelta(days=1)
        last = month_start(last_day)
    return (first, last, last_day) if first <= last else None


def _grouped(
    query: ReportQuery,
    tables: tuple[type[Model], type[Model]],
    dimensions: Sequence[str],
    sums: Sequence[str],
    *,
    scoped: bool = True,
    units: bool = False,
) -> QuerySet[Any, dict[str, Any]]:
    """The query's rows of a (daily, monthly) pair of roll-up tables, summed by period and
    ``dimensions`` (and with ``units`` by the unit of their hours, ``by_unit``), ordered by
    them. Months that the days cover whole are read from the monthly table; the days of a
    month cut by ``start`` or ``end`` from the daily one."""
    daily, monthly = tables
    parts: list[tuple[QuerySet[Any], Any]] = []
    if query.period == "month":
        # Inclusive bounds throughout: the calendar ends on date.max, so no "day after".
        whole = _whole_months(query.start, query.end)
        if whole is not None:
            first, last, last_day = whole
            months = monthly._default_manager.filter(month__gte=first, month__lte=last)
            parts.append((months, F("month")))
            edges = Q(day__gte=query.start, day__lt=first) | Q(day__gt=last_day, day__lte=query.end)
        else:
            edges = Q(day__gte=query.start, day__lte=query.end)
        parts.append((daily._default_manager.filter(edges), TruncMonth("day")))
    else:
        days = daily._default_manager.filter(day__gte=query.start, day__lte=query.end)
        parts.append((days, F("day")))
    names: dict[str, Any] = {f"by_{d}": F(NAME_OF[d]) for d in dimensions}
    if units:
        names["by_unit"] = _unit_of_rows()
    grouped = [
        _named(query, rows, scoped=scoped)
        .annotate(period=period, **names)
        .values("period", *names)
        .annotate(**{f"sum_{name}": Sum(name) for name in sums})
        .order_by()
        for rows, period in parts
    ]
    combined = grouped[0] if len(grouped) == 1 else grouped[0].union(*grouped[1:], all=True)
    ordered: QuerySet[Any, dict[str, Any]] = combined.order_by("period", *names)
    return ordered


def _renamed(dimensions: Sequence[str], sums: Sequence[str], period: Period) -> Finish:
    """Turn grouped rows' internal names into the report's column names."""
    label = _label(period)

    def finish(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        finished = []
        for row in rows:
            out: dict[str, Any] = {"period": row["period"]}
            out.update({d: row[f"by_{d}"] for d in dimensions})
            out.update({name: row[f"sum_{name}"] for name in sums})
            finished.append(label(out))
        return finished

    return finish


# With ``units``, a report's rows are also grouped by the unit their hours count, its
# ``unit`` column ("GPU", or "MIG instance" for a MIG flavor's): a row summed over flavors
# (``by=tenant``) never adds MIG instance-hours to GPU-hours, a team of both has a row of each;
# money still adds up across the rows. The reports API asks for it.
UNIT = ("unit",)


def usage_report(
    query: ReportQuery, by: Sequence[str] = USAGE_DIMENSIONS, *, units: bool = False
) -> Report:
    """GPU-hours and cost per period by the dimensions ``by`` (tenant, queue, flavor, class)
    (and ``units``: by the unit of the hours, ``UNIT``)."""
    dimensions = [d for d in USAGE_DIMENSIONS if d in by]
    sums = USAGE_AMOUNTS
    rows = _grouped(query, (UsageDay, UsageMonth), dimensions, sums, units=units)
    grouped = [*dimensions, *(UNIT if units else ())]
    return Report(
        columns=("period", *grouped, *sums),
        query=rows,
        finish=_renamed(grouped, sums, query.period),
    )


def attribution_report(
    query: ReportQuery,
    by: Sequence[str] = ATTRIBUTION_DIMENSIONS,
    *,
    share_idle: bool = False,
    units: bool = False,
) -> Report:
    """Per period and tenant or queue (and flavor; and ``units``: unit of the hours, ``UNIT``),
    the GPU-hours and cost of each line: used within guarantee, reserved idle, used above
    guarantee (and, with ``share_idle``, the share of the pool idle in proportion to use);
    ``guarantee`` is the GPU-hours guaranteed."""
    dimensions = [d for d in ATTRIBUTION_DIMENSIONS if d in by]
    lines = (*QUEUE_LINES, *(("pool_idle_share",) if share_idle else ()))
    sums = (
        "guarantee",
        "used",
        *lines,
        *ACTIVE_LINES,
        "used_cost",
        *(f"{line}_cost" for line in lines),
        *(f"{line}_cost" for line in ACTIVE_LINES),
    )
    filters = {k: v for k, v in query.filters.items() if k != "priority_class"}
    scoped = ReportQuery(query.start, query.end, query.period, filters, query.tenants)
    rows = _grouped(scoped, (QueueDay, QueueMonth), dimensions, sums, units=units)
    grouped = [*dimensions, *(UNIT if units else ())]
    renamed = _renamed(grouped, sums, query.period)

    def finish(batch: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [charged(row) for row in renamed(batch)]

    return Report(
        columns=("period", *grouped, *sums, *CHARGED),
        query=rows,
        finish=finish,
    )


# What a tenant or queue is charged: the GPU-hours it used plus its reserved idle, and their
# cost (the Cost page's "Charged GPU-hours" and "Cost charged"; the attribution report's).
CHARGED = ("charged", "charged_cost")


def charged(row: dict[str, Any]) -> dict[str, Any]:
    """``row`` (an attribution row) with its ``CHARGED`` figures: used plus reserved idle."""
    row["charged"] = row["used"] + row["reserved_idle"]
    row["charged_cost"] = row["used_cost"] + row["reserved_idle_cost"]
    return row


def capacity_report(query: ReportQuery, *, share_idle: bool = False, units: bool = False) -> Report:
    """Per period and flavor (with ``units``, its unit too: ``UNIT``), the healthy GPU-hours
    and the four lines that add up to them, with their cost (and, with ``share_idle``, how
    much of the pool idle was shared out)."""
    lines = (*FLAVOR_LINES, *(("pool_idle_shared",) if share_idle else ()))
    sums = (
        "capacity",
        "used",
        *lines,
        *ACTIVE_LINES,
        "capacity_cost",
        "used_cost",
        *(f"{line}_cost" for line in lines),
        *(f"{line}_cost" for line in ACTIVE_LINES),
    )
    filters = {k: v for k, v in query.filters.items() if k == "flavor"}
    pool = ReportQuery(query.start, query.end, query.period, filters, None)
    rows = _grouped(pool, (FlavorDay, FlavorMonth), ["flavor"], sums, scoped=False, units=units)
    grouped = ["flavor", *(UNIT if units else ())]
    return Report(
        columns=("period", *grouped, *sums),
        query=rows,
        finish=_renamed(grouped, sums, query.period),
    )


WORKLOAD_COLUMNS = (
    *("namespace", "name", "tenant", "queue"),
    *("gpu_hours", "cost", "active_gpu_hours", "idle_gpu_hours"),
)


def workload_report(query: ReportQuery, *, units: bool = False) -> Report:
    """GPU-hours and cost of each workload over the query's days, the costliest first (with
    ``units``, a row per workload and unit of its hours: ``UNIT``)."""
    filters = {k: v for k, v in query.filters.items() if k != "priority_class"}
    scoped = ReportQuery(query.start, query.end, query.period, filters, query.tenants)
    days = WorkloadDay.objects.filter(day__gte=query.start, day__lte=query.end)
    if units:
        days = days.annotate(by_unit=_unit_of_rows())
    rows = (
        _named(scoped, days)
        .values("workload_id", *(("by_unit",) if units else ()))
        .annotate(
            sum_gpu_hours=Sum("gpu_hours"),
            sum_cost=Sum("cost"),
            sum_active=Sum("active_gpu_hours"),
            sum_idle=Sum("idle_gpu_hours"),
        )
        .order_by("-sum_cost", "workload_id", *(("by_unit",) if units else ()))
    )

    def finish(batch: list[dict[str, Any]]) -> list[dict[str, Any]]:
        names = {
            pk: (namespace, name, tenant, queue)
            for pk, namespace, name, tenant, queue in Workload.objects.filter(
                pk__in=[row["workload_id"] for row in batch]
            ).values_list("pk", "namespace", "name", "queue__tenant__name", "queue__name")
        }
        return [
            dict(
                zip(WORKLOAD_COLUMNS[:4], names[row["workload_id"]], strict=True),
                **({"unit": row["by_unit"]} if units else {}),
                gpu_hours=row["sum_gpu_hours"],
                cost=row["sum_cost"],
                active_gpu_hours=row["sum_active"],
                idle_gpu_hours=row["sum_idle"],
            )
            for row in batch
        ]

    columns = (*WORKLOAD_COLUMNS[:4], *(UNIT if units else ()), *WORKLOAD_COLUMNS[4:])
    return Report(columns=columns, query=rows, finish=finish)
