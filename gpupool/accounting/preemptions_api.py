"""API of preemption events (``/api/v1/preemptions/``): who was stopped, why, by which queue
and class, and the GPU-hours it cost; ``?format=csv`` downloads every event the filters keep. A
tenant sees the events whose victim is one of its workloads; the preemptor's workload name and
owner show only to admins and the preemptor's own tenant (``workloads.queries.sees_preemptor``).
An event is said as a workload's detail says its preemptions (``workloads.api``'s
``PreemptionEventSerializer``): with the victim's nodes and, for an admin eviction, the drain
of those nodes that caused it.
The control loop records the events (``do_record_preemption``); nobody writes them here.

(Usage and cost live in this app's ``api.py``; preemptions are apart so that each has one
owner.)
"""

from __future__ import annotations

from django_filters import rest_framework as filters
from rest_framework import mixins, viewsets
from rest_framework.routers import BaseRouter

from gpupool.accounting.choices import PreemptionReason
from gpupool.accounting.models import PreemptionEvent
from gpupool.api.filters import NameFilter, UtcDateTimeFilter
from gpupool.api.permissions import TENANT_ROLES, ActionRoles, TenantScoped
from gpupool.api.tables import CSVExport
from gpupool.quotas.models import Queue
from gpupool.tenancy.models import Tenant
from gpupool.workloads.api import PreemptionEventSerializer
from gpupool.workloads.queries import preemption_list


class PreemptionFilter(filters.FilterSet):  # type: ignore[misc]
    """Filter events by reason, victim's queue, tenant and namespace, preemptor's queue and
    tenant, and time (a queue or tenant that names nothing is a 400 naming it:
    ``NameFilter``)."""

    reason = filters.MultipleChoiceFilter(choices=PreemptionReason.choices)
    queue = NameFilter(field_name="victim_queue__name", names=Queue)
    tenant = NameFilter(field_name="victim_tenant__name", names=Tenant)
    namespace = filters.CharFilter(field_name="victim__namespace")
    preemptor_queue = NameFilter(field_name="preemptor_queue__name", names=Queue)
    preemptor_tenant = NameFilter(field_name="preemptor_tenant__name", names=Tenant)
    since = UtcDateTimeFilter(field_name="at", lookup_expr="gte")
    until = UtcDateTimeFilter(field_name="at", lookup_expr="lt")

    class Meta:
        model = PreemptionEvent
        fields = (
            "reason",
            "queue",
            "tenant",
            "namespace",
            "preemptor_queue",
            "preemptor_tenant",
            "since",
            "until",
        )


class PreemptionEventViewSet(
    CSVExport,
    TenantScoped,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    viewsets.GenericViewSet[PreemptionEvent],
):
    """Preemptions of the caller's tenants' workloads (admins: all), newest first."""

    queryset = preemption_list().order_by("-at", "-id")
    serializer_class = PreemptionEventSerializer  # as a workload's detail says them
    filterset_class = PreemptionFilter
    ordering_fields = ("at", "lost_gpu_hours", "gpus_freed")
    permission_classes = (ActionRoles,)
    default_roles = TENANT_ROLES
    tenant_field = "victim_tenant"
    csv_name = "preemptions"


def register(router: BaseRouter) -> None:
    """Add this module's resources to the API router."""
    router.register("preemptions", PreemptionEventViewSet, basename="preemption")
