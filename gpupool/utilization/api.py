"""API of GPU use against allocation (``/api/v1/utilization/...``), JSON or CSV.

``tenants/``: allocated, active and idle GPU-hours per tenant; ``wasters/``: the workloads
that held GPUs idle longest, named as the per-workload cost report names them
(``named_tenants_of``, the Utilisation page's rule: admins and finance every team's, leads
and members their own teams'; docs/cost.md, "Who reads what"). Each answers a list of
rows over ``?since=&until=`` (ISO 8601) or ``?window=`` (``windows.WINDOWS``, the Utilisation
page's and the command line's: ``6h``, ``24h``, ``7d`` before ``until``; any other value
is a 400 naming ``window`` and those it takes, never the default); asked for neither, the
default window (``windows.DEFAULT_WINDOW``: the last 24 hours, as the page). For the caller's
tenants (``tenants/``: admins and finance every tenant); ``?format=csv`` gives the same rows as
CSV. Read-only: the control loop's sampler writes the facts.

Without a utilisation source (``GPUPOOL_UTILIZATION_SOURCE`` names none: ``none``, or
``kubernetes`` without Prometheus) no GPU-hour was measured, and none is reported as idle, as
the Utilisation page says: each ``tenants/`` row says ``"source": "none"`` and its active, idle
and unobserved GPU-hours and active share are null (empty in the CSV), allocation alone being
known; ``wasters/`` answers 409 ``not_measured`` (in the CSV, the error's row) rather than rank
unmeasured hours as idle.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from django import forms
from django.utils.dateparse import parse_datetime
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import renderers, serializers, viewsets
from rest_framework.exceptions import APIException, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.routers import BaseRouter

from gpupool.api.access import Access
from gpupool.api.errors import ErrorSerializer
from gpupool.api.filters import UtcDateTimeField
from gpupool.api.permissions import COST_ROLES, ActionRoles, TenantScoped
from gpupool.api.tables import CSVRenderer
from gpupool.control.clock import pool_clock
from gpupool.utilization.queries import (
    NO_SOURCE,
    measured,
    named_tenants_of,
    tenant_utilization,
    top_wasters,
)
from gpupool.utilization.windows import DEFAULT_WINDOW, MAX_WINDOW, WINDOWS, not_a_window


def _time(request: Request, name: str) -> datetime | None:
    text = request.query_params.get(name)
    if not text:
        return None
    try:
        value = parse_datetime(text.replace(" ", "+"))
    except ValueError:  # well formed, but no real time (hour 25, 31 February): as unreadable
        value = None
    if value is None or value.tzinfo is None:
        raise ValidationError({name: "an ISO 8601 time with a zone, e.g. 2026-12-01T10:00:00Z"})
    try:  # in UTC, by the lists' rule: a time outside UTC's calendar is a 400 naming it
        in_utc = UtcDateTimeField().to_python(value)
    except forms.ValidationError as error:
        raise ValidationError({name: error.messages}) from None
    return in_utc or value


def _named_window(request: Request) -> timedelta | None:
    """``?window=``: one of ``WINDOWS`` (None when not given or empty), else a 400 naming it
    and the windows it takes (before, the API did not read it: any value gave the last hour)."""
    name = request.query_params.get("window")
    if not name:  # as an empty since: the default
        return None
    if name not in WINDOWS:
        raise ValidationError({"window": f"{not_a_window(name)} (or give since and until)"})
    if request.query_params.get("since"):
        raise ValidationError({"window": "give window or since, not both"})
    return WINDOWS[name]


def window_of(request: Request) -> tuple[datetime, datetime]:
    """``since`` and ``until`` from the query (``window``: that long before ``until``; until
    defaults to the pool's clock, the end of the last finished cycle, and since to the
    default window, ``DEFAULT_WINDOW``, before it), checked."""
    length = _named_window(request) or WINDOWS[DEFAULT_WINDOW]
    until = _time(request, "until") or pool_clock()
    since = _time(request, "since") or _before(until, length)
    if since >= until:
        raise ValidationError(
            {"since": f"must be before until ({since.isoformat()} >= {until.isoformat()})"}
        )
    if until - since > MAX_WINDOW:
        raise ValidationError({"since": f"a window is at most {MAX_WINDOW.days} days"})
    return since, until


def _before(until: datetime, length: timedelta) -> datetime:
    """``length`` before ``until``, or the calendar's first moment (UTC) when that is
    earlier: the default window of an ``until`` in year 1 is what there is of it."""
    earliest = datetime.min.replace(tzinfo=UTC)
    return until - length if until - earliest > length else earliest


def tenants_of(access: Access) -> frozenset[int] | None:
    """The tenants whose figures the caller may see (None: all of them)."""
    return None if access.admin or access.finance else access.tenant_ids


NOT_MEASURED = " Null when no utilisation source is configured (source none): not measured."


class NotMeasured(APIException):
    """No utilisation source is configured, so no GPU's use was measured: 409."""

    status_code = 409
    default_code = "not_measured"
    default_detail = (
        "not known: no utilisation source is configured (GPUPOOL_UTILIZATION_SOURCE names "
        "none), so no workload's GPUs were measured, idle or not; docs/utilization.md says "
        "how to point it at one"
    )


