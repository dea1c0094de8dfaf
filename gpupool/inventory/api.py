"""API of the inventory, the pool's public state: flavors (admins change them) and nodes with
their GPUs, health and NVLink domain (admins cordon, drain and end drains, and set GPU
health)."""

from __future__ import annotations

from typing import Any

from django.db.models import Prefetch
from django_filters import rest_framework as filters
from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import mixins, serializers, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.routers import BaseRouter

from gpupool.api.fields import NamedChoiceField, NameRelatedField
from gpupool.api.filters import NameFilter
from gpupool.api.permissions import ADMINS, EVERYONE, ActionRoles
from gpupool.api.strict import StrictInput
from gpupool.inventory.actions import (
    do_delete_flavor,
    do_drain_node,
    do_end_drain,
    do_save_flavor,
    do_set_gpu_health,
    do_set_node_cordoned,
)
from gpupool.inventory.choices import NodeState, Sharing
from gpupool.inventory.cordons import CordonNote, cordon_notes
from gpupool.inventory.drains import DrainWait, drain_waits
from gpupool.inventory.models import UNHEALTHY_REASON_MAX_LENGTH, Flavor, Gpu, Node


class FlavorSerializer(StrictInput, serializers.ModelSerializer[Flavor]):
    """A kind of GPU resource: sharing mode, card, MIG profile, labels, memory and price."""

    class Meta:
        model = Flavor
        fields = (
            "name",
            "sharing",
            "gpu_model",
            "mig_profile",
            "node_labels",
            "gpu_memory_gb",
            "hourly_price",
            "description",
        )


class FlavorViewSet(viewsets.ModelViewSet[Flavor]):
    """Flavors: every role reads the catalogue; admins create, change and delete flavors."""

    queryset = Flavor.objects.all()
    serializer_class = FlavorSerializer
    permission_classes = (ActionRoles,)
    default_roles = ADMINS
    action_roles = {"list": EVERYONE, "retrieve": EVERYONE}
    lookup_field = "name"
    lookup_value_regex = r"[a-z0-9.\-]+"
    filterset_fields = ("sharing",)
    http_method_names = ("get", "post", "patch", "delete", "head", "options")

    def perform_create(self, serializer: FlavorSerializer) -> None:  # type: ignore[override]
        """Create through the audited action."""
        serializer.instance = do_save_flavor(
            Flavor(**serializer.validated_data), acting_user=self.request.user
        )

    def perform_update(self, serializer: FlavorSerializer) -> None:  # type: ignore[override]
        """Change through the audited action."""
        flavor = serializer.instance
        assert flavor is not None
        for field, value in serializer.validated_data.items():
            setattr(flavor, field, value)
        serializer.instance = do_save_flavor(flavor, acting_user=self.request.user)

    def perform_destroy(self, instance: Flavor) -> None:
        """Delete through the audited action (refused while anything names the flavor)."""
        do_delete_flavor(instance, acting_user=self.request.user)


class GpuSerializer(serializers.ModelSerializer[Gpu]):
    """One physical GPU of a node: its index, health and why it is unhealthy."""

    class Meta:
        model = Gpu
        fields = ("index", "healthy", "unhealthy_reason", "uuid")
        read_only_fields = fields


class CordonNoteSerializer(serializers.Serializer[CordonNote]):
    """Why a node is cordoned (``inventory.cordons``): gpupool's cordon, by whom, when and why
    (the audit log's), or the cluster's own (``in_cluster``)."""

    in_cluster = serializers.BooleanField(
        help_text="Cordoned in the cluster (kubectl cordon), not by gpupool: no who or why."
    )
    by = serializers.CharField(
        allow_null=True, help_text="Who cordoned it: a username, or the system; null if unknown."
    )
    at = serializers.DateTimeField(allow_null=True, help_text="When, on the pool's clock.")
    reason = serializers.CharField(help_text="Why, as given (empty: no reason given).")
    drain = serializers.BooleanField(help_text="Cordoned by a drain.")
    words = serializers.CharField(help_text="The note in one phrase, as the Cluster page says it.")


