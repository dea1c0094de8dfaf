"""Estimated starts of pending work, refreshed off the cycle's critical path.

Positions are written by the cycle with the explanations (``record.py``); estimated starts
take a replay of the future (the core's ``estimate.estimate_starts``: plan, apply, finish
what is due, jump to the next change, plan again), which costs a whole ``plan()`` per step.
They are refreshed apart from the cycle: by the Celery task ``refresh_estimates_task`` on
beat's ``ESTIMATE_REFRESH_S`` schedule, and in the in-process loop (``runner.run_forever``)
after the cycle once ``ESTIMATE_REFRESH_S`` has passed since the last refresh.

The replay runs on the loop's latest snapshot (``ControlLoop.latest``: what the last cycle
planned, with learned runtimes and the cluster's additions) when this process ran a cycle
since the last refresh; otherwise (a Celery worker process that runs no cycles) on its own
``LoopState``, read once and then refreshed by what changed, with learned runtimes
(``learning.RuntimeHistory``).

**Work that outlived its expected runtime.** Both snapshots give running work whose end by its
declared or learned runtime has passed the median of the similar runs that outlasted it, or no
runtime when none did (``RuntimeHistory.expected_runtime``, one rule for the cycle, backfill
and the replay): the replay would otherwise finish it at once, at every refresh, and what
waits on it would read "due now" again and again.

**The bound.** At B1's size a step costs a whole cycle's ``plan()`` (about 4.5 s with the
compiled core, explanations of 10,000 pending included), so the core's 200 steps would take
a quarter of an hour. The replay stops after ``MAX_STEPS`` steps; a workload the replay has
not admitted by then gets no estimate (``estimated_start_at`` empty, as for work that waits
on something with no expected end), and its facts say ``estimate_not_before``: the latest
estimate the replay reached, before which it does not start (the replay cannot say whether
it stopped at the bound or ran out of known ends, so the fact is written either way).

**Learned or declared.** An estimate rests on the ends of the work that frees the GPUs. It is
said to rest on a learned runtime (``pending_facts["estimate_learned"]``, which the API and
the CLI read) when some work whose expected runtime was learned (``learning.py``) is due to
end by the estimated start: running work at its start plus that runtime, pending work at its
own estimated start plus it. That is an upper bound of "rests on", cheap to compute, and never
says "declared" of an estimate that a learned runtime moved.

**Work that never fits** -- set aside by the core's enqueue because a capability on its path,
or the pool, can never hold it (the fact ``never_fits``, ``scheduler.explain.never_fits``) --
is left out of the replay, as the core leaves it out of every cycle: no replay step could
admit it, and waiting for it kept the replay going to its bound. Which work that is comes
from the last cycle's record (``never_fitting``: the explanations that say so, written at
once when that changes, ``record.py``), not from a second reading of the quotas. Such work
gets no estimate and no ``estimate_not_before`` (``NO_ESTIMATE``).

**Work that waits for its pods** -- a gang the cluster has not made every pod of yet (its
``missing_pods``, reason ``gang``), and whose pods are not gpupool's to make (work from the
cluster: a Job, a JobSet, bare pods) -- cannot start when GPUs free: it waits for pods nothing
here can promise. It is left out of the replay as never-fitting work is, and gets no estimate
and no ``estimate_not_before`` (``NO_ESTIMATE``); its explanation (``gang``, ``missing_pods``)
says what it waits for, and the API, the CLI and the pages say "waits for its pods" rather
than a time. Before, the replay assumed every missing pod made, and a gang of 3 with 2 pods
read "Estimated start: due now". Work submitted through gpupool is different: the loop makes
its pods itself, at once, so those are assumed made (``_pods_assumed``).

Only estimates that changed since this process last wrote them are written
(``actions.do_record_estimates``, one bulk statement): new ones, ones whose basis changed,
and ones that moved by more than ``ESTIMATE_TOLERANCE_S``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

from django.utils import timezone

from gpupool.control.actions import EstimateRow, do_record_estimates
from gpupool.control.learning import RuntimeHistory
from gpupool.control.state import LoopState
from gpupool.runtime import gc_paused
from gpupool.scheduler.estimate import estimate_starts
from gpupool.scheduler.explain import NEVER_FITS_FACT
from gpupool.scheduler.types import PolicyInfo, Snapshot
from gpupool.workloads.choices import Origin, WorkloadState
from gpupool.workloads.models import Workload, WorkloadExplanation

logger = logging.getLogger(__name__)

ESTIMATE_REFRESH_S = 60.0  # estimates are refreshed at least this often
ESTIMATE_TOLERANCE_S = 120.0  # an estimate that moved less is not written again
MAX_STEPS = 8  # replay steps (each a whole plan()): about 40 s at B1's size, compiled core

NO_ESTIMATE = EstimateRow(None, None, None)  # never fits: no estimate, no moment either


def refresh_words() -> str:
    """How often estimates are refreshed, in words (``every minute``, ``every 2 minutes``):
    what a page, a summary or the CLI says beside an estimate that has already passed."""
    minutes = max(1, round(ESTIMATE_REFRESH_S / 60))
    return "every minute" if minutes == 1 else f"every {minutes} minutes"


@dataclass(frozen=True, slots=True)
class Planned:
    """What a cycle planned on: its snapshot, its time, the workloads' row ids, and which
    workloads' expected runtimes were learned."""

    snapshot: Snapshot
    now: float
    workload_ids: Mapping[str, int]
    learned: frozenset[str]
    taken: float = field(default_factory=time.monotonic)  # when the cycle planned (monotonic)


