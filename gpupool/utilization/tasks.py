"""Celery tasks of utilisation: one-line shims (beat schedules them in settings)."""

from __future__ import annotations

from celery import shared_task
from django.conf import settings

from gpupool.control.runner import run_shared_prune


@shared_task(  # type: ignore[untyped-decorator]  # Celery ships no type hints
    name="gpupool.utilization.prune_activity",
    expires=settings.GPUPOOL_ACTIVITY_PRUNE_INTERVAL_S,
)
def prune_activity_task() -> int:
    """Delete activity windows past their retention and rolled up (a bounded batch)."""
    return run_shared_prune()
