"""Admin for flavors, nodes and GPUs. Flavors are edited here; nodes and their GPUs come from
the cluster sync, so an admin only cordons nodes and marks GPUs unhealthy (saying why) or
recovered. Every change runs an inventory action, so it is validated and audited."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Any

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Count, Q, QuerySet
from django.forms import BaseModelFormSet
from django.http import HttpRequest

from gpupool.audit.admin import ActionModelAdmin, TabularInline
from gpupool.inventory.actions import (
    do_delete_flavor,
    do_save_flavor,
    do_set_gpu_health,
    do_set_node_cordoned,
)
from gpupool.inventory.models import Flavor, Gpu, Node

# django-stubs makes ModelForm generic; at run time it is not subscriptable.
if TYPE_CHECKING:
    GpuModelForm = forms.ModelForm[Gpu]
else:
    GpuModelForm = forms.ModelForm

# The audit reason of a GPU an admin marks healthy again.
RECOVERED_IN_THE_ADMIN = "recovered: marked healthy in the admin"


@admin.register(Flavor)
class FlavorAdmin(ActionModelAdmin):
    """GPU flavors: sharing mode, MIG profile, memory, price and node labels."""

    list_display = ["name", "sharing", "gpu_model", "mig_profile", "gpu_memory_gb", "hourly_price"]
    list_filter = ["sharing"]
    search_fields = ["name", "gpu_model", "description"]

    def save_model(self, request: HttpRequest, obj: Flavor, form: Any, change: bool) -> None:
        self.adopt(
            obj, self.run_action(request, lambda: do_save_flavor(obj, acting_user=request.user))
        )

    def delete_model(self, request: HttpRequest, obj: Flavor) -> None:
        self.run_action(request, lambda: do_delete_flavor(obj, acting_user=request.user))


class GpuHealthForm(GpuModelForm):
    """A GPU's health: unhealthy needs a reason; ticking healthy clears it."""

    class Meta:
        model = Gpu
        fields = ["healthy", "unhealthy_reason"]

    def clean(self) -> dict[str, Any]:
        super().clean()
        if self.cleaned_data.get("healthy"):
            self.cleaned_data["unhealthy_reason"] = ""
        return self.cleaned_data


def _save_gpu_health(request: HttpRequest, gpu: Gpu) -> Gpu:
    """Store the health an admin's form set on ``gpu``, through the action."""
    return do_set_gpu_health(
        gpu,
        healthy=gpu.healthy,
        reason=gpu.unhealthy_reason if not gpu.healthy else RECOVERED_IN_THE_ADMIN,
        acting_user=request.user,
    )


class GpuInline(TabularInline):
    """The node's GPUs, one row each, with their health and why a GPU is unhealthy."""

    model = Gpu
    form = GpuHealthForm
    extra = 0
    can_delete = False
    fields = ["index", "healthy", "unhealthy_reason", "uuid"]
    readonly_fields = ["index", "uuid"]

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # a node's GPUs come from the sync


@admin.register(Node)
class NodeAdmin(ActionModelAdmin):
    """Nodes with their GPUs inline; filter by flavor, domain, rack, zone, cordon. The sync
    owns everything but the cordon and GPU health."""

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
    readonly_fields = [f.name for f in Node._meta.fields if f.name not in {"id", "cordoned"}]
    inlines = [GpuInline]
    actions = ["cordon", "uncordon"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Node]:
        queryset: QuerySet[Node] = super().get_queryset(request)
        return queryset.annotate(
            gpu_total=Count("gpus"), gpu_healthy=Count("gpus", filter=Q(gpus__healthy=True))
        )

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # nodes come from the cluster sync

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # ... and leave with it

    @admin.display(description="GPUs", ordering="gpu_total")
    def gpu_total(self, obj: Node) -> int:
        return getattr(obj, "gpu_total", 0)

    @admin.display(description="healthy", ordering="gpu_healthy")
    def gpu_healthy(self, obj: Node) -> int:
        return getattr(obj, "gpu_healthy", 0)

    def save_model(self, request: HttpRequest, obj: Node, form: Any, change: bool) -> None:
        self.run_action(
            request,
            lambda: do_set_node_cordoned(
                obj, cordoned=obj.cordoned, acting_user=request.user, reason="set in the admin"
            ),
        )

    def save_formset(
        self, request: HttpRequest, form: Any, formset: BaseModelFormSet[Any, Any], change: bool
    ) -> None:
        if formset.model is not Gpu:
            super().save_formset(request, form, formset, change)
            return
        for gpu in formset.save(commit=False):
            self.run_action(request, partial(_save_gpu_health, request, gpu))

    def _set_cordoned(self, request: HttpRequest, queryset: QuerySet[Node], cordoned: bool) -> int:
        """Cordon or uncordon each selected node that is not so yet, all or none."""
        nodes = list(queryset.exclude(cordoned=cordoned))
        with transaction.atomic():
            for node in nodes:
                do_set_node_cordoned(
                    node,
                    cordoned=cordoned,
                    acting_user=request.user,
                    reason="selected in the admin",
                )
        return len(nodes)

    @admin.action(description="Cordon selected nodes")
    def cordon(self, request: HttpRequest, queryset: QuerySet[Node]) -> None:
        self.message_user(request, f"{self._set_cordoned(request, queryset, True)} nodes cordoned")

    @admin.action(description="Uncordon selected nodes")
    def uncordon(self, request: HttpRequest, queryset: QuerySet[Node]) -> None:
        count = self._set_cordoned(request, queryset, False)
        self.message_user(request, f"{count} nodes uncordoned")


@admin.register(Gpu)
class GpuAdmin(ActionModelAdmin):
    """Every GPU of the pool; find the unhealthy ones, mark one unhealthy with a reason, or
    mark recovered GPUs healthy."""

    form = GpuHealthForm
    list_display = ["__str__", "node", "index", "healthy", "unhealthy_reason"]
    list_filter = ["healthy", "node__flavor"]
    search_fields = ["node__name", "uuid", "unhealthy_reason"]
    list_select_related = ["node"]
    fields = ["node", "index", "uuid", "healthy", "unhealthy_reason"]
    readonly_fields = ["node", "index", "uuid"]
    actions = ["mark_healthy"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # GPUs come from the cluster sync

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def save_model(self, request: HttpRequest, obj: Gpu, form: Any, change: bool) -> None:
        self.run_action(request, lambda: _save_gpu_health(request, obj))

    @admin.action(description="Mark selected GPUs healthy (recovered)")
    def mark_healthy(self, request: HttpRequest, queryset: QuerySet[Gpu]) -> None:
        gpus = list(queryset.filter(healthy=False).select_related("node"))
        refused: list[str] = []
        with transaction.atomic():
            for gpu in gpus:
                try:
                    do_set_gpu_health(
                        gpu, healthy=True, reason=RECOVERED_IN_THE_ADMIN, acting_user=request.user
                    )
                except ValidationError as error:  # the cluster's verdict wins
                    refused.append("; ".join(error.messages))
        self.message_user(request, f"{len(gpus) - len(refused)} GPUs marked healthy")
        for why in refused:
            self.message_user(request, why, level=messages.ERROR)
