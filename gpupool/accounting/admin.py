"""Admin for usage intervals and preemption events (read-only: the control loop writes them)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString

from gpupool.accounting.models import PreemptionEvent, UsageInterval
from gpupool.audit.admin import ModelAdmin
from gpupool.number_formats import GPU_HOURS_PLACES, GPU_PLACES, plain_number
from gpupool.workloads.models import Workload


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

    list_display = ["at", "victim_name", "reason", "preemptor_name", "freed", "lost"]
    list_filter = ["reason", "victim_tenant", "preemptor_tenant"]
    search_fields = ["victim__name", "victim__namespace", "preemptor__name"]
    date_hierarchy = "at"
    list_select_related = ["victim", "preemptor"]

    @admin.display(description="victim", ordering="victim__name")
    def victim_name(self, event: PreemptionEvent) -> SafeString:
        """The victim as ``namespace/name`` (a name alone repeats across teams), linked to
        its workload page."""
        return workload_link(event.victim)

    @admin.display(description="preemptor", ordering="preemptor__name")
    def preemptor_name(self, event: PreemptionEvent) -> SafeString | None:
        """The preemptor as ``namespace/name``, linked to its page (none: an idle or admin
        eviction, a node failure)."""
        return workload_link(event.preemptor) if event.preemptor is not None else None

    @admin.display(description="freed", ordering="gpus_freed")
    def freed(self, event: PreemptionEvent) -> str:
        """What the victim freed, to the milli-GPU as the pages write it (``8``, ``0.16``;
        the field's help names the unit)."""
        return plain_number(event.gpus_freed, GPU_PLACES)

    @admin.display(description="progress lost (hours)", ordering="lost_gpu_hours")
    def lost(self, event: PreemptionEvent) -> str:
        """The progress lost, to the hundredth as the pages write it (``24.42``)."""
        return plain_number(event.lost_gpu_hours, GPU_HOURS_PLACES)


def workload_link(workload: Workload) -> SafeString:
    """A workload as ``namespace/name``, linked to its page on the dashboard."""
    url = reverse("dashboard:workload", args=[workload.namespace, workload.name])
    return format_html('<a href="{}">{}</a>', url, workload.qualified_name())
