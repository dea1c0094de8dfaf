"""State changes of utilisation: recording what the GPUs of running workloads did.

Activity windows are measurements, not decisions: like the roll-ups they are written in bulk
and not audited one by one (the audit log records who changed what, and nobody does here).
"""

from __future__ import annotations

from collections.abc import Sequence

from django.db import transaction

from gpupool.bulk import insert_objects
from gpupool.utilization.models import ActivityWindow


@transaction.atomic
def do_record_activity(windows: Sequence[ActivityWindow]) -> int:
    """Store one sampling window's activity per workload; returns how many rows."""
    return insert_objects(ActivityWindow, windows)