class NodeList(serializers.ListSerializer[Node]):
    """Nodes, with what their draining ones wait on (``drain_waits``) and why the cordoned ones
    are cordoned (``cordon_notes``) read in one go rather than once per node."""

    def to_representation(self, data: Any) -> list[Any]:
        """The nodes, once the drains of those draining and their cordons are read."""
        nodes = list(data.all() if hasattr(data, "all") else data)
        draining = [node.pk for node in nodes if node.state == NodeState.DRAINING]
        self.context["drains"] = drain_waits(draining)
        self.context["cordons"] = cordon_notes(nodes)
        return super().to_representation(nodes)


class NodeSerializer(serializers.ModelSerializer[Node]):
    """A node: flavor, GPUs one by one with their health, CPU, memory, NVLink domain, rack,
    zone, cordon and MIG layout, as the cluster sync last saw it."""

    flavor: serializers.SlugRelatedField[Flavor] = NameRelatedField(
        slug_field="name", read_only=True
    )
    gpus = GpuSerializer(many=True, read_only=True)
    healthy_gpus = serializers.SerializerMethodField()
    mig_instances = serializers.SerializerMethodField()
    healthy_mig_instances = serializers.SerializerMethodField()
    foreign_gpus = serializers.IntegerField(
        read_only=True,
        help_text="GPUs (MIG: instances) other schedulers' pods hold here, as the control loop "
        "last recorded them: taken, not free.",
    )
    health = serializers.SerializerMethodField()
    cordon = serializers.SerializerMethodField(
        help_text="Why the node is cordoned: who cordoned or drained it, when and why (the "
        "audit log's), or that the cluster cordoned it (kubectl cordon); null when it is not."
    )
    state = NamedChoiceField(
        choices=NodeState.choices,
        read_only=True,
        help_text="In one word (``Node.state``, as the pages say it): ready, cordoned (by "
        "gpupool), draining (its work is being evicted, or waits on an eviction a "
        "PodDisruptionBudget refused: ``health`` says which), drained (empty, cordoned until "
        "uncordoned), excluded (the cluster takes no pods there: cordoned in the cluster, not "
        "Ready, a lifecycle taint; ``health`` says which) or gone.",
    )

    class Meta:
        model = Node
        list_serializer_class = NodeList
        fields = (
            "name",
            "flavor",
            "state",
            "gpus",
            "healthy_gpus",
            "mig_instances",
            "healthy_mig_instances",
            "foreign_gpus",
            "health",
            "cpu",
            "memory_gb",
            "nvlink_domain",
            "rack",
            "zone",
            "cordoned",
            "cordon",
            "drain_requested_at",
            "drained_at",
            "labels",
            "mig_layout",
            "last_synced_at",
        )
        read_only_fields = fields

    def get_healthy_gpus(self, node: Node) -> int:
        """GPUs that are healthy (allocatable while the node takes pods: ``state`` ready)."""
        return sum(1 for gpu in node.gpus.all() if gpu.healthy)

    def get_mig_instances(self, node: Node) -> int | None:
        """On a MIG node, the instances of its flavor's profile its GPUs give (the unit of
        the flavor's quotas and capacity: ``gpus`` counts physical cards); null elsewhere."""
        if node.flavor.sharing != Sharing.MIG:
            return None
        return len(node.gpus.all()) * node.devices_per_gpu()

    def get_healthy_mig_instances(self, node: Node) -> int | None:
        """On a MIG node, the instances its healthy GPUs give (a broken GPU takes its
        instances with it); null elsewhere."""
        if node.flavor.sharing != Sharing.MIG:
            return None
        return self.get_healthy_gpus(node) * node.devices_per_gpu()

    def get_health(self, node: Node) -> list[str]:
        """Why the node cannot give all its GPUs: gone or excluded, draining (its workloads
        being evicted, or an eviction a disruption budget refused) or drained, cordoned, and
        each unhealthy GPU's reason."""
        drains: dict[int, DrainWait] = self.context.get("drains") or {}
        return node.health_reasons(drains.get(node.pk))

    @extend_schema_field(CordonNoteSerializer(allow_null=True))
    def get_cordon(self, node: Node) -> dict[str, Any] | None:
        """Why the node is cordoned (``cordon_notes``: read for a list's nodes at once, else
        here for this one), or None."""
        notes: dict[int, CordonNote] | None = self.context.get("cordons")
        note = (notes if notes is not None else cordon_notes([node])).get(node.pk)
        return None if note is None else dict(CordonNoteSerializer(note).data)


