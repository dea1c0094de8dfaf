"""State changes of accounting: opening and closing usage intervals, recording preemptions."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal

from django.core.exceptions import ValidationError
from django.db import transaction

from gpupool.accounting.models import PreemptionEvent, UsageInterval
from gpupool.control.models import SchedulingCycle
from gpupool.inventory.models import Flavor
from gpupool.workloads.models import Workload


@transaction.atomic
def do_open_usage(
    workload: Workload, *, flavor: Flavor, gpus: Decimal | int, at: datetime
) -> UsageInterval:
    """Start charging ``gpus`` of ``flavor`` to the workload's queue and tenant."""
    interval = UsageInterval(
        workload=workload,
        tenant=workload.queue.tenant,
        queue=workload.queue,
        flavor=flavor,
        priority_class=workload.priority_class,
        gpus=Decimal(str(gpus)),
        started_at=at,
    )
    interval.full_clean()
    interval.save()
    return interval


@transaction.atomic
def do_close_usage(workload: Workload, *, at: datetime) -> int:
    """End the workload's open usage intervals at ``at``; returns how many were closed."""
    open_intervals = UsageInterval.objects.select_for_update().filter(
        workload=workload, ended_at__isnull=True
    )
    for interval in open_intervals:
        if at < interval.started_at:
            raise ValidationError({"ended_at": f"{at} is before the interval's start"})
    return open_intervals.update(ended_at=at)


@transaction.atomic
def do_record_preemption(
    victim: Workload,
    *,
    reason: str,
    at: datetime,
    gpus_freed: Decimal | int,
    lost_gpu_hours: Decimal | int,
    preemptor: Workload | None = None,
    cycle: SchedulingCycle | None = None,
) -> PreemptionEvent:
    """Record that ``victim`` was stopped, by whom or why, and what it lost."""
    event = PreemptionEvent(
        at=at,
        reason=reason,
        victim=victim,
        victim_queue=victim.queue,
        victim_tenant=victim.queue.tenant,
        preemptor=preemptor,
        preemptor_queue=preemptor.queue if preemptor else None,
        preemptor_tenant=preemptor.queue.tenant if preemptor else None,
        gpus_freed=Decimal(str(gpus_freed)),
        lost_gpu_hours=Decimal(str(lost_gpu_hours)),
        cycle=cycle,
    )
    event.full_clean()
    event.save()
    return event
