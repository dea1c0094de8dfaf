"""Admin for scheduling cycle records (read-only: the control loop writes them)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from gpupool.audit.admin import ModelAdmin
from gpupool.control.models import SchedulingCycle


@admin.register(SchedulingCycle)
class SchedulingCycleAdmin(ModelAdmin):
    """Cycles with their outcome and counts."""

    list_display = ["id", "started_at", "finished_at", "status", "admitted", "evicted", "pending"]
    list_filter = ["status"]
    date_hierarchy = "started_at"
    readonly_fields = [f.name for f in SchedulingCycle._meta.fields]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
