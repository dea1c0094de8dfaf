"""Celery tasks of the quotas app: one-line shims over the app's functions."""

from __future__ import annotations

from celery import shared_task

from gpupool.quotas.actions import WHAT_IF_TIME_LIMIT_S
from gpupool.quotas.whatif import run_what_if

# A queued replay nobody picked up within this is dropped (the run counts as lost and may be
# started again); one that runs past the soft limit fails with the reason.
WHAT_IF_EXPIRES_S = 10 * 60


@shared_task(  # type: ignore[untyped-decorator]  # Celery ships no type hints
    expires=WHAT_IF_EXPIRES_S,
    soft_time_limit=WHAT_IF_TIME_LIMIT_S - 60,
    time_limit=WHAT_IF_TIME_LIMIT_S,
)
def run_what_if_task(run_id: int) -> None:
    """Run a queued what-if replay of a quota request on a worker."""
    run_what_if(run_id)
