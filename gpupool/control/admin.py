"""Admin for scheduling cycle records (read-only: the control loop writes them)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from gpupool.audit.admin import ModelAdmin
from gpupool.control.models import SchedulingCycle
from gpupool.number_formats import duration


@admin.register(SchedulingCycle)
class SchedulingCycleAdmin(ModelAdmin):
    """Cycles with their outcome and counts."""

    # The pool's clock first, as the Overview's table of cycles (a simulated cluster runs ahead
    # of the wall clock of started_at: the list read "3:48 p.m." for cycles of the evening).
    list_display = [
        "id",
        "at",
        "wall_clock",
        "took",
        "status",
        "admitted",
        "evicted",
        "pending",
    ]
    list_filter = ["status"]
    date_hierarchy = "started_at"
    readonly_fields = [f.name for f in SchedulingCycle._meta.fields]

    @admin.display(description="at (pool's clock)", ordering="cluster_at")
    def at(self, cycle: SchedulingCycle) -> datetime | None:
        """When the cycle read the cluster, on the pool's clock (none: it recorded nothing)."""
        return cycle.cluster_at

    @admin.display(description="started (wall clock)", ordering="started_at")
    def wall_clock(self, cycle: SchedulingCycle) -> datetime:
        """When the cycle started, on the wall clock of the process that ran it."""
        return cycle.started_at

    @admin.display(description="took")
    def took(self, cycle: SchedulingCycle) -> str:
        """How long the cycle ran, as the Overview writes it (``719 ms``, ``1.9 s``)."""
        return duration(cycle.duration_s())

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
