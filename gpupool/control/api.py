"""API of the control loop's records and the pool's shape: scheduling cycles (admins; every
role reads the last one's summary) and fragmentation per flavor (every role), computed by the
core once per finished cycle (``control.queries.pool_figures``)."""

from __future__ import annotations

from typing import Any

from django_filters import rest_framework as filters
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, serializers, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import APIException, NotFound
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.routers import BaseRouter

from gpupool.api.filters import UtcDateTimeFilter
from gpupool.api.permissions import ADMINS, EVERYONE, ActionRoles
from gpupool.control.choices import CycleStatus
from gpupool.control.models import SchedulingCycle
from gpupool.control.queries import last_finished_cycle_id, pool_figures
from gpupool.control.snapshot import SnapshotError


class PoolNotPlannable(APIException):
    """The database cannot be planned right now (e.g. no default priority class): 409."""

    status_code = 409
    default_code = "conflict"


class CycleSummarySerializer(serializers.ModelSerializer[SchedulingCycle]):
    """When a cycle ran (the wall clock, and the pool's), how long it took, and what it
    decided (counts)."""

    duration_s = serializers.FloatField(allow_null=True, read_only=True)
    cluster_at = serializers.DateTimeField(
        allow_null=True,
        read_only=True,
        help_text="The pool's clock at the cycle (the cluster's, which stamps what it recorded; "
        "started_at and finished_at are the wall clock's); null for a cycle that recorded "
        "nothing.",
    )

    class Meta:
        model = SchedulingCycle
        fields: tuple[str, ...] = (
            "id",
            "started_at",
            "cluster_at",
            "finished_at",
            "duration_s",
            "status",
            "nodes",
            "workloads",
            "admitted",
            "evicted",
            "pending",
        )
        read_only_fields: tuple[str, ...] = fields


class CycleSerializer(CycleSummarySerializer):
    """A scheduling cycle's whole record, its error included."""

    class Meta(CycleSummarySerializer.Meta):
        fields = (*CycleSummarySerializer.Meta.fields, "error")
        read_only_fields = fields


class CycleFilter(filters.FilterSet):  # type: ignore[misc]
    """Filter cycles by outcome and start time."""

    status = filters.MultipleChoiceFilter(choices=CycleStatus.choices)
    since = UtcDateTimeFilter(field_name="started_at", lookup_expr="gte")
    until = UtcDateTimeFilter(field_name="started_at", lookup_expr="lt")

    class Meta:
        model = SchedulingCycle
        fields: tuple[str, ...] = ("status", "since", "until")


class SchedulingCycleViewSet(
    mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet[SchedulingCycle]
):
    """Scheduling cycles, newest first (admins); every role reads the last one's summary."""

    queryset = SchedulingCycle.objects.order_by("-started_at", "-id")
    serializer_class = CycleSerializer
    filterset_class = CycleFilter
    ordering_fields = ("started_at",)
    permission_classes = (ActionRoles,)
    default_roles = ADMINS
    action_roles = {"latest": EVERYONE}

    @extend_schema(responses={200: CycleSummarySerializer})
    @action(detail=False, methods=["get"])
    def latest(self, request: Request) -> Response:
        """The last finished cycle: when, how long, and its counts (404 before the first)."""
        cycle_id = last_finished_cycle_id()
        if cycle_id is None:
            raise NotFound("No scheduling cycle has finished yet.")
        return Response(CycleSummarySerializer(SchedulingCycle.objects.get(pk=cycle_id)).data)


class GangFitSerializer(serializers.Serializer[Any]):
    """How many gangs of ``gpus`` GPUs, each inside one NVLink domain, fit now."""

    gpus = serializers.IntegerField()
    pods = serializers.IntegerField(help_text="Pods of the gang.")
    gpus_per_pod = serializers.IntegerField()
    gangs = serializers.IntegerField()


class FlavorFragmentationSerializer(serializers.Serializer[Any]):
    """One flavor's free, fragmented and stranded GPUs, and the gangs that fit now."""

    flavor = serializers.CharField()
    nodes = serializers.IntegerField()
    domains = serializers.IntegerField(help_text="NVLink domains.")
    healthy_gpus = serializers.IntegerField(help_text="Healthy GPUs of uncordoned nodes.")
    free_gpus = serializers.FloatField()
    fragmented_gpus = serializers.FloatField(
        help_text="Free GPUs the usual work cannot use where they are (FGD's measure)."
    )
    stranded_gpus = serializers.FloatField(
        help_text="Free GPUs on nodes without the CPU the usual work brings along."
    )
    largest_gang_gpus = serializers.IntegerField(
        help_text="The most whole GPUs one gang could take inside one NVLink domain now."
    )
    gangs = GangFitSerializer(many=True)


class FragmentationSerializer(serializers.Serializer[Any]):
    """The pool's fragmentation per flavor, and the cycle whose view of the pool it is."""

    cycle_id = serializers.IntegerField(allow_null=True)
    at = serializers.DateTimeField()
    flavors = FlavorFragmentationSerializer(many=True)


class OneObjectSchema(AutoSchema):
    """The schema of a ``list`` that answers one object, not an array of them."""

    def _is_list_view(self, serializer: Any = None) -> bool:
        return False


class FragmentationViewSet(viewsets.ViewSet):
    """Fragmentation per flavor, the pool's public state: every role reads it."""

    schema = OneObjectSchema()
    permission_classes = (ActionRoles,)
    default_roles = EVERYONE
    serializer_class = FragmentationSerializer
    plans_the_pool = ("list",)  # 409 when the pool cannot be planned (api.schema)

    @extend_schema(responses={200: FragmentationSerializer})
    def list(self, request: Request) -> Response:
        """Per flavor: free, fragmented and stranded GPUs, the largest gang that fits in one
        NVLink domain now, and how many gangs of 1, 2, 4, 8, 16 and 72 GPUs fit at once."""
        try:
            view = pool_figures()
        except SnapshotError as error:
            raise PoolNotPlannable(f"The pool cannot be planned: {error}") from None
        body = {"cycle_id": view.cycle_id, "at": view.at, "flavors": view.value.fragmentation}
        return Response(FragmentationSerializer(body).data)


def register(router: BaseRouter) -> None:
    """Add this app's resources to the API router."""
    router.register("scheduling-cycles", SchedulingCycleViewSet, basename="scheduling-cycle")
    router.register("fragmentation", FragmentationViewSet, basename="fragmentation")
