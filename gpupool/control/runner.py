"""Running the loop: one cycle now, or cycles on a timer until stopped.

A process keeps one ``ControlLoop`` (its state is what makes later cycles cheap): the Celery
task and the commands share ``shared_loop()``. ``run_forever`` is the in-process loop used
without a broker (``gpupool loop``, ``make demo``): a cycle, then a wait until the next is
due (``GPUPOOL_CYCLE_INTERVAL_S`` after the last one started, or sooner when the cluster's
pods change and ``GPUPOOL_CYCLE_ON_CHANGE`` is on: ``wait_next_cycle``'s batching window),
until ``stop`` is set -- between cycles, never in the middle of one. It also rolls usage up
for the cost reports every ``GPUPOOL_ROLL_UP_INTERVAL_S`` (what Celery beat's
``roll_up_usage_task`` does with a broker), up to the last hour finished on the cluster's
clock: the clock the loop stamps usage with (the wall clock on Kubernetes, the simulated
cluster's in the demo). After a cycle, once
``estimates.ESTIMATE_REFRESH_S`` has passed since the last refresh, the same thread refreshes
the estimated starts from that cycle's snapshot; and every
``GPUPOOL_ACTIVITY_PRUNE_INTERVAL_S`` it deletes the activity windows past their retention
and thins the cycle log's hours past ``GPUPOOL_CYCLE_RETENTION_DAYS`` (what beat's
``prune_activity_task`` does with a broker). With ``GPUPOOL_APPLY_PIPELINE`` its
cycles are pipelined (``ControlLoop.run_cycle``): a cycle's bindings may still be in flight
while the next one syncs and plans; when the loop stops it waits for them. A Celery
task runs one whole cycle, its apply included (the lock is let go when the task ends).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import datetime, timedelta

from django.conf import settings
from django.db import close_old_connections, connection
from django.db.models import Max
from django.utils import timezone

from gpupool.accounting.actions import RollUp, do_roll_up_usage
from gpupool.accounting.models import RollUpState
from gpupool.clusters.base import Allowance, Arrivals, ClusterBackend
from gpupool.control.actions import do_thin_cycles
from gpupool.control.backends import backend_from_settings
from gpupool.control.estimates import EstimateRefresher, EstimateRun
from gpupool.control.loop import ControlLoop, CycleResult
from gpupool.control.sync import moment
from gpupool.runtime import gc_paused
from gpupool.scheduler.types import PolicyInfo
from gpupool.utilization.actions import do_prune_activity

logger = logging.getLogger(__name__)

STOP_CHECK_S = 0.5  # the longest a wait goes without looking at ``stop``
POLL_S = 0.01  # the shortest look at the arrivals in a window (a QUIET_S of 0 does not spin)
# The fewest new pods whose mean gap is taken for their stream's rate (``outruns``): pods
# made by several clients come in clumps, and two or three of a clump look like a flood.
STREAM_MIN = 8
# How far ahead of the client's bucket filling up the next cycle starts while new pods
# outrun the limit (``wait_next_cycle``'s ``lead_s``), in lengths of the last cycle to its
# bindings: the next one takes the pods that came meanwhile, more than the last one took
# while a burst's pace grows, and its length varies; a bucket full a moment before its
# bindings loses the turns of that moment for good, a cycle started a moment early costs
# only its fixed cost (B4 round 9: the turns a burst's early seconds lost).
LEAD_FACTOR = 2.0
# A stream of new pods at least 1 / RAMP_FACTOR of the client's limit, slower than the limit,
# the bucket full: a burst's ramp, as clients speed up (``ramps``). Its pods wait at most
# ``lead_s`` instead of a whole window: the turns a binder loses in a burst come to the most
# its bindings ever fell behind the limit's refill, and that is reached where the stream's
# pace passes the limit's, so a binder late there is late by its lag for good (B4 of
# 2026-12-04: windows of 0.5 s in the first second lost 0.9 s of turns against
# kube-scheduler's 0.3-0.6 s).
RAMP_FACTOR = 2.0

_shared: ControlLoop | None = None
_shared_lock = threading.Lock()
_refresher: EstimateRefresher | None = None  # estimates of a process that runs no cycle


def shared_loop() -> ControlLoop:
    """This process's loop on the configured backend (made at the first call)."""
    global _shared
    with _shared_lock:
        if _shared is None:
            _shared = ControlLoop(backend_from_settings())
        return _shared


