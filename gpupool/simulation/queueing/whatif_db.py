"""Build what-if inputs from the database: recorded workloads as demand, the pool, the queues.

A workload submitted in the window becomes a simulator job with its pod sets, submit time,
priority class and protected runtime; it runs for its actual run time (finished minus
started) when it has one, else its declared expected run time, else (still running) the
time it has run so far. Workloads with none of these, cancelled ones, and pod sets asking no
GPU (no quota is involved) are left out and counted.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from gpupool.inventory.choices import Sharing
from gpupool.inventory.models import Flavor, Node
from gpupool.quotas.models import PriorityClass, Queue
from gpupool.scheduler.types import (
    MIB_PER_GB,
    MILLI,
    FlavorInfo,
    NodeInfo,
    PodSetInfo,
    PriorityClassInfo,
    QueueInfo,
    QuotaInfo,
)
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


def load_flavors() -> tuple[FlavorInfo, ...]:
    """Every flavor as the core sees it."""
    return tuple(
        FlavorInfo(
            name=f.name,
            sharing="shared" if f.sharing == Sharing.SHARED else "exclusive",
            gpu_memory_gb=float(f.gpu_memory_gb),
            hourly_price=float(f.hourly_price),
        )
        for f in Flavor.objects.order_by("name")
    )


def load_nodes() -> tuple[NodeInfo, ...]:
    """Every node with its GPUs (MIG instances count as devices) and their health."""
    nodes: list[NodeInfo] = []
    for node in Node.objects.select_related("flavor").prefetch_related("gpus").order_by("name"):
        per_gpu = max(node.devices_per_gpu(), 1)
        gpus = sorted(node.gpus.all(), key=lambda g: g.index)
        unhealthy = frozenset(
            g.index * per_gpu + k for g in gpus if not g.healthy for k in range(per_gpu)
        )
        nodes.append(
            NodeInfo(
                name=node.name,
                flavor=node.flavor.name,
                gpus=len(gpus) * per_gpu,
                cpu_milli=node.cpu * MILLI,
                memory_mib=node.memory_gb * MIB_PER_GB,
                domain=node.nvlink_domain or node.name,
                unhealthy_gpus=unhealthy,
                cordoned=node.cordoned,
                physical_gpus=len(gpus) if per_gpu > 1 else None,
            )
        )
    return tuple(nodes)


def load_queues() -> tuple[QueueInfo, ...]:
    """The queue tree with its quotas, in milli-GPU."""
    queues: list[QueueInfo] = []
    for queue in Queue.objects.select_related("parent", "tenant").prefetch_related(
        "quotas__flavor"
    ):
        quota = {
            q.flavor.name: QuotaInfo(
                round(q.guarantee * MILLI), round(q.deserved * MILLI), round(q.capability * MILLI)
            )
            for q in queue.quotas.all()
        }
        queues.append(
            QueueInfo(
                name=queue.name,
                parent=queue.parent.name if queue.parent is not None else None,
                tenant=queue.tenant.name if queue.tenant is not None else None,
                weight=float(queue.weight),
                reclaimable=queue.reclaimable,
                lending_limit=(
                    None if queue.lending_limit is None else round(queue.lending_limit * MILLI)
                ),
                max_protected_runtime_s=(
                    None
                    if queue.max_protected_runtime_s is None
                    else float(queue.max_protected_runtime_s)
                ),
                quota=quota,
            )
        )
    return tuple(queues)


def load_priority_classes() -> tuple[PriorityClassInfo, ...]:
    """The priority classes (a free default ``normal`` class when none is defined)."""
    classes = tuple(
        PriorityClassInfo(
            name=c.name,
            value=c.value,
            default=c.default,
            preemption_policy="Never" if c.preemption_policy == "Never" else "PreemptLowerPriority",
            budget_rate=float(c.budget_rate),
        )
        for c in PriorityClass.objects.order_by("name")
    )
    if not any(c.default for c in classes):
        classes += (PriorityClassInfo("normal", 0, default=True),)
    return classes


def recorded_demand(days: float, now: datetime) -> RecordedDemand:
    """The workloads submitted in the ``days`` before ``now`` as jobs, and the pool today."""
    start = now - timedelta(days=days)
    classes = load_priority_classes()
    default_class = next(c.name for c in classes if c.default)
    skipped: Counter[str] = Counter()
    jobs: list[SimJob] = []
    workloads = (
        Workload.objects.filter(submitted_at__gte=start, submitted_at__lt=now)
        .select_related("queue", "priority_class")
        .prefetch_related("pod_sets__flavor", "pod_sets__flavor_choices__flavor")
        .order_by("submitted_at", "name")
    )
    for workload in workloads:
        if workload.state == WorkloadState.CANCELLED:
            skipped["cancelled"] += 1
            continue
        pod_sets = tuple(
            PodSetInfo(
                count=p.count,
                gpus=p.gpus,
                flavors=p.flavor_names(),
                cpu_milli=round(p.cpu * MILLI),
                memory_mib=round(p.memory_gb * MIB_PER_GB),
                gpu_milli=p.gpu_milli if p.gpu_milli is not None else MILLI,
            )
            for p in workload.pod_sets.all()
            if p.gpus and p.flavor is not None
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
                name=workload.name,
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
        flavors=load_flavors(),
        nodes=load_nodes(),
        queues=load_queues(),
        priority_classes=classes,
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
