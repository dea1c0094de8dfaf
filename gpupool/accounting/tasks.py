"""Celery tasks of accounting: one-line shims over its actions."""

from __future__ import annotations

from celery import shared_task
from django.utils import timezone

from gpupool.accounting.actions import do_roll_up_usage

# A roll-up queued longer than this is dropped: the next beat's run covers the same hours.
ROLL_UP_EXPIRES_S = 600


@shared_task(expires=ROLL_UP_EXPIRES_S)  # type: ignore[untyped-decorator]
def roll_up_usage_task() -> None:
    """Roll usage up to the last finished accounting hour (beat runs it every few minutes)."""
    do_roll_up_usage(until=timezone.now())
