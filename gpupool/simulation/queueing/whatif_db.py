"""Build what-if inputs from the database: recorded workloads as demand, on the pool as it is.

The pool (flavors, nodes, queues, priority classes) is the pages' view of it, read fresh
(``gpupool.control.queries.read_pool_snapshot``: the control loop's one database reader, less
what other schedulers' pods hold on the nodes as the loop last recorded it,
``with_recorded_usage``), so the what-if replays on exactly what the scheduler and the pages
see: GPUs another scheduler holds are taken for the whole replay, not free. A workload
submitted in the window becomes a simulator job with its pod sets (read by the same reader),
submit time, priority class and protected runtime; it runs for its actual run time (finished
minus started) when it has one, else its declared expected run time, else (still running) the
time it has run so far. Workloads with none of these, cancelled ones, and pod sets asking no
GPU (no quota is involved) are left out and counted. Jobs are named ``namespace/name``, as the
core names workloads. Pending work the control loop set aside as never fitting is read like any
other: whether it fits is each replay's question, on its own queues (``whatif.set_aside``), so
a proposal that raises its capability runs it.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.db.models import Q

from gpupool.control.queries import read_pool_snapshot
from gpupool.control.snapshot import pod_set_infos
from gpupool.scheduler.types import FlavorInfo, NodeInfo, PriorityClassInfo, QueueInfo
from gpupool.simulation.queueing.events import SimJob
from gpupool.workloads.choices import WorkloadState
from gpupool.workloads.models import Workload


@dataclass(slots=True)
class RecordedDemand:
    """Demand over a window of the database, and the pool and queues it ran on."""

    start: datetime
    end: datetime
    jobs: list[SimJob]
    flavors: tuple[FlavorInfo, ...]
    nodes: tuple[NodeInfo, ...]
    queues: tuple[QueueInfo, ...]
    priority_classes: tuple[PriorityClassInfo, ...]
    skipped: Counter[str] = field(default_factory=Counter)

    @property
    def window_s(self) -> float:
        """The window's length in seconds."""
        return (self.end - self.start).total_seconds()

    @property
    def foreign_gpus(self) -> int:
        """GPUs other schedulers' pods hold on the nodes, which the replays count as taken."""
        return sum(len(node.foreign_gpus) for node in self.nodes)


def recorded_demand(days: float, now: datetime) -> RecordedDemand:
    """The workloads submitted in the ``days`` before ``now`` as jobs, and the pool today as
    the pages see it (other schedulers' GPUs taken; ``SnapshotError`` when it cannot be read
    as the core sees it)."""
    start = now - timedelta(days=days)
    pool = read_pool_snapshot().snapshot
    default_class = next(c.name for c in pool.priority_classes if c.default)
    window = Q(submitted_at__gte=start, submitted_at__lt=now)
    pod_sets_of = pod_set_infos(window & ~Q(state=WorkloadState.CANCELLED))
    skipped: Counter[str] = Counter()
    jobs: list[SimJob] = []
    workloads = (
        Workload.objects.filter(window)
        .select_related("queue", "priority_class")
        .order_by("submitted_at", "namespace", "name")
    )
    for workload in workloads:
        if workload.state == WorkloadState.CANCELLED:
            skipped["cancelled"] += 1
            continue
        pod_sets = tuple(
            info for _, info in pod_sets_of.get(workload.pk, ()) if info.gpus and info.flavors
        )
        if not pod_sets:
            skipped["no GPU"] += 1
            continue
        duration = _run_time(workload, now)
        if duration is None:
            skipped["no run time"] += 1
            continue
        jobs.append(
            SimJob(
                name=workload.qualified_name(),
                queue=workload.queue.name,
                pod_sets=pod_sets,
                submitted_at=(workload.submitted_at - start).total_seconds(),
                duration_s=duration,
                priority_class=(
                    workload.priority_class.name if workload.priority_class else default_class
                ),
                topology=workload.topology or None,  # type: ignore[arg-type]
                protected_runtime_s=float(workload.protected_runtime_s),
            )
        )
    return RecordedDemand(
        start=start,
        end=now,
        jobs=jobs,
        flavors=pool.flavors,
        nodes=pool.nodes,
        queues=pool.queues,
        priority_classes=pool.priority_classes,
        skipped=skipped,
    )


def _run_time(workload: Workload, now: datetime) -> float | None:
    """Actual run time if it finished, else expected, else what it has run so far."""
    if workload.started_at is not None and workload.finished_at is not None:
        return (workload.finished_at - workload.started_at).total_seconds()
    if workload.expected_runtime_s:
        return float(workload.expected_runtime_s)
    if workload.started_at is not None and workload.state == WorkloadState.RUNNING:
        return max(0.0, (now - workload.started_at).total_seconds())
    return None
