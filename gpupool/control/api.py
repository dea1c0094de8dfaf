"""API of the control loop's records and the pool's shape: scheduling cycles (admins; every
role reads the last one's summary) and fragmentation per flavor (every role), computed by the
core once per finished cycle (``control.queries.pool_figures``)."""

from __future__ import annotations

from dataclasses import asdict
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
from gpupool.inventory.models import Flavor
from gpupool.inventory.queries import GANG_SIZES
from gpupool.inventory.units import GPU_UNIT, MIG_UNIT, flavor_unit
from gpupool.number_formats import listed


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


# What every amount of a flavor's figures counts, as their help texts say it.
IN_UNIT = "in the flavor's unit (its unit field: GPUs, or a MIG flavor's MIG instances)"


class GangFitSerializer(serializers.Serializer[Any]):
    """How many gangs of ``gpus`` GPUs (a MIG flavor's: MIG instances), each inside one
    NVLink domain, fit now."""

    gpus = serializers.IntegerField(help_text=f"The gang's size, {IN_UNIT}.")
    pods = serializers.IntegerField(help_text="Pods of the gang.")
    gpus_per_pod = serializers.IntegerField(help_text=f"Each pod's size, {IN_UNIT}.")
    gangs = serializers.IntegerField(help_text="Gangs of this size that fit at once.")


class FlavorFragmentationSerializer(serializers.Serializer[Any]):
    """One flavor's free, fragmented and stranded GPUs, and the gangs that fit now, each
    amount in the flavor's ``unit`` (the fields keep their ``gpus`` names)."""

    flavor = serializers.CharField()
    unit = serializers.ChoiceField(
        choices=[GPU_UNIT, MIG_UNIT],
        help_text='What the flavor\'s amounts count: "GPU", or "MIG instance" for a MIG flavor '
        "(its MIG instances, never added to another flavor's GPUs).",
    )
    nodes = serializers.IntegerField()
    domains = serializers.IntegerField(help_text="NVLink domains.")
    healthy_gpus = serializers.IntegerField(
        help_text=f"Healthy GPUs of nodes that take pods (not cordoned, excluded or gone), "
        f"{IN_UNIT}."
    )
    free_gpus = serializers.FloatField(help_text=f"Free GPUs, {IN_UNIT}.")
    fragmented_gpus = serializers.FloatField(
        help_text=f"Free GPUs the usual work cannot use where they are (FGD's measure), {IN_UNIT}."
    )
    stranded_gpus = serializers.FloatField(
        help_text=f"Free GPUs on nodes without the CPU the usual work brings along, {IN_UNIT}."
    )
    largest_gang_gpus = serializers.IntegerField(
        help_text=f"The most whole GPUs one gang could take inside one NVLink domain now, "
        f"{IN_UNIT}."
    )
    largest_domain_gpus = serializers.IntegerField(
        help_text=f"The healthy GPUs of the largest NVLink domain, cordoned nodes and other "
        f"schedulers' GPUs included: the largest gang that could ever fit inside one, {IN_UNIT}."
    )
    gangs = GangFitSerializer(
        many=True,
        help_text=f"Gangs of {listed(GANG_SIZES)} GPUs, up to the largest domain's "
        "(largest_domain_gpus): a larger gang never fits inside one domain.",
    )


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
        """Per flavor, in its unit (GPUs, or a MIG flavor's MIG instances): free, fragmented
        and stranded GPUs, the largest gang that fits in one NVLink domain now, and how many
        gangs of 1, 2, 4, 8, 16 and 72 GPUs fit at once, up to the largest domain's GPUs."""
        try:
            view = pool_figures()
        except SnapshotError as error:
            raise PoolNotPlannable(f"The pool cannot be planned: {error}") from None
        sharing = dict(Flavor.objects.values_list("name", "sharing"))  # one query
        flavors = [
            asdict(figures) | {"unit": flavor_unit(sharing.get(figures.flavor, ""))}
            for figures in view.value.fragmentation
        ]
        body = {"cycle_id": view.cycle_id, "at": view.at, "flavors": flavors}
        return Response(FragmentationSerializer(body).data)


def register(router: BaseRouter) -> None:
    """Add this app's resources to the API router."""
    router.register("scheduling-cycles", SchedulingCycleViewSet, basename="scheduling-cycle")
    router.register("fragmentation", FragmentationViewSet, basename="fragmentation")
