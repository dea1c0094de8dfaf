"""Read-only figures of GPU use against allocation, as plain rows, for the command line, the
API and the dashboard's pages (allocated against used, top wasters, sparklines).

Allocated GPU-hours come from accounting's usage intervals; active GPU-hours from the
activity windows the sampler recorded. Both are clipped to the asked window (a window or an
interval that straddles its edge counts its share inside it). Idle is allocated less active.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection
from datetime import datetime
from typing import Any

from django.db.models import Q

from gpupool.accounting.models import UsageInterval
from gpupool.utilization.models import ActivityWindow
from gpupool.workloads.models import Workload

NO_TENANT = "-"  # usage charged to a queue without a tenant (the pool's own)


def _overlap_s(start: datetime, end: datetime, since: datetime, until: datetime) -> float:
    return max((min(end, until) - max(start, since)).total_seconds(), 0.0)


def _share(window: ActivityWindow, since: datetime, until: datetime) -> float:
    """The part of an activity window inside ``[since, until]``."""
    length = (window.ended_at - window.started_at).total_seconds()
    if length <= 0:
        return 1.0 if since <= window.ended_at <= until else 0.0
    return _overlap_s(window.started_at, window.ended_at, since, until) / length


def _windows(since: datetime, until: datetime, tenant_ids: Collection[int] | None = None) -> Any:
    windows = ActivityWindow.objects.filter(ended_at__gt=since, started_at__lt=until)
    return windows if tenant_ids is None else windows.filter(tenant_id__in=tenant_ids)


def allocated_gpu_hours(
    since: datetime, until: datetime, tenant_ids: Collection[int] | None = None
) -> dict[str, float]:
    """GPU-hours allocated per tenant name in the window (usage intervals clipped to it);
    ``tenant_ids`` limits it to those tenants (None: every tenant, and the pool's own)."""
    totals: dict[str, float] = defaultdict(float)
    intervals = UsageInterval.objects.filter(
        Q(ended_at__isnull=True) | Q(ended_at__gt=since), started_at__lt=until
    )
    if tenant_ids is not None:
        intervals = intervals.filter(tenant_id__in=tenant_ids)
    rows = intervals.values_list("tenant__name", "gpus", "started_at", "ended_at")
    for tenant, gpus, started, ended in rows:
        seconds = _overlap_s(started, ended or until, since, until)
        totals[tenant or NO_TENANT] += float(gpus) * seconds / 3600
    return dict(totals)


def tenant_utilization(
    since: datetime, until: datetime, tenant_ids: Collection[int] | None = None
) -> list[dict[str, Any]]:
    """Per tenant: allocated, active and idle GPU-hours in the window, and the active share
    of allocated; tenants by name (``tenant_ids``: only those)."""
    allocated = allocated_gpu_hours(since, until, tenant_ids)
    active: dict[str, float] = defaultdict(float)
    for window in _windows(since, until, tenant_ids).select_related("tenant"):
        name = window.tenant.name if window.tenant else NO_TENANT
        active[name] += window.active_gpu_seconds * _share(window, since, until) / 3600
    rows = []
    for tenant in sorted(set(allocated) | set(active)):
        held, used = allocated.get(tenant, 0.0), active.get(tenant, 0.0)
        rows.append(
            {
                "tenant": tenant,
                "allocated_gpu_hours": round(held, 4),
                "active_gpu_hours": round(used, 4),
                "idle_gpu_hours": round(max(held - used, 0.0), 4),
                "active_share": round(used / held, 4) if held else None,
            }
        )
    return rows


def top_wasters(
    since: datetime,
    until: datetime,
    limit: int = 10,
    tenant_ids: Collection[int] | None = None,
) -> list[dict[str, Any]]:
    """The workloads that held GPUs idle longest in the window (idle GPU-hours as the source
    saw them), most first (``tenant_ids``: only those tenants' workloads)."""
    idle: dict[int, float] = defaultdict(float)
    held: dict[int, float] = defaultdict(float)
    for window in _windows(since, until, tenant_ids):
        share = _share(window, since, until)
        held[window.workload_id] += window.observed_gpu_seconds * share / 3600
        idle[window.workload_id] += (
            (window.observed_gpu_seconds - window.active_gpu_seconds) * share / 3600
        )
    ranked = sorted(idle, key=lambda pk: (-idle[pk], pk))[:limit]
    workloads = Workload.objects.select_related("queue__tenant").in_bulk(ranked)
    rows = []
    for pk in ranked:
        if idle[pk] <= 0:
            continue
        workload = workloads[pk]
        tenant = workload.queue.tenant
        rows.append(
            {
                "workload": workload.qualified_name(),
                "queue": workload.queue.name,
                "tenant": tenant.name if tenant is not None else NO_TENANT,
                "held_gpu_hours": round(held[pk], 4),
                "idle_gpu_hours": round(idle[pk], 4),
            }
        )
    return rows


def workload_sparkline(
    workload: Workload, since: datetime, until: datetime
) -> list[dict[str, Any]]:
    """A workload's mean utilisation window by window (end time, percent, GPUs)."""
    return [
        {
            "at": window.ended_at,
            "utilization": round(window.mean_utilization, 1),
            "gpus": window.gpus,
        }
        for window in _windows(since, until).filter(workload=workload).order_by("ended_at")
    ]


def idle_since(workload: Workload) -> datetime | None:
    """Since when the workload's GPUs have not worked, as the sampler saw it: its last active
    window's last activity, else its start (None: never sampled)."""
    windows = ActivityWindow.objects.filter(workload=workload)
    last = windows.filter(last_active_at__isnull=False).order_by("-last_active_at").first()
    if last is not None:
        return last.last_active_at
    return workload.started_at if windows.exists() else None
