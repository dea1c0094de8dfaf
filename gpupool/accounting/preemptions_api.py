"""API of preemption events (``/api/v1/preemptions/``): who was stopped, why, by which queue
and class, and the GPU-hours it cost; ``?format=csv`` downloads every event the filters keep. A
tenant sees the events whose victim is one of its workloads; the preemptor's workload name and
owner show only to admins and the preemptor's own tenant (``workloads.queries.sees_preemptor``).
The control loop records the events (``do_record_preemption``); nobody writes them here.

(Usage and cost live in this app's ``api.py``; preemptions are apart so that each has one
owner.)
"""

from __future__ import annotations

from typing import Any

from django.db.models import Manager
from django_filters import rest_framework as filters
from drf_spectacular.utils import extend_schema_field
from rest_framework import mixins, serializers, viewsets
from rest_framework.routers import BaseRouter

from gpupool.accounting.choices import PreemptionReason
from gpupool.accounting.models import PreemptionEvent
from gpupool.api.filters import UtcDateTimeFilter
from gpupool.api.permissions import TENANT_ROLES, ActionRoles, TenantScoped
from gpupool.api.tables import CSVExport
from gpupool.workloads.api import PreemptionEventSerializer
from gpupool.workloads.queries import EvictionDrain, node_drains, preemption_list

# Where a list's serializer context keeps its page's drains per event id (``node_drains``).
PAGE_DRAINS = "page_drains"


class DrainSerializer(serializers.Serializer[EvictionDrain]):
    """A node's drain that evicted the victim: the node, who drained it, why and when."""

    node = serializers.CharField()
    drained_by = serializers.CharField(source="by")
    reason = serializers.CharField()
    drained_at = serializers.DateTimeField(source="at")


class PreemptionListSerializer(serializers.ListSerializer[PreemptionEvent]):
    """A page of preemptions: the drains that explain its admin evictions read for the whole
    page in one query (none when it has no admin eviction with its nodes)."""

    def to_representation(self, data: Any) -> list[Any]:
        """The rows, with ``PAGE_DRAINS`` in the context while they render."""
        rows = list(data.all() if isinstance(data, Manager) else data)
        self.context[PAGE_DRAINS] = node_drains(
            (row.pk, row.reason, row.at, row.nodes) for row in rows
        )
        try:
            return super().to_representation(rows)
        finally:
            del self.context[PAGE_DRAINS]


class PreemptionSerializer(PreemptionEventSerializer):
    """A preemption as ``PreemptionEventSerializer`` says it, with the nodes the victim ran on
    and, for an admin eviction, the drain of those nodes that caused it: which node, who
    drained it and why (empty for an eviction no drain explains, and for events recorded
    before their nodes were kept)."""

    nodes = serializers.ListField(child=serializers.CharField(), read_only=True)
    drains = serializers.SerializerMethodField()

    class Meta(PreemptionEventSerializer.Meta):
        fields = (*PreemptionEventSerializer.Meta.fields, "nodes", "drains")  # type: ignore[assignment]
        read_only_fields = fields  # type: ignore[assignment]
        list_serializer_class = PreemptionListSerializer

    @extend_schema_field(DrainSerializer(many=True))
    def get_drains(self, event: PreemptionEvent) -> list[dict[str, Any]]:
        """The drains that evicted it (an admin eviction), oldest node name first."""
        page = self.context.get(PAGE_DRAINS)
        if page is None:  # one event (its detail)
            page = node_drains([(event.pk, event.reason, event.at, event.nodes)])
        drains = DrainSerializer(page.get(event.pk, ()), many=True)  # type: ignore[arg-type]
        return list(drains.data)


class PreemptionFilter(filters.FilterSet):  # type: ignore[misc]
    """Filter events by reason, victim's queue, tenant and namespace, preemptor's queue and
    tenant, and time."""

    reason = filters.MultipleChoiceFilter(choices=PreemptionReason.choices)
    queue = filters.CharFilter(field_name="victim_queue__name")
    tenant = filters.CharFilter(field_name="victim_tenant__name")
    namespace = filters.CharFilter(field_name="victim__namespace")
    preemptor_queue = filters.CharFilter(field_name="preemptor_queue__name")
    preemptor_tenant = filters.CharFilter(field_name="preemptor_tenant__name")
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
    serializer_class = PreemptionSerializer
    filterset_class = PreemptionFilter
    ordering_fields = ("at", "lost_gpu_hours", "gpus_freed")
    permission_classes = (ActionRoles,)
    default_roles = TENANT_ROLES
    tenant_field = "victim_tenant"
    csv_name = "preemptions"


def register(router: BaseRouter) -> None:
    """Add this module's resources to the API router."""
    router.register("preemptions", PreemptionEventViewSet, basename="preemption")
