"""Admin for usage intervals and preemption events (read-only: the control loop writes them)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from gpupool.accounting.models import PreemptionEvent, UsageInterval
from gpupool.audit.admin import ModelAdmin


class ReadOnlyAdmin(ModelAdmin):
    """History rows are viewed, never edited by hand."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(UsageInterval)
class UsageIntervalAdmin(ReadOnlyAdmin):
    """GPU usage intervals by tenant, queue and flavor."""

    list_display = ["workload", "tenant", "queue", "flavor", "gpus", "started_at", "ended_at"]
    list_filter = ["flavor", "tenant", "queue"]
    search_fields = ["workload__name"]
    date_hierarchy = "started_at"
    list_select_related = ["workload", "tenant", "queue", "flavor"]


@admin.register(PreemptionEvent)
class PreemptionEventAdmin(ReadOnlyAdmin):
    """Preemptions, reclaims and evictions with the progress they cost."""

    list_display = ["at", "victim", "reason", "preemptor", "gpus_freed", "lost_gpu_hours"]
    list_filter = ["reason", "victim_tenant", "preemptor_tenant"]
    search_fields = ["victim__name", "preemptor__name"]
    date_hierarchy = "at"
    list_select_related = ["victim", "preemptor"]