class NodeFilter(filters.FilterSet):  # type: ignore[misc]
    """Filter nodes by flavor, state, NVLink domain, rack, zone, cordon and GPU health."""

    flavor = NameFilter(field_name="flavor__name", names=Flavor)
    state = filters.MultipleChoiceFilter(
        choices=NodeState.choices,
        method="filter_state",
        label="In one of these states (``Node.state``; repeat it for several): ``cordoned`` "
        "is gpupool's own cordon, a node cordoned in the cluster (kubectl cordon) is "
        "``excluded``",
    )
    unhealthy = filters.BooleanFilter(
        method="filter_unhealthy", label="Has at least one unhealthy GPU"
    )

    class Meta:
        model = Node
        fields = ("flavor", "state", "nvlink_domain", "rack", "zone", "cordoned", "unhealthy")

    def filter_state(self, queryset: Any, name: str, value: list[str]) -> Any:
        """Nodes whose ``Node.state`` is one of ``value``: the property decides (read here
        over the columns it reads, in one query), so the rule is not written twice."""
        wanted = set(value)
        columns = ("gone_at", "cordoned", "drain_requested_at", "drained_at", "cluster_exclusion")
        nodes = queryset.select_related(None).prefetch_related(None).only(*columns)
        return queryset.filter(pk__in=[node.pk for node in nodes if node.state in wanted])

    def filter_unhealthy(self, queryset: Any, name: str, value: bool) -> Any:
        """Nodes with (or without) an unhealthy GPU."""
        broken = Gpu.objects.filter(healthy=False).values("node_id")
        return queryset.filter(pk__in=broken) if value else queryset.exclude(pk__in=broken)


# The longest reason a node's cordon, uncordon, drain or end of drain takes (kept in the audit
# log): the API's and the Cluster page's forms, whose inputs say it.
NODE_REASON_MAX_LENGTH = 400


class CordonSerializer(StrictInput, serializers.Serializer[Any]):
    """Why the node is cordoned, uncordoned, drained or back from a drain (kept in the audit
    log)."""

    reason = serializers.CharField(
        max_length=NODE_REASON_MAX_LENGTH, required=False, allow_blank=True, default=""
    )


class GpuHealthSerializer(StrictInput, serializers.Serializer[Any]):
    """A GPU's new health; marking it unhealthy says why."""

    healthy = serializers.BooleanField()
    reason = serializers.CharField(
        max_length=UNHEALTHY_REASON_MAX_LENGTH,
        required=False,
        allow_blank=True,
        default="",
        help_text="Why it is unhealthy (e.g. an XID error); required when healthy is false.",
    )


class NodeViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet[Node]):
    """Nodes, the pool's public state: every role reads them; admins cordon and uncordon them,
    drain them and end drains, and set a GPU's health (the cluster sync owns the rest)."""

    queryset = Node.objects.select_related("flavor").prefetch_related(
        Prefetch("gpus", queryset=Gpu.objects.order_by("index"))
    )
    serializer_class = NodeSerializer
    filterset_class = NodeFilter
    ordering_fields = ("name", "nvlink_domain", "zone")
    permission_classes = (ActionRoles,)
    default_roles = ADMINS
    action_roles = {"list": EVERYONE, "retrieve": EVERYONE}
    lookup_field = "name"
    lookup_value_regex = r"[a-z0-9][a-z0-9.\-]*"

    def _cordon(self, request: Request, cordoned: bool) -> Response:
        node = self.get_object()
        form = CordonSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        do_set_node_cordoned(
            node, cordoned=cordoned, acting_user=request.user, reason=form.validated_data["reason"]
        )
        return Response(self.get_serializer(self.get_queryset().get(pk=node.pk)).data)

    def _drain(self, request: Request, change: Any) -> Response:
        """``change`` (``do_drain_node`` or ``do_end_drain``) on the node, with the reason
        given; the node as it is afterwards."""
        node = self.get_object()
        form = CordonSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        change(node, acting_user=request.user, reason=form.validated_data["reason"])
        return Response(self.get_serializer(self.get_queryset().get(pk=node.pk)).data)

    @extend_schema(request=CordonSerializer, responses={200: NodeSerializer})
    @action(detail=True, methods=["post"])
    def cordon(self, request: Request, name: str) -> Response:
        """Cordon the node: no new placements on it (what runs there stays)."""
        return self._cordon(request, True)

    @extend_schema(request=CordonSerializer, responses={200: NodeSerializer})
    @action(detail=True, methods=["post"])
    def uncordon(self, request: Request, name: str) -> Response:
        """Uncordon the node: its healthy GPUs take placements again."""
        return self._cordon(request, False)

    @extend_schema(request=CordonSerializer, responses={200: NodeSerializer})
    @action(detail=True, methods=["post"])
    def drain(self, request: Request, name: str) -> Response:
        """Drain the node (``do_drain_node``, as the Cluster page does): cordon it and have the
        control loop evict its workloads (reason ``admin``, disruption budgets honoured); its
        ``state`` reads draining, then drained once it is empty. Draining a node that is
        draining or drained changes nothing (``drain_requested_at`` keeps the first ask)."""
        return self._drain(request, do_drain_node)

    @extend_schema(request=CordonSerializer, responses={200: NodeSerializer})
    @action(detail=True, methods=["post"], url_path="end-drain", url_name="end-drain")
    def end_drain(self, request: Request, name: str) -> Response:
        """End the node's drain (``do_end_drain``, as uncordoning a draining node does): it is
        uncordoned and nothing more is evicted from it. A node that is not draining or
        drained is left as it is (a plain cordon stays: ``uncordon/`` lifts it)."""
        return self._drain(request, do_end_drain)

    @extend_schema(request=GpuHealthSerializer, responses={200: NodeSerializer})
    @action(detail=True, methods=["post"], url_path=r"gpus/(?P<index>[0-9]{1,4})/health")
    def gpu_health(self, request: Request, name: str, index: str) -> Response:
        """Mark one GPU unhealthy (saying why) or healthy again; only healthy GPUs are
        allocatable."""
        node = self.get_object()
        gpu = next((gpu for gpu in node.gpus.all() if gpu.index == int(index)), None)
        if gpu is None:
            raise NotFound(f"Node {node.name} has no GPU {index}.")
        form = GpuHealthSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        healthy, reason = form.validated_data["healthy"], form.validated_data["reason"]
        if not healthy and not reason.strip():
            raise serializers.ValidationError({"reason": ["say why the GPU is unhealthy"]})
        do_set_gpu_health(gpu, healthy=healthy, reason=reason, acting_user=request.user)
        return Response(self.get_serializer(self.get_queryset().get(pk=node.pk)).data)


def register(router: BaseRouter) -> None:
    """Add this app's resources to the API router."""
    router.register("flavors", FlavorViewSet, basename="flavor")
    router.register("nodes", NodeViewSet, basename="node")
