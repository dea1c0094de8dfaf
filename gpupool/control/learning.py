"""Expected runtimes learned from history, for work that declares none.

Estimated starts, backfill behind a hold and ``next_change_at`` need to know when running work
ends; a workload that declares no ``expected_runtime_s`` gets the median runtime of *similar*
finished work of the same queue: work that succeeded with the same number of GPUs (fractions
count) on the same first flavor -- what a team runs again and again (a fine-tune, an eval, a
sweep point) tends to take as long as last time. At least ``MIN_SAMPLES`` such runs are needed,
and the last ``KEEP`` count. The snapshot carries the learned value and the workload's
explanation says it was learned (``expected_runtime_learned`` in its facts), so a reader can
tell a guess from a promise.
"""

from __future__ import annotations

import statistics
from collections import defaultdict, deque
from collections.abc import Iterable

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


class RuntimeHistory:
    """Recent runtimes of finished work by similarity, and their medians."""

    def __init__(self) -> None:
        self.samples: dict[Similar, deque[float]] = defaultdict(lambda: deque(maxlen=KEEP))
        self._medians: dict[Similar, float | None] = {}
        self.version = 0  # moves whenever a median may have changed (``load``, ``add``)

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
            self.samples[key].append((finished - started).total_seconds())
        self._medians.clear()
        self.version += 1

    def add(self, finished: Iterable[tuple[WorkloadInfo, float]]) -> None:
        """Runs the loop saw succeed: (the workload, its runtime in seconds)."""
        for workload, seconds in finished:
            if seconds > 0:
                key = similar(workload)
                self.samples[key].append(seconds)
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