@dataclass(frozen=True, slots=True)
class EstimateRun:
    """One refresh, as the task returns it and the benchmark reports it."""

    pending: int
    estimated: int
    unestimated: int
    written: int
    replay_s: float
    total_s: float
    source: str  # "loop": the cycle's snapshot; "state": this process's own read
    never_fits: int = 0  # pending work left out of the replay: it never fits (not in pending)
    waiting_for_pods: int = 0  # left out too: it waits for pods the cluster has not made

    def as_json(self) -> dict[str, object]:
        """The run as JSON data."""
        return {
            "pending": self.pending,
            "estimated": self.estimated,
            "unestimated": self.unestimated,
            "never_fits": self.never_fits,
            "waiting_for_pods": self.waiting_for_pods,
            "written": self.written,
            "replay_s": round(self.replay_s, 3),
            "total_s": round(self.total_s, 3),
            "source": self.source,
        }


def learned_basis(
    snapshot: Snapshot, estimates: Mapping[str, float | None], learned: Collection[str]
) -> dict[str, bool]:
    """Per estimated workload: does its estimate rest on a learned runtime (module doc)?"""
    earliest: float | None = None
    for workload in snapshot.workloads:
        runtime = workload.expected_runtime_s
        if workload.name not in learned or runtime is None:
            continue
        start = workload.started_at if workload.state == "running" else estimates.get(workload.name)
        if start is not None and (earliest is None or start + runtime < earliest):
            earliest = start + runtime
    return {
        name: earliest is not None and earliest <= at
        for name, at in estimates.items()
        if at is not None
    }


def estimate_rows(
    planned: Planned, estimates: Mapping[str, float | None]
) -> dict[int, EstimateRow]:
    """The estimates as rows: when and whether learned; for work without one, the latest
    estimate the replay reached (it starts no earlier)."""
    learned = learned_basis(planned.snapshot, estimates, planned.learned)
    known = [at for at in estimates.values() if at is not None]
    not_before = max(known) if known else None
    rows: dict[int, EstimateRow] = {}
    for name, at in estimates.items():
        workload_id = planned.workload_ids.get(name)
        if workload_id is None:
            continue
        if at is not None:
            rows[workload_id] = EstimateRow(_moment(at), learned[name], None)
        else:
            rows[workload_id] = EstimateRow(
                None, None, None if not_before is None else _moment(not_before)
            )
    return rows


def _moved(before: EstimateRow | None, after: EstimateRow) -> bool:
    """Whether an estimate is to be written again: new, its basis changed, or a moment moved
    by more than ``ESTIMATE_TOLERANCE_S`` (estimates anchored at the replay's start move
    with the clock at every refresh; rewriting them all each minute would say nothing)."""
    if before is None or before.learned != after.learned:
        return True
    for old, new in ((before.at, after.at), (before.not_before, after.not_before)):
        if (old is None) != (new is None):
            return True
        if (
            old is not None
            and new is not None
            and abs((new - old).total_seconds()) > ESTIMATE_TOLERANCE_S
        ):
            return True
    return False


def _pods_assumed(snapshot: Snapshot) -> Snapshot:
    """The snapshot with every pod a gang still waits for assumed made: the estimate says when
    the GPUs are free. Only for work whose pods the loop makes itself, at once (work waiting
    for the cluster's pods is left out first: ``waiting_for_pods``)."""
    if not any(w.missing_pods for w in snapshot.workloads):
        return snapshot
    workloads = tuple(
        replace(w, missing_pods=0) if w.missing_pods else w for w in snapshot.workloads
    )
    return replace(snapshot, workloads=workloads)


def never_fitting(planned: Planned) -> frozenset[str]:
    """The pending workloads of ``planned`` whose recorded explanation says the core set
    them aside as never fitting (one query)."""
    ids = WorkloadExplanation.objects.filter(
        workload__state=WorkloadState.PENDING, **{f"facts__{NEVER_FITS_FACT}": True}
    ).values_list("workload_id", flat=True)
    found = set(ids)
    if not found:
        return frozenset()
    return frozenset(name for name, pk in planned.workload_ids.items() if pk in found)


