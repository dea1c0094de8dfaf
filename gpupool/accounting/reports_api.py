"""API of usage and cost: ``/api/v1/reports/...`` (from the roll-ups) and ``/api/v1/usage/``.

Every report and list answers JSON pages, or the whole table as CSV with ``?format=csv`` (the
same rows and values). A report page is cached (Django's cache) per version of the roll-ups:
it cannot change until the next roll-up counts an hour, which gives a new version. Finance and
admins read every tenant; leads and members their own tenants (``reports.cost_scope``); the
capacity report is the pool's and every role reads it.

Without a utilisation source (``GPUPOOL_UTILIZATION_SOURCE`` names none) no GPU-hour was
measured: the active and idle allocated columns (``reports.MEASURED_COLUMNS``) are null in JSON
and empty in the CSV -- not measured -- never the whole usage as idle.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from decimal import ROUND_HALF_EVEN
from typing import Any

from django.core.cache import cache
from django.db.models import Model, QuerySet, Subquery
from django_filters import rest_framework as filters
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, viewsets
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.routers import BaseRouter

from gpupool.accounting.models import UsageInterval
from gpupool.accounting.periods import accounting_zone, local_day
from gpupool.accounting.reports import (
    ATTRIBUTION_DIMENSIONS,
    FILTERS,
    NO_TEAM,
    PERIODS,
    REPORT_CACHE_S,
    REPORT_PLACES,
    USAGE_DIMENSIONS,
    Report,
    ReportQuery,
    attribution_report,
    capacity_report,
    cost_scope,
    roll_up_version,
    span_refusal,
    usage_report,
    workload_report,
)
from gpupool.api.access import request_access
from gpupool.api.fields import CalendarDateField, NamedChoiceField
from gpupool.api.filters import NameFilter, StrictFilterBackend, UtcDateTimeFilter
from gpupool.api.pagination import Cursors
from gpupool.api.permissions import COST_ROLES, ActionRoles, TenantScoped
from gpupool.api.rows import PlannedRows
from gpupool.api.tables import CSVExport
from gpupool.control.clock import pool_now
from gpupool.inventory.models import Flavor
from gpupool.inventory.units import GPU_UNIT, MIG_UNIT
from gpupool.quotas.models import Queue
from gpupool.tenancy.models import Tenant
from gpupool.utilization.queries import source_name


class NameList(serializers.CharField):
    """A comma-separated list of names (``nlp,vision``)."""

    def to_internal_value(self, data: Any) -> list[str]:  # type: ignore[override]
        """The names, without blanks (a NUL character is refused, as in any text field)."""
        text = super().to_internal_value(data)
        if "\x00" in text:
            raise serializers.ValidationError("Null characters are not allowed.")
        return [name.strip() for name in text.split(",") if name.strip()]


class ReportQuerySerializer(serializers.Serializer[Any]):
    """What a report covers: days (accounting time zone, both included), period and filters.

    A report takes the filters (of ``reports.FILTERS``) its query declares as fields; a
    subclass drops one its report cannot apply (``tenant = None``), and asking it is a 400
    naming the parameter (``to_internal_value``), never a table that only looks filtered."""

    start = CalendarDateField(
        required=False, help_text="First day (default: the first of this month)."
    )
    end = CalendarDateField(required=False, help_text="Last day, included (default: today).")
    period = NamedChoiceField(
        choices=PERIODS, default="month", help_text="Rows per day or per month."
    )
    tenant = NameList(required=False, help_text="Only these tenants (comma-separated names).")
    queue = NameList(required=False, help_text="Only these queues (comma-separated names).")
    flavor = NameList(required=False, help_text="Only these flavors (comma-separated names).")
    priority_class = NameList(required=False, help_text="Only these priority classes.")

    def to_internal_value(self, data: Any) -> Any:
        """The query; a filter this report does not take is a 400 naming it."""
        refused = {name: [why] for name in FILTERS if name in data and (why := self.refusal(name))}
        try:
            value = super().to_internal_value(data)
        except serializers.ValidationError as error:
            if refused and isinstance(error.detail, dict):
                raise serializers.ValidationError({**error.detail, **refused}) from None
            raise
        if refused:
            raise serializers.ValidationError(refused)
        return value

    def refusal(self, name: str) -> str | None:
        """Why the report refuses ``name``: a filter (of ``reports.FILTERS``) it does not apply
        (None: one it applies, or no filter)."""
        if name in FILTERS and name not in self.fields:
            return f"this report does not filter by {name}; it filters by {self._takes()}"
        return None

    def _takes(self) -> str:
        return ", ".join(name for name in FILTERS if name in self.fields) or "nothing"

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        """Fill in this month to date; the span runs forwards and is at most three years
        (``reports.span_refusal``, the Cost page's rule too)."""
        if "end" not in attrs:  # the pool's today: one query, only when it is needed
            attrs["end"] = local_day(pool_now(), accounting_zone())
        attrs.setdefault("start", attrs["end"].replace(day=1))
        refused = span_refusal(attrs["start"], attrs["end"])
        if refused:
            raise serializers.ValidationError(refused)
        return attrs


def _dimensions_field(choices: Sequence[str]) -> NameList:
    return NameList(
        required=False,
        help_text=f"Group by these (comma-separated, of {', '.join(choices)}; default: all).",
    )


class WorkloadQuerySerializer(ReportQuerySerializer):
    """A per-workload report's days and filters (a workload runs at one class or another over
    the days: its cost is not split by class)."""

    priority_class = None  # type: ignore[assignment]


class UsageQuerySerializer(ReportQuerySerializer):
    """A usage report's days, period, filters and grouping."""

    by = _dimensions_field(USAGE_DIMENSIONS)

    def validate_by(self, value: list[str]) -> list[str]:
        """Known dimensions only."""
        return _known(value, USAGE_DIMENSIONS)


class AttributionQuerySerializer(ReportQuerySerializer):
    """An attribution report's days, period, filters, grouping and idle sharing (guarantees
    are per queue and flavor, not per class: no ``priority_class``)."""

    priority_class = None  # type: ignore[assignment]

    by = _dimensions_field(ATTRIBUTION_DIMENSIONS)
    share_idle = serializers.BooleanField(
        default=False, help_text="Also share the pool idle out in proportion to use."
    )

    def validate_by(self, value: list[str]) -> list[str]:
        """Known dimensions only."""
        return _known(value, ATTRIBUTION_DIMENSIONS)


class CapacityQuerySerializer(ReportQuerySerializer):
    """A capacity report's days, period, flavors and idle sharing: the capacity is the pool's,
    so no tenant, queue or class."""

    tenant = None  # type: ignore[assignment]
    queue = None  # type: ignore[assignment]
    priority_class = None  # type: ignore[assignment]

    share_idle = serializers.BooleanField(
        default=False, help_text="Also say how much of the pool idle was shared out."
    )


def _known(value: list[str], choices: Sequence[str]) -> list[str]:
    unknown = [name for name in value if name not in choices]
    if unknown:
        raise serializers.ValidationError(
            f"unknown: {', '.join(unknown)}; choose from {', '.join(choices)}"
        )
    return value


def _gpu_hours(help_text: str = "", *, allow_null: bool = False) -> serializers.DecimalField:
    return serializers.DecimalField(
        allow_null=allow_null,
        max_digits=20,
        decimal_places=REPORT_PLACES,
        rounding=ROUND_HALF_EVEN,  # as ``reports.written``, which the Cost page shows
        required=False,
        help_text=help_text,
    )


def _cost(help_text: str = "", *, allow_null: bool = False) -> serializers.DecimalField:
    return serializers.DecimalField(
        allow_null=allow_null,
        max_digits=24,
        decimal_places=REPORT_PLACES,
        rounding=ROUND_HALF_EVEN,
        required=False,
        help_text=help_text,
    )


# Said of each figure only a utilisation source measures (``reports.MEASURED_COLUMNS``).
NOT_MEASURED = " Null when no utilisation source is configured: not measured."


def _measured_gpu_hours(help_text: str = "") -> serializers.DecimalField:
    """GPU-hours only a utilisation source measures: null without one."""
    return _gpu_hours(help_text + NOT_MEASURED, allow_null=True)


def _measured_cost(help_text: str = "") -> serializers.DecimalField:
    """The cost of GPU-hours only a utilisation source measures: null without one."""
    return _cost(help_text + NOT_MEASURED, allow_null=True)


def _name(help_text: str) -> serializers.CharField:
    return serializers.CharField(required=False, allow_null=True, help_text=help_text)


class RowSerializer(serializers.Serializer[Any]):
    """A report row: the columns the report has (a report grouped by tenant has no queue)."""

    def to_representation(self, instance: Any) -> dict[str, Any]:
        """The row's columns, in the serializer's order, each as its field writes it."""
        return {
            name: field.to_representation(instance[name]) if instance[name] is not None else None
            for name, field in self.fields.items()
            if name in instance
        }


# What a report's tenant of null means (docs/api.md): the CSV writes ``reports.NO_TEAM``.
NO_TEAM_HELP = (
    "The tenant; null for the pool's own queues, which belong to no team (the CSV writes "
    f"{NO_TEAM!r} there)."
)


# A row's ``unit`` (``reports.UNIT``): which hours its GPU-hour columns count; each row's
# last column, so that the columns before it keep their places in the CSVs.
UNIT_HELP = (
    'What its hours count: "GPU", or "MIG instance" for a MIG flavor\'s (MIG instance-hours, '
    "never added to GPU-hours: a row summed over flavors is one unit's, a team of both has a "
    "row of each); its costs add up across units."
)


def _unit() -> serializers.ChoiceField:
    return serializers.ChoiceField(choices=[GPU_UNIT, MIG_UNIT], help_text=UNIT_HELP)


class UsageRowSerializer(RowSerializer):
    """GPU-hours and cost of one period (and tenant, queue, flavor, class when grouped so)."""

    period = serializers.CharField(help_text="2026-03 (month) or 2026-03-10 (day).")
    tenant = _name(NO_TEAM_HELP)
    queue = _name("The queue.")
    flavor = _name("The flavor.")
    priority_class = _name("The priority class.")
    gpu_hours = _gpu_hours()
    cost = _cost("GPU-hours times the price in force each hour.")
    active_gpu_hours = _measured_gpu_hours("Of gpu_hours, those in which the GPUs worked.")
    idle_gpu_hours = _measured_gpu_hours("Of gpu_hours, those allocated but idle (wasted).")
    active_cost = _measured_cost()
    idle_cost = _measured_cost("The cost of the idle allocated GPU-hours.")
    unit = _unit()


LINE_HELP = {
    "used_within_guarantee": "GPU-hours used within the guarantee.",
    "reserved_idle": "GPU-hours of guarantee left idle, charged to the queue holding it.",
    "used_above_guarantee": "GPU-hours used beyond the guarantees.",
    "pool_idle": "Healthy GPU-hours nobody used or reserved.",
    "pool_idle_share": "Its share of the pool idle, in proportion to its use (share_idle).",
    "pool_idle_shared": "The part of the pool idle shared out in proportion to use.",
    "charged": "GPU-hours charged: used plus reserved idle (the Cost page's Charged GPU-hours).",
    "used_active": "Of used, the GPU-hours in which the GPUs worked.",
    "used_idle": "Of used, the GPU-hours allocated but idle.",
    "used_within_guarantee_active": "Of used within guarantee, the active part.",
    "used_within_guarantee_idle": "Of used within guarantee, the idle allocated part.",
    "used_above_guarantee_active": "Of used above guarantee, the active part.",
    "used_above_guarantee_idle": "Of used above guarantee, the idle allocated part.",
}


class AttributionRowSerializer(RowSerializer):
    """One period's lines of a tenant, queue and flavor (as grouped), in GPU-hours and cost."""

    period = serializers.CharField(help_text="2026-03 (month) or 2026-03-10 (day).")
    tenant = _name(NO_TEAM_HELP)
    queue = _name("The queue.")
    flavor = _name("The flavor.")
    guarantee = _gpu_hours("GPU-hours guaranteed (scaled to the healthy capacity).")
    used = _gpu_hours("GPU-hours used.")
    used_within_guarantee = _gpu_hours(LINE_HELP["used_within_guarantee"])
    reserved_idle = _gpu_hours(LINE_HELP["reserved_idle"])
    used_above_guarantee = _gpu_hours(LINE_HELP["used_above_guarantee"])
    pool_idle_share = _gpu_hours(LINE_HELP["pool_idle_share"])
    charged = _gpu_hours(LINE_HELP["charged"])
    used_active = _measured_gpu_hours(LINE_HELP["used_active"])
    used_idle = _measured_gpu_hours(LINE_HELP["used_idle"])
    used_within_guarantee_active = _measured_gpu_hours(LINE_HELP["used_within_guarantee_active"])
    used_within_guarantee_idle = _measured_gpu_hours(LINE_HELP["used_within_guarantee_idle"])
    used_above_guarantee_active = _measured_gpu_hours(LINE_HELP["used_above_guarantee_active"])
    used_above_guarantee_idle = _measured_gpu_hours(LINE_HELP["used_above_guarantee_idle"])
    used_cost = _cost()
    used_within_guarantee_cost = _cost()
    reserved_idle_cost = _cost()
    used_above_guarantee_cost = _cost()
    pool_idle_share_cost = _cost()
    charged_cost = _cost("The cost charged: of used plus of reserved idle.")
    used_active_cost = _measured_cost()
    used_idle_cost = _measured_cost()
    used_within_guarantee_active_cost = _measured_cost()
    used_within_guarantee_idle_cost = _measured_cost()
    used_above_guarantee_active_cost = _measured_cost()
    used_above_guarantee_idle_cost = _measured_cost()
    unit = _unit()


class CapacityRowSerializer(RowSerializer):
    """One period of one flavor: healthy GPU-hours and the four lines that add up to them."""

    period = serializers.CharField(help_text="2026-03 (month) or 2026-03-10 (day).")
    flavor = serializers.CharField()
    capacity = _gpu_hours("Healthy GPU-hours (the four lines add up to them).")
    used = _gpu_hours("GPU-hours used (within plus above guarantee).")
    used_within_guarantee = _gpu_hours(LINE_HELP["used_within_guarantee"])
    reserved_idle = _gpu_hours(LINE_HELP["reserved_idle"])
    used_above_guarantee = _gpu_hours(LINE_HELP["used_above_guarantee"])
    pool_idle = _gpu_hours(LINE_HELP["pool_idle"])
    pool_idle_shared = _gpu_hours(LINE_HELP["pool_idle_shared"])
    used_active = _measured_gpu_hours(LINE_HELP["used_active"])
    used_idle = _measured_gpu_hours(LINE_HELP["used_idle"])
    used_within_guarantee_active = _measured_gpu_hours(LINE_HELP["used_within_guarantee_active"])
    used_within_guarantee_idle = _measured_gpu_hours(LINE_HELP["used_within_guarantee_idle"])
    used_above_guarantee_active = _measured_gpu_hours(LINE_HELP["used_above_guarantee_active"])
    used_above_guarantee_idle = _measured_gpu_hours(LINE_HELP["used_above_guarantee_idle"])
    capacity_cost = _cost()
    used_cost = _cost()
    used_within_guarantee_cost = _cost()
    reserved_idle_cost = _cost()
    used_above_guarantee_cost = _cost()
    pool_idle_cost = _cost()
    pool_idle_shared_cost = _cost()
    used_active_cost = _measured_cost()
    used_idle_cost = _measured_cost()
    used_within_guarantee_active_cost = _measured_cost()
    used_within_guarantee_idle_cost = _measured_cost()
    used_above_guarantee_active_cost = _measured_cost()
    used_above_guarantee_idle_cost = _measured_cost()
    unit = _unit()


class WorkloadCostSerializer(RowSerializer):
    """One workload's GPU-hours and cost over the days asked."""

    namespace = serializers.CharField()
    name = serializers.CharField()
    tenant = _name("The tenant.")
    queue = serializers.CharField()
    gpu_hours = _gpu_hours()
    cost = _cost()
    active_gpu_hours = _measured_gpu_hours("Of gpu_hours, those in which the GPUs worked.")
    idle_gpu_hours = _measured_gpu_hours("Of gpu_hours, those allocated but idle (wasted).")
    unit = _unit()


class ReportViewSet(CSVExport, viewsets.GenericViewSet[Any]):
    """A report: every cost role reads it; rows of the caller's tenants only (finance all)."""

    permission_classes = (ActionRoles,)
    default_roles = COST_ROLES
    query_serializer_class: type[ReportQuerySerializer] = ReportQuerySerializer
    filter_backends = ()  # a report filters through its query serializer

    def get_queryset(self) -> Any:
        """No queryset: a report's rows come from ``build``. The browsable API asks for one
        to draw its filter form (none: the report has no filter backends), so an empty list."""
        return []

    def query_parameter_refusal(self, name: str) -> str | None:
        """Why the report refuses the query parameter ``name`` when it does not take it
        (``gpupool.api.parameters``): a filter it does not apply says so."""
        return self.query_serializer_class().refusal(name)

    def build(self, query: ReportQuery, options: dict[str, Any]) -> Report:
        """The report for ``query`` (each report says which)."""
        raise NotImplementedError

    def list(self, request: Request, *args: Any, **kwargs: Any) -> Any:
        """The report's rows: a JSON page, or all of them as CSV."""
        form = self.query_serializer_class(data=request.query_params)
        form.is_valid(raise_exception=True)
        options = dict(form.validated_data)
        query = ReportQuery(
            start=options.pop("start"),
            end=options.pop("end"),
            period=options.pop("period"),
            filters={name: options.pop(name) for name in FILTERS if name in options},
            tenants=cost_scope(request_access(request)),
        )
        report = self.build(query, options)
        serializer = self.get_serializer_class()
        if self.wants_csv():
            self.csv_name = csv_file_name(self.csv_name, report, query, options)
            rows = (no_team_named(serializer(row).data) for row in report.stream())
            return self.csv_response(_present(report.columns, serializer), rows)
        key = _page_key(request, self.csv_name, query.tenants)
        cached = cache.get(key) if key else None
        if cached is not None:
            return Response(cached)
        page = self.paginate_queryset(report.query)
        response = self.get_paginated_response(serializer(report.rows(page), many=True).data)
        if key:
            cache.set(key, response.data, REPORT_CACHE_S)
        return response


def no_team_named(row: dict[str, Any]) -> dict[str, Any]:
    """A CSV row whose tenant is none (a queue of no tenant's) naming it in words,
    ``reports.NO_TEAM``, as the Cost page does, not a blank cell (JSON keeps null)."""
    if "tenant" in row and row["tenant"] is None:
        row["tenant"] = NO_TEAM
    return row


def csv_file_name(name: str, report: Report, query: ReportQuery, options: dict[str, Any]) -> str:
    """A report's CSV download name: the report, its grouping when asked, its period when its
    rows have one, shared idle, and its days -- so that two downloads of different tables
    never share a name (the Cost page's "per team, the month" and "per team, day by day"
    were both ``attribution-<start>-<end>.csv``)."""
    parts = [name]
    if options.get("by"):
        parts.append("by-" + "-".join(options["by"]))
    if "period" in report.columns:
        parts.append(f"per-{query.period}")
    if options.get("share_idle"):
        parts.append("idle-shared")
    return "-".join([*parts, str(query.start), str(query.end)])


def _page_key(request: Request, report: str, tenants: Any) -> str | None:
    """The cache key of a report page: the roll-ups' version, the report, its parameters and
    the caller's scope, and the utilisation source (measured or not: ``source_name``); None
    before anything is rolled up: nothing to cache."""
    version = roll_up_version()
    if version is None:
        return None
    parameters = sorted((name, sorted(values)) for name, values in request.query_params.lists())
    scope = None if tenants is None else sorted(tenants)
    text = json.dumps([str(version), source_name(), report, parameters, scope, request.get_host()])
    return "gpupool:report:" + hashlib.sha256(text.encode()).hexdigest()


def _present(columns: Sequence[str], serializer: type[serializers.Serializer[Any]]) -> list[str]:
    """The report's columns, in the serializer's order."""
    order: list[str] = list(serializer().fields.keys())
    return [name for name in order if name in columns]


class UsageReportViewSet(ReportViewSet):
    """GPU-hours and cost per day or month by tenant, queue, flavor and priority class."""

    serializer_class = UsageRowSerializer
    query_serializer_class = UsageQuerySerializer
    csv_name = "usage"

    def build(self, query: ReportQuery, options: dict[str, Any]) -> Report:
        """The usage report, grouped as asked."""
        return usage_report(query, by=options.get("by") or USAGE_DIMENSIONS, units=True)

    @extend_schema(parameters=[UsageQuerySerializer])
    def list(self, request: Request, *args: Any, **kwargs: Any) -> Any:
        """GPU-hours and cost per period by tenant, queue, flavor and class (``by``)."""
        return super().list(request, *args, **kwargs)


class AttributionReportViewSet(ReportViewSet):
    """Per tenant or queue and flavor: used within guarantee, reserved idle, used above."""

    serializer_class = AttributionRowSerializer
    query_serializer_class = AttributionQuerySerializer
    csv_name = "attribution"

    def build(self, query: ReportQuery, options: dict[str, Any]) -> Report:
        """The attribution report, grouped as asked."""
        return attribution_report(
            query,
            by=options.get("by") or ATTRIBUTION_DIMENSIONS,
            share_idle=options.get("share_idle", False),
            units=True,
        )

    @extend_schema(parameters=[AttributionQuerySerializer])
    def list(self, request: Request, *args: Any, **kwargs: Any) -> Any:
        """Each tenant's or queue's lines per period and flavor, in GPU-hours and cost."""
        return super().list(request, *args, **kwargs)


class CapacityReportViewSet(ReportViewSet):
    """The pool's healthy capacity per flavor and the four lines that add up to it."""

    serializer_class = CapacityRowSerializer
    query_serializer_class = CapacityQuerySerializer
    csv_name = "capacity"

    def build(self, query: ReportQuery, options: dict[str, Any]) -> Report:
        """The capacity report (the pool's: not limited to the caller's tenants)."""
        return capacity_report(query, share_idle=options.get("share_idle", False), units=True)

    @extend_schema(parameters=[CapacityQuerySerializer])
    def list(self, request: Request, *args: Any, **kwargs: Any) -> Any:
        """Healthy GPU-hours per period and flavor in four lines, with their cost."""
        return super().list(request, *args, **kwargs)


class WorkloadReportViewSet(ReportViewSet):
    """GPU-hours and cost per workload, the costliest first."""

    serializer_class = WorkloadCostSerializer
    query_serializer_class = WorkloadQuerySerializer
    csv_name = "workload-costs"  # not "workloads", the workloads list's download

    def build(self, query: ReportQuery, options: dict[str, Any]) -> Report:
        """The per-workload report."""
        return workload_report(query, units=True)

    @extend_schema(parameters=[WorkloadQuerySerializer])
    def list(self, request: Request, *args: Any, **kwargs: Any) -> Any:
        """Each workload's GPU-hours and cost over the days asked."""
        return super().list(request, *args, **kwargs)


# ----------------------------------------------------------------------------- usage intervals


class UsageIntervalSerializer(PlannedRows, serializers.ModelSerializer[UsageInterval]):
    """GPUs of one flavor held by one workload from start to end (open while it runs)."""

    namespace = serializers.CharField(source="workload.namespace", read_only=True)
    workload = serializers.CharField(source="workload.name", read_only=True)
    tenant = serializers.CharField(source="tenant.name", read_only=True, allow_null=True)
    queue = serializers.CharField(source="queue.name", read_only=True)
    flavor = serializers.CharField(source="flavor.name", read_only=True)
    priority_class = serializers.CharField(source="priority_class.name", read_only=True)

    class Meta:
        model = UsageInterval
        fields = (
            "id",
            "namespace",
            "workload",
            "tenant",
            "queue",
            "flavor",
            "priority_class",
            "gpus",
            "started_at",
            "ended_at",
        )


def _named(model: type[Model]) -> Any:
    """A filter method matching the row of ``model`` named so, as one id (names are unique):
    the database then sees a single value and walks its (queue, start) index newest first."""

    def method(queryset: QuerySet[Any], name: str, value: str) -> QuerySet[Any]:
        found = model._default_manager.filter(name=value).values("pk")[:1]
        return queryset.filter(**{name: Subquery(found)})

    return method


class UsageIntervalFilter(filters.FilterSet):  # type: ignore[misc]
    """Filter usage intervals by names, workload and time (a tenant, queue or flavor that
    names nothing is a 400 naming it: ``NameFilter``)."""

    tenant = NameFilter(field_name="tenant", method=_named(Tenant), names=Tenant)
    queue = NameFilter(field_name="queue", method=_named(Queue), names=Queue)
    flavor = NameFilter(field_name="flavor", method=_named(Flavor), names=Flavor)
    namespace = filters.CharFilter(field_name="workload__namespace")
    workload = filters.CharFilter(field_name="workload__name")
    started_after = UtcDateTimeFilter(field_name="started_at", lookup_expr="gte")
    started_before = UtcDateTimeFilter(field_name="started_at", lookup_expr="lt")
    open = filters.BooleanFilter(field_name="ended_at", lookup_expr="isnull")

    class Meta:
        model = UsageInterval
        fields = ("tenant", "queue", "flavor", "namespace", "workload")


class NewestFirst(Cursors):
    """Pages of a long log, newest first, that never count it (5,000,000 usage intervals
    are too many to count per page): ``?cursor=`` from ``next`` and ``previous``,
    ``?page_size=`` as every list reads it (``gpupool.api.pagination``)."""

    ordering = ("-started_at", "-id")


class UsageIntervalViewSet(CSVExport, TenantScoped, viewsets.ReadOnlyModelViewSet[UsageInterval]):
    """The usage intervals the control loop records: the raw facts under every report."""

    # Only the columns a row shows: the workload's row carries JSON and a dozen times.
    queryset = (
        UsageInterval.objects.select_related(
            "workload", "tenant", "queue", "flavor", "priority_class"
        )
        .only(
            "gpus",
            "started_at",
            "ended_at",
            "workload__namespace",
            "workload__name",
            "tenant__name",
            "queue__name",
            "flavor__name",
            "priority_class__name",
        )
        .order_by("-started_at", "-id")
    )
    serializer_class = UsageIntervalSerializer
    filterset_class = UsageIntervalFilter
    permission_classes = (ActionRoles,)
    default_roles = COST_ROLES
    tenant_field = "tenant"
    finance_sees_all = True
    pagination_class = NewestFirst
    filter_backends = (StrictFilterBackend,)
    csv_name = "usage-intervals"


def register(router: BaseRouter) -> None:
    """Add the reports and the usage intervals to the API router."""
    router.register("reports/usage", UsageReportViewSet, basename="report-usage")
    router.register("reports/attribution", AttributionReportViewSet, basename="report-attribution")
    router.register("reports/capacity", CapacityReportViewSet, basename="report-capacity")
    router.register("reports/workloads", WorkloadReportViewSet, basename="report-workloads")
    router.register("usage", UsageIntervalViewSet, basename="usage")
