"""Admin for flavors, nodes and GPUs."""

from __future__ import annotations

from django.contrib import admin
from django.db.models import Count, Q, QuerySet
from django.http import HttpRequest

from gpupool.audit.admin import ModelAdmin, TabularInline
from gpupool.inventory.models import Flavor, Gpu, Node


@admin.register(Flavor)
class FlavorAdmin(ModelAdmin):
    """GPU flavors: sharing mode, MIG profile, memory, price and node labels."""

    list_display = ["name", "sharing", "gpu_model", "mig_profile", "gpu_memory_gb", "hourly_price"]
    list_filter = ["sharing"]
    search_fields = ["name", "gpu_model", "description"]


class GpuInline(TabularInline):
    """The node's GPUs, one row each, with their health."""

    model = Gpu
    extra = 0
    fields = ["index", "healthy", "uuid"]


@admin.register(Node)
class NodeAdmin(ModelAdmin):
    """Nodes with their GPUs inline; filter by flavor, domain, rack, zone, cordon."""

    list_display = [
        "name",
        "flavor",
        "nvlink_domain",
        "rack",
        "zone",
        "gpu_total",
        "gpu_healthy",
        "cordoned",
    ]
    list_filter = ["flavor", "cordoned", "zone", "rack"]
    search_fields = ["name", "nvlink_domain", "rack"]
    list_select_related = ["flavor"]
    inlines = [GpuInline]
    actions = ["cordon", "uncordon"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Node]:
        queryset: QuerySet[Node] = super().get_queryset(request)
        return queryset.annotate(
            gpu_total=Count("gpus"), gpu_healthy=Count("gpus", filter=Q(gpus__healthy=True))
        )

    @admin.display(description="GPUs", ordering="gpu_total")
    def gpu_total(self, obj: Node) -> int:
        return getattr(obj, "gpu_total", 0)

    @admin.display(description="healthy", ordering="gpu_healthy")
    def gpu_healthy(self, obj: Node) -> int:
        return getattr(obj, "gpu_healthy", 0)

    @admin.action(description="Cordon selected nodes")
    def cordon(self, request: HttpRequest, queryset: QuerySet[Node]) -> None:
        self.message_user(request, f"{queryset.update(cordoned=True)} nodes cordoned")

    @admin.action(description="Uncordon selected nodes")
    def uncordon(self, request: HttpRequest, queryset: QuerySet[Node]) -> None:
        self.message_user(request, f"{queryset.update(cordoned=False)} nodes uncordoned")


@admin.register(Gpu)
class GpuAdmin(ModelAdmin):
    """Every GPU of the pool; handy to find the unhealthy ones."""

    list_display = ["__str__", "node", "index", "healthy"]
    list_filter = ["healthy", "node__flavor"]
    search_fields = ["node__name", "uuid"]
    list_select_related = ["node"]