def fresh_connections() -> None:
    """Drop database connections that broke or outlived ``CONN_MAX_AGE`` (between cycles of a
    long-lived process; never inside a transaction someone else opened)."""
    if not connection.in_atomic_block:
        close_old_connections()


def run_shared_cycle(*, dry_run: bool = False) -> CycleResult:
    """One cycle of this process's loop."""
    fresh_connections()
    try:
        return shared_loop().run_cycle(dry_run=dry_run)
    finally:
        fresh_connections()


def follow_up_s(result: CycleResult) -> float | None:
    """How soon a Celery worker runs another cycle after this one, rather than at the next
    beat: a cycle that made pods (work submitted through gpupool gets its pods in one cycle
    and is bound in the next, once they exist) asks for the next after the batching window,
    ``GPUPOOL_CYCLE_BATCH_S``, as the in-process loop's wake on the pods' change does; None:
    the beat's."""
    if result.status == "succeeded" and result.counts.get("created", 0) > 0:
        return settings.GPUPOOL_CYCLE_BATCH_S
    return None


def roll_up_usage(loop: ControlLoop) -> RollUp:
    """Roll usage up to the last accounting hour finished on ``loop``'s cluster clock
    (``roll_up_until``)."""
    return do_roll_up_usage(until=roll_up_until(loop))


def roll_up_until(loop: ControlLoop) -> datetime:
    """Up to when the roll-up may make hours final on ``loop``'s cluster clock: now, or, with a
    utilisation source, once the sampler has had time to read up to it -- it reads once an
    interval, each read reaching within a step of its time -- so an hour's last minute of
    activity is counted in that hour, not left out of it for good (a window written after
    its hour is final is in no hour's active GPU-hours). A sampler down longer than that
    still leaves its gap (docs/utilization.md)."""
    now = loop.backend.now()
    sampler = loop.utilization
    if sampler.source is not None:
        now -= sampler.interval_s + sampler.step_s
    return moment(now)


def run_shared_roll_up() -> RollUp:
    """One roll-up on this process's loop's clock (what the beat's task runs)."""
    fresh_connections()
    try:
        return roll_up_usage(shared_loop())
    finally:
        fresh_connections()


def prune_activity(loop: ControlLoop) -> int:
    """Delete activity windows older than ``GPUPOOL_ACTIVITY_RETENTION_DAYS`` on ``loop``'s
    cluster clock, never one the usage roll-up has not counted yet (a bounded batch; the
    next run goes on); returns how many went."""
    retained = moment(loop.backend.now()) - timedelta(days=settings.GPUPOOL_ACTIVITY_RETENTION_DAYS)
    rolled = RollUpState.objects.filter(name="usage").aggregate(until=Max("rolled_until"))
    if rolled["until"] is None:
        return 0
    return do_prune_activity(before=min(retained, rolled["until"]))


def thin_cycles() -> int:
    """Thin the cycle log older than ``GPUPOOL_CYCLE_RETENTION_DAYS`` to what the charts over
    time read (a bounded batch; the next run goes on); returns how many cycles went. On the
    wall clock, which stamps the cycles (a simulated cluster's clock runs ahead of it)."""
    retained = timezone.now() - timedelta(days=settings.GPUPOOL_CYCLE_RETENTION_DAYS)
    return do_thin_cycles(before=retained)


def prune(loop: ControlLoop) -> tuple[int, int]:
    """One retention run: the activity windows past theirs, then the cycle log's old hours
    thinned; how many of each went."""
    return prune_activity(loop), thin_cycles()


def run_shared_prune() -> int:
    """One retention run on this process's loop's clock (what the beat's task runs); how many
    rows went, activity windows and cycles."""
    fresh_connections()
    try:
        return sum(prune(shared_loop()))
    finally:
        fresh_connections()


