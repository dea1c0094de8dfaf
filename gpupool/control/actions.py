"""State changes of the control app: opening and closing scheduling cycle records."""

from __future__ import annotations

from datetime import datetime

from django.db import transaction

from gpupool.control.choices import CycleStatus
from gpupool.control.models import SchedulingCycle


@transaction.atomic
def do_start_cycle(*, at: datetime) -> SchedulingCycle:
    """Open the record of a scheduling cycle that starts now."""
    return SchedulingCycle.objects.create(started_at=at, status=CycleStatus.RUNNING)


@transaction.atomic
def do_finish_cycle(
    cycle: SchedulingCycle,
    *,
    at: datetime,
    status: str,
    nodes: int = 0,
    workloads: int = 0,
    admitted: int = 0,
    evicted: int = 0,
    pending: int = 0,
    error: str = "",
) -> SchedulingCycle:
    """Close a cycle record with its outcome and counts."""
    cycle.finished_at = at
    cycle.status = status
    cycle.nodes = nodes
    cycle.workloads = workloads
    cycle.admitted = admitted
    cycle.evicted = evicted
    cycle.pending = pending
    cycle.error = error
    cycle.full_clean()
    cycle.save()
    return cycle
