"""State changes of utilisation: recording what the GPUs of running workloads did, and
forgetting it once it is rolled up and past its retention.

Activity windows are measurements, not decisions: like the roll-ups they are written and
deleted in bulk and not audited one by one (the audit log records who changed what, and nobody
does here).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import NamedTuple

from django.db import transaction
from django.utils import timezone

from gpupool.bulk import insert_values, update_rows
from gpupool.control.snapshot import id_list
from gpupool.utilization.models import ActivityWindow
from gpupool.workloads.models import Workload


class WindowValues(NamedTuple):
    """One workload's activity in one sampling window, as ``ActivityWindow``'s columns."""

    workload_id: int
    tenant_id: int | None
    queue_id: int
    started_at: datetime
    ended_at: datetime
    gpus: int
    observed_gpu_seconds: float
    active_gpu_seconds: float
    mean_utilization: float
    last_active_at: datetime | None


@transaction.atomic
def do_record_activity(
    windows: Sequence[WindowValues],
    *,
    idle_since: Mapping[int, datetime | None] | None = None,
    stamps: dict[int, tuple[datetime, datetime]] | None = None,
) -> int:
    """Store one sampling window's activity per workload, and the workloads' idle spells that
    changed (``Workload.idle_since`` by workload id: the idle policy reads it); returns how
    many windows. ``stamps``, when given, receives the workload rows written: id ->
    (``updated_at`` before, the stamp written), the rows locked while read (so the control
    loop can take the write as the row's content: ``control.state.LoopState.own_writes``)."""
    if idle_since:
        before = dict(
            Workload.objects.select_for_update()
            .filter(pk__in=id_list(list(idle_since)))
            .values_list("id", "updated_at")
        )
        stamp = timezone.now()
        update_rows(
            Workload,
            ["idle_since", "updated_at"],
            {pk: (since, stamp) for pk, since in idle_since.items() if pk in before},
        )
        if stamps is not None:
            stamps.update({pk: (previous, stamp) for pk, previous in before.items()})
    return insert_values(ActivityWindow, WindowValues._fields, windows)


def do_prune_activity(*, before: datetime, batch: int = 10_000, batches: int = 10) -> int:
    """Delete activity windows that ended before ``before``, ``batch`` rows per statement and
    at most ``batches`` statements a call (so one call stays short; the next goes on);
    returns how many went. The caller picks ``before``: past the retention, and never after
    what the usage roll-up has counted."""
    deleted = 0
    for _ in range(batches):
        with transaction.atomic():
            ids = list(
                ActivityWindow.objects.filter(ended_at__lt=before)
                .order_by("ended_at", "id")
                .values_list("id", flat=True)[:batch]
            )
            if not ids:
                break
            gone, _ = ActivityWindow.objects.filter(id__in=ids).delete()
            deleted += gone
        if len(ids) < batch:
            break
    return deleted