def waiting_for_pods(planned: Planned) -> frozenset[str]:
    """The pending workloads of ``planned`` that lack pods (``missing_pods``) which gpupool
    does not make itself: the cluster's (a Job's, bare pods'), with no time to promise (one
    query, only when some workload lacks pods)."""
    lacking = {
        planned.workload_ids[w.name]: w.name
        for w in planned.snapshot.workloads
        if w.state == "pending" and w.missing_pods > 0 and w.name in planned.workload_ids
    }
    if not lacking:
        return frozenset()
    ours = set(
        Workload.objects.filter(pk__in=list(lacking), origin=Origin.GPUPOOL).values_list(
            "pk", flat=True
        )
    )
    return frozenset(name for pk, name in lacking.items() if pk not in ours)


def _without(snapshot: Snapshot, names: Collection[str]) -> Snapshot:
    """The snapshot without the workloads ``names``."""
    if not names:
        return snapshot
    workloads = tuple(w for w in snapshot.workloads if w.name not in names)
    return replace(snapshot, workloads=workloads)


def _moment(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, tz=UTC)


@dataclass
class EstimateRefresher:
    """Refreshes estimated starts; remembers what it wrote, to write only what changed."""

    policy: PolicyInfo
    max_steps: int = MAX_STEPS
    written: dict[int, EstimateRow] = field(default_factory=dict)
    last_at: float | None = None  # monotonic time of the last refresh
    last_pool_at: float | None = None  # the pool's time it replayed from (POSIX seconds)
    _state: LoopState | None = None
    _runtimes: RuntimeHistory | None = None

    def due(self, pool_at: float | None = None) -> bool:
        """Whether ``ESTIMATE_REFRESH_S`` has passed since the last refresh, on the wall
        clock or on the pool's (``pool_at``: the latest cycle's time): a simulated cluster
        runs ahead of the wall clock (the demo: an hour a minute), and estimates refreshed
        once a wall minute lay an hour of the pool's time behind it."""
        if self.last_at is None or time.monotonic() - self.last_at >= ESTIMATE_REFRESH_S:
            return True
        return (
            pool_at is not None
            and self.last_pool_at is not None
            and pool_at - self.last_pool_at >= ESTIMATE_REFRESH_S
        )

    def refresh(self, planned: Planned | None) -> EstimateRun:
        """Replay from ``planned`` when a cycle planned it less than ``ESTIMATE_REFRESH_S``
        ago (else from this process's own read); write what changed."""
        started = time.perf_counter()
        source = "loop"
        if planned is None or time.monotonic() - planned.taken > ESTIMATE_REFRESH_S:
            planned, source = self._own_snapshot(), "state"
        never = never_fitting(planned)
        lacking = waiting_for_pods(planned) - never
        clock = time.perf_counter()
        with gc_paused():
            estimates = estimate_starts(
                _pods_assumed(_without(planned.snapshot, never | lacking)),
                self.policy,
                planned.now,
                self.max_steps,
            )
        replay_s = time.perf_counter() - clock
        unknown = sum(1 for at in estimates.values() if at is None)
        rows = estimate_rows(planned, estimates)
        for name in never | lacking:
            rows[planned.workload_ids[name]] = NO_ESTIMATE
        changed = {pk: row for pk, row in rows.items() if _moved(self.written.get(pk), row)}
        do_record_estimates(changed)
        self.written = {pk: changed.get(pk) or self.written[pk] for pk in rows}
        self.last_at = time.monotonic()
        self.last_pool_at = planned.now
        return EstimateRun(
            pending=len(estimates),
            estimated=len(estimates) - unknown,
            unestimated=unknown,
            written=len(changed),
            replay_s=replay_s,
            total_s=time.perf_counter() - started,
            source=source,
            never_fits=len(never),
            waiting_for_pods=len(lacking),
        )

    def _own_snapshot(self) -> Planned:
        """The database as the core sees it, read by this process (incrementally)."""
        if self._state is None:
            self._state = LoopState(self.policy)
            self._runtimes = RuntimeHistory()
            self._runtimes.load()
        assert self._runtimes is not None
        now = timezone.now()
        self._state.refresh(now)
        database = self._state.snapshot(now)
        learned: set[str] = set()
        workloads = []
        for workload in database.snapshot.workloads:
            # the loop's rule (``RuntimeHistory.expected_runtime``, as its ``_overlay``)
            expected = self._runtimes.expected_runtime(workload, database.now)
            if expected.learned:
                learned.add(workload.name)
            if expected.runtime_s != workload.expected_runtime_s:
                workload = replace(workload, expected_runtime_s=expected.runtime_s)
            workloads.append(workload)
        snapshot = replace(database.snapshot, workloads=tuple(workloads))
        return Planned(snapshot, database.now, database.workload_ids, frozenset(learned))


__all__ = [
    "ESTIMATE_REFRESH_S",
    "MAX_STEPS",
    "NO_ESTIMATE",
    "EstimateRefresher",
    "EstimateRun",
    "Planned",
    "estimate_rows",
    "learned_basis",
    "never_fitting",
    "waiting_for_pods",
]