def refresh_shared_estimates() -> EstimateRun:
    """Estimated starts from this process's loop (its last cycle's snapshot, else its own
    read of the database). A process that has run no cycle makes no loop for it (that would
    connect to the cluster): it keeps a refresher of its own."""
    global _refresher
    fresh_connections()
    try:
        with _shared_lock:
            loop = _shared
            if loop is None and _refresher is None:
                _refresher = EstimateRefresher(PolicyInfo())
        if loop is not None:
            return loop.refresh_estimates()
        assert _refresher is not None
        with gc_paused():
            return _refresher.refresh(None)
    finally:
        fresh_connections()


def run_forever(
    loop: ControlLoop,
    stop: threading.Event,
    *,
    interval_s: float | None = None,
    roll_up_interval_s: float | None = None,
    prune_interval_s: float | None = None,
    on_cycle: Callable[[CycleResult], None] | None = None,
    on_roll_up: Callable[[RollUp], None] | None = None,
    on_change: bool | None = None,
    pipeline: bool | None = None,
) -> int:
    """Run cycles every ``interval_s`` until ``stop`` is set, and after a cycle roll usage up
    when ``roll_up_interval_s`` has passed since the last roll-up, and delete old activity
    windows when ``prune_interval_s`` has passed since the last time; returns how many cycles
    ran. A failed roll-up or retention run is logged and tried again at the next one (the loop
    goes on). With ``on_change`` (``GPUPOOL_CYCLE_ON_CHANGE``), a change of the cluster's pods
    starts the next cycle before the interval is over (``wait_next_cycle``): the interval is
    then the longest wait, not the only one. With ``pipeline`` (``GPUPOOL_APPLY_PIPELINE``) a
    cycle's bindings go on beside the next cycle (``ControlLoop.run_cycle``); the last ones
    are waited for before this returns."""
    interval = settings.GPUPOOL_CYCLE_INTERVAL_S if interval_s is None else interval_s
    roll_up_every = (
        settings.GPUPOOL_ROLL_UP_INTERVAL_S if roll_up_interval_s is None else roll_up_interval_s
    )
    prune_every = (
        settings.GPUPOOL_ACTIVITY_PRUNE_INTERVAL_S if prune_interval_s is None else prune_interval_s
    )
    pipelined = settings.GPUPOOL_APPLY_PIPELINE if pipeline is None else pipeline
    try:
        return _run_cycles(loop, stop, interval, roll_up_every, prune_every, pipelined,
                           on_cycle, on_roll_up, on_change)  # fmt: skip
    finally:
        loop.finish_apply()


def _run_cycles(
    loop: ControlLoop,
    stop: threading.Event,
    interval: float,
    roll_up_every: float,
    prune_every: float,
    pipeline: bool,
    on_cycle: Callable[[CycleResult], None] | None,
    on_roll_up: Callable[[RollUp], None] | None,
    on_change: bool | None,
) -> int:
    cycles = 0
    roll_up_due = prune_due = time.monotonic()
    while not stop.is_set():
        started = time.monotonic()
        if loop.handed_on is None:  # never while the lock is kept on this connection
            fresh_connections()
        result = loop.run_cycle(pipeline=pipeline)
        # Its own length to its bindings handed on (or made), less the wait for the last
        # cycle's bindings: what the next one's is reckoned from (``next_cycle_lead``).
        took = time.monotonic() - started - result.timings.get("apply_wait", 0.0)
        cycles += 1
        if on_cycle is not None:
            on_cycle(result)
        if result.status == "failed":
            logger.warning("cycle failed: %s", result.error)
        elif (
            loop.estimates.due(loop.latest.now if loop.latest is not None else None)
            and not stop.is_set()
        ):
            try:
                run = loop.refresh_estimates()
                logger.info("estimated starts refreshed: %s", run.as_json())
            except Exception:  # estimates are advice: a failure never stops the loop
                logger.exception("estimated starts could not be refreshed")
        if time.monotonic() >= roll_up_due:
            roll_up_due = time.monotonic() + roll_up_every
            try:
                rolled = roll_up_usage(loop)
            except Exception:
                logger.exception("usage roll-up failed (the next one tries again)")
            else:
                if on_roll_up is not None:
                    on_roll_up(rolled)
        if time.monotonic() >= prune_due:
            prune_due = time.monotonic() + prune_every
            try:
                windows, cycles_thinned = prune(loop)
            except Exception:
                logger.exception("retention failed (the next run tries again)")
            else:
                if windows or cycles_thinned:
                    logger.info(
                        "retention: %d activity window(s), %d old cycle(s) deleted",
                        windows,
                        cycles_thinned,
                    )
        wait_next_cycle(
            loop.backend,
            stop,
            started + interval,
            settings.GPUPOOL_CYCLE_ON_CHANGE if on_change is None else on_change,
            started=started,
            lead_s=next_cycle_lead(took),
        )
    return cycles


