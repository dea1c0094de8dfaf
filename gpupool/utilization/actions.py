"""State changes of utilisation: recording what the GPUs of running workloads did.

Activity windows are measurements, not decisions: like the roll-ups they are written in bulk
and not audited one by one (the audit log records who changed what, and nobody does here).
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
