"""Celery tasks of accounting: one-line shims (beat schedules them in settings)."""

from __future__ import annotations

from celery import shared_task
from django.conf import settings

from gpupool.control.runner import run_shared_roll_up

# A roll-up queued longer than one interval is dropped: the next beat's run covers the same hours.
ROLL_UP_EXPIRES_S = settings.GPUPOOL_ROLL_UP_INTERVAL_S


@shared_task(  # type: ignore[untyped-decorator]  # Celery ships no type hints
    name="gpupool.accounting.roll_up_usage", expires=ROLL_UP_EXPIRES_S
)
def roll_up_usage_task() -> None:
    """Roll usage up to the last accounting hour finished on the cluster's clock."""
    run_shared_roll_up()