def next_cycle_lead(took: float) -> float:
    """How long before the client's bucket is full the next cycle should start, the last
    one having taken ``took`` to its bindings: ``LEAD_FACTOR`` times that."""
    return LEAD_FACTOR * max(took, 0.0)


def wait_next_cycle(
    backend: ClusterBackend,
    stop: threading.Event,
    due: float,
    on_change: bool,
    *,
    started: float | None = None,
    batch_s: float | None = None,
    quiet_s: float | None = None,
    pause_gaps: float | None = None,
    lead_s: float = 0.0,
) -> None:
    """Wait until the next cycle: ``due`` (monotonic); at once when ``stop`` is set. With
    ``on_change``, a change of the cluster's pods since the last sync opens a batching window
    instead: the cycle starts ``batch_s`` (``GPUPOOL_CYCLE_BATCH_S``) after the last one
    ``started``, but never sooner than ``quiet_s`` (``GPUPOOL_CYCLE_QUIET_S``) after the change
    -- and as soon as new pods waiting for a node (``ClusterBackend.arrivals``) have paused:
    none for ``quiet_s``, and none for ``pause_gaps`` (``GPUPOOL_CYCLE_PAUSE_GAPS``) times their
    mean gap in this window (a slow stream's ordinary gaps do not end the window). So a
    burst of pods is taken in cycles at most every ``batch_s``, its last pods soon after it
    ends, a lone pod ``quiet_s`` after it is made; pods bound or ended start a cycle only when
    the window is over; and nothing changing costs nothing.

    New pods also end the window once waiting longer would lose the client's requests: when
    the backend's request allowance (``ClusterBackend.allowance``) will be full within
    ``lead_s`` (about what the next cycle takes to its bindings: the last one's length) and
    the pods come at least as fast as the limit binds them (``outruns``), turns would go
    unused that the stream needs. So after an idle spell (a wait of ``batch_s`` with no
    change), the bucket full, the first new pod starts a cycle at once, and while a fast burst's
    bindings have not yet drawn the bucket down the cycles follow each other; once they
    have, the window runs as above (the bindings wait for the limit anyway). A stream
    slower than the limit but at least 1 / ``RAMP_FACTOR`` of it (``ramps``: a burst's ramp)
    has its first pod wait ``lead_s`` at most while the bucket is full, not a whole window:
    a binder that lags where the stream's pace passes the limit's loses that lag's turns for
    good. A slower stream is batched as before: its bucket stays full whatever the loop
    does."""
    batch = max(settings.GPUPOOL_CYCLE_BATCH_S if batch_s is None else batch_s, 0.0)
    quiet = max(settings.GPUPOOL_CYCLE_QUIET_S if quiet_s is None else quiet_s, 0.0)
    gaps = max(settings.GPUPOOL_CYCLE_PAUSE_GAPS if pause_gaps is None else pause_gaps, 0.0)
    entered = time.monotonic()
    while not stop.is_set():
        left = due - time.monotonic()
        if left <= 0:
            return
        if not on_change:
            stop.wait(min(left, STOP_CHECK_S))
        elif backend.wait_for_change(min(left, STOP_CHECK_S)):
            woke = time.monotonic()
            opened = woke if started is None else started
            until = min(due, max(opened + batch, woke + quiet))
            quiet_spell = woke - entered >= batch  # nothing changed for a window's length
            _batching_window(backend, stop, until, quiet, gaps, max(lead_s, 0.0), quiet_spell)
            return