class TenantUtilizationRowSerializer(serializers.Serializer[dict[str, Any]]):
    """One tenant's GPU-hours in the window."""

    tenant = serializers.CharField()
    allocated_gpu_hours = serializers.FloatField(
        help_text="Allocated (usage intervals) of the whole-GPU flavors: a MIG flavor's MIG "
        "instance-hours are never added to them (the cost reports give them, in their unit)."
    )
    active_gpu_hours = serializers.FloatField(
        allow_null=True, help_text="Allocated and seen active by the source." + NOT_MEASURED
    )
    idle_gpu_hours = serializers.FloatField(
        allow_null=True, help_text="Allocated less active." + NOT_MEASURED
    )
    unobserved_gpu_hours = serializers.FloatField(
        allow_null=True,
        help_text="Of idle, those the utilisation source did not observe (allocated less "
        "observed)." + NOT_MEASURED,
    )
    active_share = serializers.FloatField(
        allow_null=True,
        help_text="Active of allocated; null when nothing was allocated, or not measured.",
    )
    # (declared fields leave the class, so this "source" does not hide Field.source)
    source = serializers.CharField(  # type: ignore[assignment]
        help_text="The utilisation source that measured the row (GPUPOOL_UTILIZATION_SOURCE), "
        f"or {NO_SOURCE!r} when none is configured: then only allocated GPU-hours are known, "
        "and none is counted as active or idle."
    )


class WasterRowSerializer(serializers.Serializer[dict[str, Any]]):
    """One workload's GPU-hours held and held idle in the window."""

    workload = serializers.CharField()
    queue = serializers.CharField()
    tenant = serializers.CharField()
    held_gpu_hours = serializers.FloatField(help_text="Allocated (usage intervals).")
    idle_gpu_hours = serializers.FloatField(help_text="Held less active.")
    unobserved_gpu_hours = serializers.FloatField(
        help_text="Of idle, those the utilisation source did not observe (held less observed)."
    )


WINDOW_PARAMETERS = [
    OpenApiParameter(
        "since",
        OpenApiTypes.DATETIME,
        description=f"default: the default window ({DEFAULT_WINDOW}) before until",
    ),
    OpenApiParameter(
        "window",
        str,
        enum=list(WINDOWS),
        default=DEFAULT_WINDOW,
        description="instead of since: this long before until (the Utilisation page's and "
        "the command line's windows); any other value is a 400 naming window",
    ),
    OpenApiParameter(
        "until",
        OpenApiTypes.DATETIME,
        description="default: the pool's clock (the end of the last finished cycle)",
    ),
]


class _UtilizationViewSet(TenantScoped, viewsets.ViewSet):
    permission_classes = (ActionRoles,)
    default_roles = COST_ROLES
    renderer_classes = (renderers.JSONRenderer, renderers.BrowsableAPIRenderer, CSVRenderer)


class TenantUtilizationViewSet(_UtilizationViewSet):
    """Allocated, active and idle GPU-hours per tenant in a window."""

    csv_fields = tuple(TenantUtilizationRowSerializer().fields)
    csv_name = "utilization-teams"

    @extend_schema(parameters=WINDOW_PARAMETERS, responses=TenantUtilizationRowSerializer)
    def list(self, request: Request) -> Response:
        """The caller's tenants' figures (admins and finance: all); without a utilisation
        source, allocation alone (``source`` ``none``, the measured figures null)."""
        since, until = window_of(request)
        return Response(
            tenant_utilization(since, until, tenants_of(self.access()), with_source=True)
        )


class WasterViewSet(_UtilizationViewSet):
    """The workloads that held GPUs idle longest in a window."""

    csv_fields = tuple(WasterRowSerializer().fields)
    csv_name = "utilization-wasters"

    @extend_schema(
        parameters=[
            *WINDOW_PARAMETERS,
            OpenApiParameter("limit", int, description="how many workloads, 1-100 (10)"),
        ],
        responses={
            200: WasterRowSerializer,
            409: OpenApiResponse(
                ErrorSerializer,
                description="No utilisation source is configured (code not_measured): no "
                "workload's GPUs were measured, so none is listed as idle.",
            ),
        },
    )
    def list(self, request: Request) -> Response:
        """The workloads the caller sees by name (``named_tenants_of``, the per-workload cost
        report's scope: admins and finance every team's, leads and members their own
        teams'), most idle first; 409 without a utilisation source (nothing measured: none is
        listed as idle)."""
        since, until = window_of(request)
        try:
            limit = int(request.query_params.get("limit", "10"))
            if not 1 <= limit <= 100:
                raise ValueError(limit)
        except ValueError:
            raise ValidationError({"limit": "a whole number from 1 to 100"}) from None
        if not measured():
            raise NotMeasured()
        return Response(top_wasters(since, until, limit, named_tenants_of(self.access())))


def register(router: BaseRouter) -> None:
    """Add this module's resources to the API router."""
    router.register("utilization/tenants", TenantUtilizationViewSet, basename="utilization-tenant")
    router.register("utilization/wasters", WasterViewSet, basename="utilization-waster")
