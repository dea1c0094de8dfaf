"""Celery tasks of the control loop: one-line shims (beat schedules them in settings)."""

from __future__ import annotations

from typing import Any

from celery import shared_task
from django.conf import settings

from gpupool.control.estimates import ESTIMATE_REFRESH_S
from gpupool.control.runner import follow_up_s, refresh_shared_estimates, run_shared_cycle

# A cycle queued longer than one interval is dropped: the next beat's cycle does the same work.
CYCLE_EXPIRES_S = settings.GPUPOOL_CYCLE_INTERVAL_S
CYCLE_SOFT_TIME_LIMIT_S = settings.GPUPOOL_CYCLE_TIME_LIMIT_S
CYCLE_TIME_LIMIT_S = settings.GPUPOOL_CYCLE_TIME_LIMIT_S + 30


@shared_task(  # type: ignore[untyped-decorator]  # Celery ships no type hints
    bind=True,
    name="gpupool.control.run_cycle",
    expires=CYCLE_EXPIRES_S,
    soft_time_limit=CYCLE_SOFT_TIME_LIMIT_S,
    time_limit=CYCLE_TIME_LIMIT_S,
)
def run_cycle_task(self: Any) -> dict[str, Any]:
    """One scheduling cycle of this worker's loop (skipped when another holds the lock); one
    that made pods queues the next on the same queue soon after (``runner.follow_up_s``)."""
    result = run_shared_cycle()
    if (delay := follow_up_s(result)) is not None:
        queue = (self.request.delivery_info or {}).get("routing_key")
        self.apply_async(countdown=delay, expires=delay + CYCLE_EXPIRES_S, queue=queue)
    return result.as_json()


@shared_task(  # type: ignore[untyped-decorator]  # Celery ships no type hints
    name="gpupool.control.refresh_estimates",
    expires=ESTIMATE_REFRESH_S,
    soft_time_limit=ESTIMATE_REFRESH_S * 2,
    time_limit=ESTIMATE_REFRESH_S * 2 + 30,
)
def refresh_estimates_task() -> dict[str, object]:
    """Estimated starts of every pending workload (``estimates.py``), off the cycle."""
    return refresh_shared_estimates().as_json()
