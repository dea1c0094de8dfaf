"""The what-if of a quota request: recent demand replayed with and without its change.

An admin starts a run (``do_start_what_if``); once that commits, ``dispatch_what_if`` hands it
to a Celery worker when a broker is configured (``run_what_if_task``), else to a thread of the
web process (the embedded default). ``run_what_if`` then replays the workloads submitted in the
run's last ``days`` days through the simulator twice -- today's queues, and today's with the
request's quota, both on the nodes as the pages see them (what other schedulers' pods hold
taken, ``foreign_gpus`` in the result) -- recording its progress on the run, and keeps the
result (pool and per-tenant figures, what each replay set aside as never fitting its quotas --
the core's rule, so the request's own change may let such work in -- and the change in each
tenant's waits) with the request (``docs/governance.md``, ``docs/whatif.md``).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import connections
from django.db.models import Min

from gpupool.control.clock import pool_now, pool_now_after
from gpupool.quotas.actions import (
    do_begin_what_if,
    do_finish_what_if,
    do_record_what_if_progress,
)
from gpupool.quotas.models import QuotaRequest, WhatIfRun
from gpupool.scheduler.types import MILLI, QueueInfo
from gpupool.simulation.queueing.whatif import QuotaChange, apply_changes, replay_whatif
from gpupool.simulation.queueing.whatif_db import recorded_demand
from gpupool.workloads.models import Workload

logger = logging.getLogger(__name__)

Progress = Callable[[float, str], None]

# Where a run's fraction stands after each stage: the two replays share the middle, each
# moving it as its jobs finish; a step smaller than PROGRESS_STEP is not written.
READ, REPLAYED = 0.1, 0.95
PROGRESS_STEP = 0.02
REPLAYS = {"today": (0, "with today's quotas"), "proposed": (1, "with the change")}


def dispatch_what_if(run_id: int) -> None:
    """Start a queued run in the background: on a Celery worker when a broker is configured
    (``REDIS_URL``), else in a daemon thread of this process."""
    if settings.REDIS_URL:
        from gpupool.quotas.tasks import run_what_if_task

        try:
            run_what_if_task.delay(run_id)
        except Exception as failure:  # the broker is down: the run must not stay queued
            logger.exception("what-if #%s could not be sent to a worker", run_id)
            run = do_begin_what_if(run_id, at=pool_now())
            if run is not None:
                error = f"it could not be sent to a worker (the broker at REDIS_URL): {failure}"
                do_finish_what_if(run, at=pool_now_after(run.started_at), error=error)
        return
    thread = threading.Thread(
        target=_run_in_thread, args=(run_id,), name=f"what-if-{run_id}", daemon=True
    )
    thread.start()


def _run_in_thread(run_id: int) -> None:
    """The thread's body: run, then give back the thread's database connection."""
    try:
        run_what_if(run_id)
    finally:
        connections.close_all()


def run_what_if(run_id: int) -> WhatIfRun | None:
    """Run a queued what-if to its end, recording progress and the result (or why it failed);
    None when the run was not queued (another worker took it, or it is done)."""
    # One clock for the run and its window: the pool's, which stamps the workloads it
    # replays (a simulated cluster runs ahead of the wall clock). The window ends at the
    # run's start; its end is never before that.
    run = do_begin_what_if(run_id, at=pool_now())
    if run is None:
        return None
    started = run.started_at
    assert started is not None

    def progress(fraction: float, message: str) -> None:
        do_record_what_if_progress(run, progress=fraction, message=message)

    try:
        result = replay_request(run.request, days=run.days, now=started, progress=progress)
    except ValueError as refused:  # the proposal cannot be replayed; the message says why
        return do_finish_what_if(run, at=pool_now_after(started), error=str(refused))
    except Exception as failure:
        logger.exception("what-if #%s failed", run.pk)
        error = f"the replay failed: {failure!r}"
        return do_finish_what_if(run, at=pool_now_after(started), error=error)
    return do_finish_what_if(run, at=pool_now_after(started), result=result)


def replay_request(
    request: QuotaRequest, *, days: int, now: datetime, progress: Progress
) -> dict[str, Any]:
    """The what-if of a queue-quota request over the ``days`` days before ``now``: the
    simulator's comparison as JSON, with the window, what was left out, and each tenant's
    change in waits (``ValueError`` when the change cannot be replayed, saying why)."""
    assert request.queue is not None and request.flavor is not None
    progress(0.0, f"reading the workloads of the last {days} days")
    asked_start = now - timedelta(days=days)
    first = first_submission(asked_start, now)
    # A pool younger than the window asked: replay its history, not days before it began
    # (30 days over 5 hours of work read as a pool 0.6 % used).
    short = first is not None and not Workload.objects.filter(submitted_at__lt=asked_start).exists()
    span_days = (
        ((now - first) + timedelta(seconds=1)) / timedelta(days=1) if short and first else days
    )
    demand = recorded_demand(span_days, now)
    amounts = request.requested_amounts()
    change = QuotaChange(
        request.queue.name,
        request.flavor.name,
        deserved=float(amounts["deserved"]),
        capability=float(amounts["capability"]),
        guarantee=float(amounts["guarantee"]),
    )
    proposed = apply_changes(demand.queues, [change])
    progress(READ, f"replaying {len(demand.jobs)} workloads, today and with the change")
    comparison = replay_whatif(
        demand.jobs,
        demand.queues,
        proposed,
        nodes=demand.nodes,
        flavors=demand.flavors,
        priority_classes=demand.priority_classes,
        window_s=demand.window_s,
        changes=[change],
        on_progress=replay_progress(progress),
    )
    progress(REPLAYED, "keeping the result")
    result = comparison.to_json()
    add_deserved_by_flavor(result["tenants"], demand.queues, proposed)
    return result | {
        "days": days,
        "window_start": demand.start.isoformat(),
        "window_end": demand.end.isoformat(),
        # The history the window held: its first recorded submission (None: no work in it),
        # and whether the window was cut to it (the pool is younger than ``days``).
        "first_submission": first.isoformat() if first is not None else None,
        "history_s": (now - first).total_seconds() if first is not None else None,
        "window_shortened": short,
        "left_out": dict(sorted(demand.skipped.items())),
        # On the nodes as the pages see them: the GPUs other schedulers' pods hold (as the
        # loop last recorded them) are taken for the whole of both replays, and not part of
        # ``pool_gpus``.
        "foreign_gpus": demand.foreign_gpus,
        "wait_changes": wait_changes(result["tenants"]),
    }


def first_submission(start: datetime, end: datetime) -> datetime | None:
    """The first recorded submission from ``start`` to ``end`` (None: no workload)."""
    window = Workload.objects.filter(submitted_at__gte=start, submitted_at__lt=end)
    first: datetime | None = window.aggregate(first=Min("submitted_at"))["first"]
    return first


def deserved_by_flavor(queues: Iterable[QueueInfo]) -> dict[str, dict[str, float]]:
    """Per tenant and flavor, the deserved GPUs of its leaf queues: GPUs of different flavors
    (an H100, a MIG slice) are not added together (``deserved_gpus`` is their sum)."""
    listed = list(queues)
    parents = {q.parent for q in listed if q.parent is not None}
    result: dict[str, dict[str, float]] = {}
    for queue in listed:
        if queue.name in parents:
            continue
        mine = result.setdefault(queue.tenant or queue.name, {})
        for flavor, quota in queue.quota.items():
            mine[flavor] = mine.get(flavor, 0.0) + quota.deserved / MILLI
    return {
        tenant: {flavor: round(gpus, 3) for flavor, gpus in sorted(flavors.items()) if gpus}
        for tenant, flavors in result.items()
    }


def add_deserved_by_flavor(
    tenants: dict[str, Any], today: Iterable[QueueInfo], proposed: Iterable[QueueInfo]
) -> None:
    """Beside each tenant's ``deserved_gpus`` (all flavors together), the same per flavor:
    ``deserved_gpus_by_flavor`` in its figures today and with the change."""
    for side, queues in (("before", today), ("after", proposed)):
        shares = deserved_by_flavor(queues)
        for tenant, figures in tenants.items():
            if figures.get(side) is not None:
                figures[side]["deserved_gpus_by_flavor"] = shares.get(tenant, {})


def replay_progress(progress: Progress) -> Callable[[str, int, int], None]:
    """The simulator's count of finished jobs in each replay as the run's fraction: today's
    replay takes it from READ half-way to REPLAYED, the proposed one the rest."""
    noted = READ

    def note(replay: str, finished: int, total: int) -> None:
        nonlocal noted
        index, what = REPLAYS[replay]
        fraction = READ + (REPLAYED - READ) * (index + finished / max(total, 1)) / 2
        if fraction - noted >= PROGRESS_STEP:
            noted = fraction
            progress(
                fraction,
                f"replaying {what}: {finished:,} of {total:,} workloads done "
                f"(replay {index + 1} of {len(REPLAYS)})",
            )

    return note


WAIT_FIGURES = ("wait_mean_s", "wait_p99_s")


def wait_changes(tenants: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per tenant, its mean and p99 wait today, with the change, and the difference
    (seconds; None where the tenant had no workload in one of the two replays)."""
    changes: dict[str, dict[str, Any]] = {}
    for tenant, figures in sorted(tenants.items()):
        before, after = figures.get("before") or {}, figures.get("after") or {}
        changes[tenant] = {}
        for name in WAIT_FIGURES:
            was, now = before.get(name), after.get(name)
            difference = None if was is None or now is None else round(now - was, 1)
            changes[tenant][name] = {"before": was, "after": now, "change": difference}
    return changes
