"""Admin for workloads: inspect pod sets, placements and transitions; cancel pending ones."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.core.exceptions import ValidationError
from django.db.models import QuerySet
from django.http import HttpRequest

from gpupool.audit.admin import ModelAdmin, TabularInline, error_text
from gpupool.number_formats import counted
from gpupool.workloads.actions import do_transition_workload
from gpupool.workloads.choices import WorkloadState
from gpupool.workloads.models import Placement, PodSet, Workload, WorkloadTransition


class ReadOnlyInline(TabularInline):
    """Rows the control loop writes; shown, not edited."""

    extra = 0
    can_delete = False

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class PodSetInline(ReadOnlyInline):
    model = PodSet
    fields = ["name", "count", "gpus", "gpu_milli", "flavor_order", "cpu", "memory_gb"]
    readonly_fields = ["flavor_order"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[PodSet]:
        """Pod sets with their flavors and further choices in two queries, not one per row."""
        return (
            super()
            .get_queryset(request)
            .select_related("flavor")
            .prefetch_related("flavor_choices__flavor")
        )

    @admin.display(description="flavors (in order of choice)")
    def flavor_order(self, pod_set: PodSet) -> str:
        """The pod set's flavor, then its further choices, as the scheduler tries them."""
        return " \u2192 ".join(pod_set.flavor_names()) or "-"


class PlacementInline(ReadOnlyInline):
    model = Placement
    fields = ["pod_set", "pod_index", "node", "gpu_indices", "milli", "created_at"]


class TransitionInline(ReadOnlyInline):
    model = WorkloadTransition
    fields = ["at", "from_state", "to_state", "reason", "actor"]


@admin.register(Workload)
class WorkloadAdmin(ModelAdmin):
    """Workloads with their pod sets, placements and state history; state moves by action."""

    list_display = ["name", "queue", "priority_class", "state", "submitted_at", "started_at"]
    list_filter = ["state", "priority_class", "queue", "topology"]
    search_fields = ["name", "submitter__username"]
    date_hierarchy = "submitted_at"
    list_select_related = ["queue", "priority_class"]
    inlines = [PodSetInline, PlacementInline, TransitionInline]
    readonly_fields = [f.name for f in Workload._meta.fields]
    actions = ["cancel_pending"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # workloads arrive from Kubernetes or the API

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # a workload's history stays; cancel it instead

    @admin.action(description="Cancel selected pending workloads")
    def cancel_pending(self, request: HttpRequest, queryset: QuerySet[Workload]) -> None:
        cancelled = 0
        for workload in queryset.filter(state=WorkloadState.PENDING):
            try:
                do_transition_workload(
                    workload,
                    WorkloadState.CANCELLED,
                    reason=f"cancelled in the admin by {request.user}",
                    acting_user=request.user,
                )
            except ValidationError as error:
                self.message_user(request, f"{workload}: {error_text(error)}", messages.ERROR)
            else:
                cancelled += 1
        self.message_user(request, f"{counted(cancelled, 'workload')} cancelled")
