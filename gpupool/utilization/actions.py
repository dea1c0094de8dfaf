"""State changes of utilisation: recording what the GPUs of running workloads did, and
forgetting it once it is rolled up and past its retention.

Activity windows are measurements, not decisions: like the roll-ups they are written and
deleted in bulk and not audited one by one (the audit log records who changed what, and nobody
does here).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime

from django.db import transaction
from django.utils import timezone

from gpupool.bulk import insert_objects
from gpupool.utilization.models import ActivityWindow
from gpupool.workloads.models import Workload


@transaction.atomic
def do_record_activity(
    windows: Sequence[ActivityWindow], *, idle_since: Mapping[int, datetime | None] | None = None
) -> int:
    """Store one sampling window's activity per workload, and the workloads' idle spells that
    changed (``Workload.idle_since`` by workload id: the idle policy reads it); returns how
    many windows."""
    if idle_since:
        stamp = timezone.now()
        Workload.objects.bulk_update(
            [
                Workload(pk=pk, idle_since=since, updated_at=stamp)
                for pk, since in idle_since.items()
            ],
            ["idle_since", "updated_at"],
            batch_size=1000,
        )
    return insert_objects(ActivityWindow, windows)


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