def outruns(arrivals: Arrivals, allowance: Allowance, *, quiet_spell: bool) -> bool:
    """Whether requests the client's bucket loses while these new pods wait would be missed:
    they come at least as fast as the limit lets pods be bound (so its turns, once lost,
    are never made up: judged on ``STREAM_MIN`` of them at least), or this is the first
    after a ``quiet_spell`` (the loop waited a window's length with nothing changing: a
    burst may be starting). Pods slower than the limit leave the bucket full whatever the
    loop does: they are batched as before, or waited for a lead at most when they may be a
    burst's ramp (``ramps``).

    The pace is the stream's since the last sync (``Arrivals.stream_gap``), not the gaps
    within the pods seen: a slow stream comes in clumps (the watch hands pods on so, clients
    make them so), and a clump's own gaps would call it fast. After a quiet spell the
    stretch before the burst is no part of its pace: the gaps between its pods are."""
    if arrivals.count == 1:
        return quiet_spell
    return arrivals.count >= STREAM_MIN and _pace_gap(arrivals, quiet_spell) * allowance.rate <= 1.0


def ramps(arrivals: Arrivals, allowance: Allowance, *, quiet_spell: bool) -> bool:
    """Whether these new pods, though no faster than the limit (``outruns``), come at least
    at 1 / ``RAMP_FACTOR`` of its pace (judged as ``outruns`` judges): a burst speeding up
    may soon outrun it, and turns a full bucket loses now are then missed for good. A
    slower stream is batched as before."""
    gap = _pace_gap(arrivals, quiet_spell)
    return arrivals.count >= STREAM_MIN and gap * allowance.rate <= RAMP_FACTOR


def _pace_gap(arrivals: Arrivals, quiet_spell: bool) -> float:
    """The new pods' gap as their pace is judged (``outruns``): the stream's since the last
    sync; after a quiet spell the gaps between them (the stretch before is no part of it)."""
    return arrivals.mean_gap if quiet_spell else arrivals.stream_gap


def _batching_window(
    backend: ClusterBackend,
    stop: threading.Event,
    until: float,
    quiet: float,
    gaps: float,
    lead: float,
    quiet_spell: bool,
) -> None:
    """Wait until ``until`` (monotonic), until the pods arriving have paused, or until the
    client's allowance is ``lead`` from full with pods arriving, whichever is first
    (``wait_next_cycle``). At DEBUG the window's end is logged with what ended it."""
    opened = time.monotonic()
    while not stop.is_set():
        now = time.monotonic()
        arrivals = backend.arrivals()
        end, why = until, "the window's length"
        look = max(quiet, POLL_S)
        allowance = None
        if arrivals.count:
            paused = arrivals.last + max(quiet, gaps * arrivals.mean_gap)
            if paused < until:
                end, why = paused, "the new pods paused"
            allowance = backend.allowance()
            if allowance is not None:
                if outruns(arrivals, allowance, quiet_spell=quiet_spell):
                    hurried, kind = allowance.full_at - lead, "a stream faster than the limit"
                elif ramps(arrivals, allowance, quiet_spell=quiet_spell):
                    # The first pod waits a lead at most, unless the bucket will still
                    # have room a lead after that.
                    hurried = max(arrivals.first + lead, allowance.full_at - lead)
                    kind = "a ramp toward the limit"
                else:
                    hurried, kind = end, ""
                if hurried < end:
                    end, why = hurried, f"{kind}, the client's bucket full in under a lead"
                # The next pods may make a stream of this (``STREAM_MIN``) while the bucket
                # is full: seen a poll later, not a quiet_s later (turns lost meanwhile).
                look = POLL_S
        if now >= end:
            if logger.isEnabledFor(logging.DEBUG):
                logger.debug(
                    "window of %.3f s ended by %s: %d new pods (gaps: %.4f s mean, %.4f s "
                    "since the sync), bucket full in %s, lead %.3f s",
                    now - opened,
                    why,
                    arrivals.count,
                    arrivals.mean_gap,
                    arrivals.stream_gap,
                    "-" if allowance is None else f"{max(allowance.full_at - now, 0.0):.3f} s",
                    lead,
                )
            return
        stop.wait(min(end - now, look, STOP_CHECK_S))
