"""Expected runtimes learned from history, for work that declares none.

Estimated starts, backfill behind a hold and ``next_change_at`` need to know when running work
ends; a workload that declares no ``expected_runtime_s`` gets the median runtime of *similar*
finished work of the same queue: work that succeeded with the same number of GPUs (fractions
count) on the same first flavor -- what a team runs again and again (a fine-tune, an eval, a
sweep point) tends to take as long as last time. At least ``MIN_SAMPLES`` such runs are needed,
and the last ``KEEP`` count. The snapshot carries the learned value and the workload's
explanation says it was learned (``expected_runtime_learned`` in its facts), so a reader can
tell a guess from a promise.

**Work that outlived its expected runtime.** About half of the running work outlives the median
of its kind, and declared runtimes are sometimes too short. Taken at its word, such work would
be due to end *now* at every cycle and every re-estimate, and what waits on it estimated to
start now, again and again. ``expected_runtime`` is the one rule the loop's snapshot (and the
estimates' own read) gives running work instead: once ``started_at + runtime`` has passed, the
runtime is the median of the similar finished runs that lasted *longer* than this one has run
so far (a conditional median: given it has run this long, how long do such runs last), learned;
when no similar run lasted that long, or there is no history, its end is unknown (``None``):
the replay then gives no estimate to what waits only on it, and backfill does not count on it.
Samples are kept sorted per similarity, so the answer is a bisection; it changes only when the
work has run as long as the next similar run (``Expected.until``), so the loop looks it up again
only then, or when the workload's row or the history changed.
"""

from __future__ import annotations

import math
import statistics
from bisect import bisect_left, bisect_right, insort
from collections import defaultdict, deque
from collections.abc import Iterable
from typing import NamedTuple

from django.db.models import Q

from gpupool.control.snapshot import pod_set_infos
from gpupool.scheduler.contracts import gpu_count
from gpupool.scheduler.types import WorkloadInfo
from gpupool.workloads.choices import WorkloadState
from gpupool.workloads.models import Workload

MIN_SAMPLES = 3
KEEP = 50
LOAD_LIMIT = 20_000  # the most recent finished workloads read at start

Similar = tuple[str, float, str]  # queue, GPUs, first flavor


def similar(workload: WorkloadInfo) -> Similar:
    """What makes two workloads alike for their runtime: queue, GPUs, first flavor."""
    first = workload.pod_sets[0].flavors[0] if workload.pod_sets[0].flavors else ""
    return (workload.queue, round(gpu_count(workload), 3), first)


class Expected(NamedTuple):
    """A workload's expected runtime as the snapshot gives it (``expected_runtime``)."""

    runtime_s: float | None  # None: unknown (no end in the replay)
    learned: bool  # the runtime comes from the history, not the workload's declaration
    outlived: bool  # running work past its declared or learned end (conditional median or None)
    # The moment (the cycle's clock) until which the answer holds, the history and the
    # workload unchanged: running work's end, or the next similar run it outlasts; else inf.
    until: float = math.inf


class RuntimeHistory:
    """Recent runtimes of finished work by similarity, and their medians."""

    def __init__(self) -> None:
        self.samples: dict[Similar, deque[float]] = defaultdict(lambda: deque(maxlen=KEEP))
        self._sorted: dict[Similar, list[float]] = {}  # the same samples, sorted
        self._medians: dict[Similar, float | None] = {}
        self.version = 0  # moves whenever a median may have changed (``load``, ``add``)

    def _append(self, key: Similar, seconds: float) -> None:
        """One more run of kind ``key``; the oldest leaves once ``KEEP`` are held."""
        runs = self.samples[key]
        ordered = self._sorted.setdefault(key, [])
        if len(runs) == runs.maxlen:
            del ordered[bisect_left(ordered, runs[0])]
        runs.append(seconds)
        insort(ordered, seconds)

    def load(self) -> None:
        """Read the most recent successes."""
        rows = list(
            Workload.objects.filter(
                state=WorkloadState.SUCCEEDED, started_at__isnull=False, finished_at__isnull=False
            )
            .order_by("-finished_at")
            .values_list("id", "queue__name", "started_at", "finished_at")[:LOAD_LIMIT]
        )
        if not rows:
            return
        sets = pod_set_infos(Q(pk__in=[row[0] for row in rows]))
        for pk, queue, started, finished in reversed(rows):
            if started is None or finished is None:
                continue
            pod_sets = tuple(info for _, info in sets.get(pk, []))
            if not pod_sets:
                continue
            flavors = pod_sets[0].flavors
            gpus = sum(p.count * p.gpus * p.gpu_milli for p in pod_sets) / 1000
            key = (queue, round(gpus, 3), flavors[0] if flavors else "")
            self._append(key, (finished - started).total_seconds())
        self._medians.clear()
        self.version += 1

    def add(self, finished: Iterable[tuple[WorkloadInfo, float]]) -> None:
        """Runs the loop saw succeed: (the workload, its runtime in seconds)."""
        for workload, seconds in finished:
            if seconds > 0:
                key = similar(workload)
                self._append(key, seconds)
                self._medians.pop(key, None)
                self.version += 1

    def median(self, workload: WorkloadInfo) -> float | None:
        """The learned runtime of work like this one (None: too few runs yet)."""
        key = similar(workload)
        if key not in self._medians:
            runs = self.samples.get(key)
            self._medians[key] = (
                statistics.median(runs) if runs is not None and len(runs) >= MIN_SAMPLES else None
            )
        return self._medians[key]

    def outlasting(self, workload: WorkloadInfo, elapsed: float) -> float | None:
        """The median runtime of the similar finished runs that lasted longer than
        ``elapsed`` seconds (None: too few runs of its kind, or none lasted that long)."""
        return self._outlasting(workload, elapsed)[0]

    def _outlasting(self, workload: WorkloadInfo, elapsed: float) -> tuple[float | None, float]:
        """``outlasting``, and the shortest of those runs (inf: none): the answer holds until
        the workload has run that long."""
        ordered = self._sorted.get(similar(workload))
        if ordered is None or len(ordered) < MIN_SAMPLES:
            return None, math.inf
        first = bisect_right(ordered, elapsed)
        count = len(ordered) - first
        if count == 0:
            return None, math.inf
        middle = first + count // 2
        answer = ordered[middle] if count % 2 else (ordered[middle - 1] + ordered[middle]) / 2
        return answer, ordered[first]

    def expected_runtime(self, workload: WorkloadInfo, now: float) -> Expected:
        """The expected runtime the snapshot gives ``workload`` at ``now`` (the cycle's
        clock): its declared one, else the median of similar work; for running work whose
        end by that runtime has come, the median of the similar runs that lasted longer than
        it has run so far, else unknown (module doc)."""
        declared = workload.expected_runtime_s
        runtime = declared if declared is not None else self.median(workload)
        learned = declared is None and runtime is not None
        started = workload.started_at if workload.state == "running" else None
        if started is None or runtime is None:
            return Expected(runtime, learned, False)
        if started + runtime > now:
            return Expected(runtime, learned, False, started + runtime)
        longer, shortest = self._outlasting(workload, now - started)
        return Expected(longer, longer is not None, True, started + shortest)
