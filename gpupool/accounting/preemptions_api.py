"""API of preemption events (``/api/v1/preemptions/``): who was stopped, why, by which queue
and class, and the GPU-hours it cost; ``?format=csv`` downloads every event the filters keep. A
tenant sees the events whose victim is one of its workloads; the preemptor's workload name and
owner show only to admins and the preemptor's own tenant (``workloads.queries.sees_preemptor``).
With ``?side=caused`` it sees instead the events its own work caused (the preemptor's tenant is
one of its tenants; admins: every event a tenant's work caused), and of a victim of another
tenant the same as a victim's tenant sees of the preemptor: its queue and tenant, not its name
or nodes (``Access.sees_tenant`` of the victim's tenant).
An event is said as a workload's detail says its preemptions (``workloads.api``'s
``PreemptionEventSerializer``): with the victim's nodes and, for an admin eviction, the drain
of those nodes that caused it.
The control loop records the events (``do_record_preemption``); nobody writes them here.

(Usage and cost live in this app's ``api.py``; preemptions are apart so that each has one
owner.)
"""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from django_filters import rest_framework as filters
from rest_framework import mixins, viewsets
from rest_framework.routers import BaseRouter

from gpupool.accounting.choices import PreemptionReason
from gpupool.accounting.models import PreemptionEvent
from gpupool.api.access import request_access
from gpupool.api.filters import NameFilter, UtcDateTimeFilter
from gpupool.api.permissions import TENANT_ROLES, ActionRoles, TenantScoped
from gpupool.api.tables import CSVExport, attachment
from gpupool.quotas.models import Queue
from gpupool.tenancy.models import Tenant
from gpupool.workloads.api import PreemptionEventSerializer
from gpupool.workloads.queries import preemption_list

# ``?side=``: which side of the events the caller's tenants were on, as the Preemptions page
# says a row's side: their work was stopped (the default) or their work caused it.
SUFFERED = "suffered"
CAUSED = "caused"
SIDES = (
    (SUFFERED, "the preemptions of the caller's tenants' work (the victim's tenant)"),
    (CAUSED, "the preemptions the caller's tenants' work caused (the preemptor's tenant)"),
)


class PreemptionFilter(filters.FilterSet):  # type: ignore[misc]
    """Filter events by side, reason, victim's queue, tenant and namespace, preemptor's queue
    and tenant, and time (a queue or tenant that names nothing is a 400 naming it:
    ``NameFilter``; a side that is none is a 400 naming the sides)."""

    side = filters.ChoiceFilter(
        choices=SIDES,
        method="filter_side",
        help_text="suffered (the default): the preemptions of your tenants' work; caused: "
        "those your tenants' work caused, another tenant's victim named by its queue and "
        "tenant only (admins: every event a tenant's work caused).",
    )
    reason = filters.MultipleChoiceFilter(choices=PreemptionReason.choices)
    queue = NameFilter(field_name="victim_queue__name", names=Queue)
    tenant = NameFilter(field_name="victim_tenant__name", names=Tenant)
    namespace = filters.CharFilter(
        method="filter_namespace",
        help_text="The victim's namespace; only a victim the caller may see matches (with "
        "side=caused, another tenant's victim is not named, not even by its namespace).",
    )
    preemptor_queue = NameFilter(field_name="preemptor_queue__name", names=Queue)
    preemptor_tenant = NameFilter(field_name="preemptor_tenant__name", names=Tenant)
    since = UtcDateTimeFilter(field_name="at", lookup_expr="gte")
    until = UtcDateTimeFilter(field_name="at", lookup_expr="lt")

    class Meta:
        model = PreemptionEvent
        fields = (
            "side",
            "reason",
            "queue",
            "tenant",
            "namespace",
            "preemptor_queue",
            "preemptor_tenant",
            "since",
            "until",
        )

    def filter_side(
        self, rows: QuerySet[PreemptionEvent], name: str, value: str
    ) -> QuerySet[PreemptionEvent]:
        """The rows as they are: the view scopes them by side (``PreemptionEventViewSet.scope``),
        since a side says which events the caller may see, not only which it wants."""
        return rows

    def filter_namespace(
        self, rows: QuerySet[PreemptionEvent], name: str, value: str
    ) -> QuerySet[PreemptionEvent]:
        """The events whose victim is in the namespace and one the caller may see."""
        rows = rows.filter(victim__namespace=value)
        access = request_access(self.request)
        return rows if access.admin else rows.filter(victim_tenant__in=access.tenant_ids)


class PreemptionEventViewSet(
    CSVExport,
    TenantScoped,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    viewsets.GenericViewSet[PreemptionEvent],
):
    """Preemptions of the caller's tenants' workloads (admins: all), or with ``?side=caused``
    those their work caused (admins: every one a tenant's work caused), newest first."""

    queryset = preemption_list().order_by("-at", "-id")
    serializer_class = PreemptionEventSerializer  # as a workload's detail says them
    filterset_class = PreemptionFilter
    ordering_fields = ("at", "lost_gpu_hours", "gpus_freed")
    permission_classes = (ActionRoles,)
    default_roles = TENANT_ROLES
    tenant_field = "victim_tenant"
    csv_name = "preemptions"

    def side(self) -> str:
        """The side asked (``?side=``); a value that is none is the filter's to refuse."""
        return str(self.request.query_params.get("side", "")) or SUFFERED

    def scope(self, queryset: QuerySet[Any]) -> QuerySet[Any]:
        """The events of the caller's side: those of its tenants' victims (``TenantScoped``),
        or with ``?side=caused`` those its tenants' work caused."""
        if self.side() != CAUSED:
            return super().scope(queryset)
        access = self.access()
        if access.admin:
            return queryset.filter(preemptor_tenant__isnull=False)
        return queryset.filter(preemptor_tenant__in=access.tenant_ids)

    def csv_response(self, columns: Any, rows: Any) -> Any:
        """The download, named for its side (``preemptions-caused.csv``: a team downloads
        both sides, and neither overwrites the other)."""
        response = super().csv_response(columns, rows)
        if self.side() == CAUSED:
            response["Content-Disposition"] = attachment(f"{self.csv_name}-{CAUSED}")
        return response


def register(router: BaseRouter) -> None:
    """Add this module's resources to the API router."""
    router.register("preemptions", PreemptionEventViewSet, basename="preemption")
