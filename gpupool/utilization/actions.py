"""State changes of utilisation: recording what the GPUs of running workloads did, and
forgetting it once it is rolled up and past its retention.

Activity windows are measurements, not decisions: like the roll-ups they are written and
deleted in bulk and not audited one by one (the audit log records who changed what, and nobody
does here).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from django.db import transaction

from gpupool.bulk import insert_objects
from gpupool.utilization.models import ActivityWindow


@transaction.atomic
def do_record_activity(windows: Sequence[ActivityWindow]) -> int:
    """Store one sampling window's activity per workload; returns how many rows."""
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
