"""The sampler: once a minute the control loop reads the utilisation source for the time
since its last read, records each workload's activity window, and marks the GPUs a fatal XID
failed. Which source: ``GPUPOOL_UTILIZATION_SOURCE``, a table of factories
(``GPUPOOL_UTILIZATION_SOURCES``): Prometheus, the simulated cluster's own, or none.
"""

from __future__ import annotations

import logging
import math
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime

from django.conf import settings
from django.db import transaction
from django.db.models import Max
from django.utils.module_loading import import_string

from gpupool.clusters.base import ClusterBackend, PodFacts, PodKey
from gpupool.clusters.grouping import GPU_MILLI, AnnotationError, WorkloadKey, parse_whole
from gpupool.scheduler.types import MILLI
from gpupool.utilization.actions import WindowValues, do_record_activity
from gpupool.utilization.activity import (
    PodActivity,
    idle_spell_start,
    read_activity,
    share_of_gpu,
)
from gpupool.utilization.health import FailingGpu, mark_failing_gpus
from gpupool.utilization.models import ActivityWindow
from gpupool.utilization.prometheus import PrometheusSource
from gpupool.utilization.simulated import HoldsGpus, SimulatedSource
from gpupool.utilization.source import UtilizationSource, UtilizationUnavailable
from gpupool.workloads.models import PodSet, Workload

logger = logging.getLogger(__name__)

MAX_CATCH_UP_S = 3600.0  # after a long pause the sampler reads the last hour, not all of it

# What the loop knows of each workload's pods, as the cluster says it (``ClusterMirror.pods``).
PodFactsByWorkload = Mapping[WorkloadKey, Mapping[PodKey, PodFacts]]


def prometheus_source(backend: ClusterBackend) -> UtilizationSource | None:
    """The Prometheus at ``GPUPOOL_PROMETHEUS_URL`` (DCGM's metrics), whatever the cluster."""
    return PrometheusSource(settings.GPUPOOL_PROMETHEUS_URL)


def simulated_source(backend: ClusterBackend) -> UtilizationSource | None:
    """The simulated cluster's profiles (None for a backend that is not simulated)."""
    cluster = getattr(backend, "cluster", None)
    if cluster is None or not callable(getattr(cluster, "gpus_in_use", None)):
        return None
    holder: HoldsGpus = cluster
    return SimulatedSource(holder)


def no_source(backend: ClusterBackend) -> UtilizationSource | None:
    """No utilisation facts (a cluster without DCGM in Prometheus)."""
    return None


def source_names() -> list[str]:
    """The names ``GPUPOOL_UTILIZATION_SOURCE`` may give: the table's (sorted)."""
    return sorted(settings.GPUPOOL_UTILIZATION_SOURCES)


def unknown_source() -> str | None:
    """What is wrong with ``GPUPOOL_UTILIZATION_SOURCE`` when the table of sources
    (``GPUPOOL_UTILIZATION_SOURCES``) holds no source by its name -- a clear error naming
    the setting and the names it takes, never taken for ``none`` -- else None. The system
    check (``utilization.checks``), the sampler (``source_for``) and the Utilisation page say
    it alike."""
    name = settings.GPUPOOL_UTILIZATION_SOURCE
    if name in settings.GPUPOOL_UTILIZATION_SOURCES:
        return None
    return (
        f"GPUPOOL_UTILIZATION_SOURCE is {name!r}, which is not a utilisation source: it must "
        f"be one of {', '.join(source_names())} (docs/utilization.md)"
    )


def source_for(backend: ClusterBackend) -> UtilizationSource | None:
    """The source ``GPUPOOL_UTILIZATION_SOURCE`` names, built for ``backend``; a name the
    table does not hold is an error (``unknown_source``), not ``none``."""
    problem = unknown_source()
    if problem is not None:
        raise ValueError(problem)
    factory = import_string(
        settings.GPUPOOL_UTILIZATION_SOURCES[settings.GPUPOOL_UTILIZATION_SOURCE]
    )
    source: UtilizationSource | None = factory(backend)
    return source


def source_configured() -> bool:
    """Whether ``GPUPOOL_UTILIZATION_SOURCE`` names a source that measures (not ``none``,
    nor ``kubernetes``'s lack of one, nor a name the table does not hold -- that one an
    error besides, ``unknown_source``): without one no GPU-hour is measured, and the pages
    must not call the unmeasured hours idle."""
    path = settings.GPUPOOL_UTILIZATION_SOURCES.get(settings.GPUPOOL_UTILIZATION_SOURCE)
    return path is not None and import_string(path) is not no_source


def moment(posix: float) -> datetime:
    """POSIX seconds as an aware UTC datetime."""
    return datetime.fromtimestamp(posix, tz=UTC)


@dataclass(frozen=True, slots=True)
class IdleWrite:
    """A workload's idle spell as a read wrote it: since when (None: it works), and its row's
    ``updated_at`` before the write and the stamp written."""

    since: datetime | None
    before: datetime
    stamp: datetime


@dataclass
class SampleResult:
    """What one read recorded: its window, the workloads seen, the GPUs marked failing, the
    idle spells written (workload id -> ``IdleWrite``)."""

    start: float
    end: float
    queries: int = 0
    windows: int = 0
    failing: list[FailingGpu] = field(default_factory=list)
    idle: dict[int, IdleWrite] = field(default_factory=dict)


class UtilizationSampler:
    """Reads the source every ``interval_s`` for the time since its last read."""

    def __init__(
        self,
        source: UtilizationSource | None,
        *,
        interval_s: float | None = None,
        step_s: float | None = None,
        threshold: float | None = None,
    ) -> None:
        self.source = source
        self.interval_s = interval_s or settings.GPUPOOL_UTILIZATION_INTERVAL_S
        self.step_s = step_s or settings.GPUPOOL_UTILIZATION_STEP_S
        self.threshold = (
            settings.GPUPOOL_IDLE_UTILIZATION_PERCENT if threshold is None else threshold
        )
        self.sampled_until: float | None = None

    def _since(self, now: float, *, fresh: bool = False) -> float:
        """Where the next read starts: the end of the last one. ``fresh`` asks the database
        too (an index lookup), for the reads of other processes: with Celery each worker
        process has its own loop and sampler, and the read lock only keeps their reads from
        overlapping in time, not in the window they read."""
        if self.sampled_until is None or fresh:
            last = ActivityWindow.objects.aggregate(last=Max("ended_at"))["last"]
            if last is not None:
                self.sampled_until = max(self.sampled_until or last.timestamp(), last.timestamp())
            elif self.sampled_until is None:
                self.sampled_until = now - self.interval_s
        return max(self.sampled_until, now - MAX_CATCH_UP_S)

    def due(self, now: float) -> bool:
        """Whether a read is due (never without a source)."""
        return self.source is not None and now - self._since(now) >= self.interval_s

    def sample(
        self,
        now: float,
        pods: Mapping[PodKey, WorkloadKey],
        facts: PodFactsByWorkload | None = None,
    ) -> SampleResult | None:
        """Read the window since the last read (whole steps), record the activity of the
        workloads whose pods (``pods``: pod -> workload) held GPUs, mark failing GPUs. None
        when there is no source or the source is unavailable (the next read tries again).
        ``facts``: those pods as the cluster says them, whence each pod's share of its GPU
        (``record_activity``; the loop gives its mirror, ``ClusterMirror.pods``)."""
        if self.source is None:
            return None
        start = self._since(now, fresh=True)
        steps = math.floor((now - start) / self.step_s)
        if steps < 1:
            return None
        end = start + steps * self.step_s
        try:
            # Each sample stands for the step that ends at it: (start, end].
            readout = read_activity(
                self.source, start + self.step_s, end, self.step_s, threshold=self.threshold
            )
        except UtilizationUnavailable as error:
            logger.warning("utilisation not sampled: %s", error)
            return None
        result = SampleResult(start, end, readout.queries)
        with transaction.atomic():
            result.windows = record_activity(
                readout.activity,
                pods,
                start=start,
                end=end,
                idle=result.idle,
                facts=facts,
            )
            result.failing = mark_failing_gpus(readout.xid_errors)
        self.sampled_until = end
        return result


def cluster_share(pod: PodFacts) -> float | None:
    """What one GPU-second of its GPU counts for ``pod``, as the cluster says it: its
    ``gpupool.io/gpu-milli`` on a pod that asks one whole ``nvidia.com/gpu`` (DESIGN §4),
    whatever its name, by ``activity.share_of_gpu``; 1 for a pod without one. None where
    the pod does not say a share the grouping would take (a malformed milli, or one on a pod
    asking other than one GPU): then its name decides (``pod_share``)."""
    text = pod.annotations.get(GPU_MILLI)
    if text is None:
        return share_of_gpu(None)
    if pod.requests.gpus != 1 or any(pod.requests.mig.values()):
        return None
    try:
        return share_of_gpu(parse_whole(GPU_MILLI, text, 1, MILLI))
    except AnnotationError:
        return None


def pod_shares(workload_ids: set[int]) -> dict[int, list[tuple[str, int | None]]]:
    """Per workload, its GPU pod sets' names and milli-GPU shares (None: whole GPUs), the
    longest name first (a pod's name begins ``<workload>-<pod set>-``): the fallback of a
    pod the caller gives no cluster facts of (``record_activity``)."""
    shares: dict[int, list[tuple[str, int | None]]] = defaultdict(list)
    for workload_id, name, milli in PodSet.objects.filter(
        workload_id__in=workload_ids, gpus__gt=0
    ).values_list("workload_id", "name", "gpu_milli"):
        shares[workload_id].append((name, milli))
    for sets in shares.values():
        sets.sort(key=lambda item: -len(item[0]))
    return shares


def pod_share(pod: PodKey, workload: str, sets: list[tuple[str, int | None]]) -> float:
    """What one GPU-second the source saw of ``pod`` counts for it when the caller gives no
    cluster facts of it (``cluster_share`` is the rule): its pod set's share of the GPU
    (``activity.share_of_gpu``), found by the pod's name as gpupool names the pods it makes;
    a pod whose name names no pod set (one made with kubectl) counts at the share all the
    workload's GPU pod sets have, or whole when they differ (or it has none)."""
    for name, milli in sets:
        if pod.name.startswith(f"{workload}-{name}-"):
            return share_of_gpu(milli)
    known = {milli for _, milli in sets}
    return share_of_gpu(known.pop()) if len(known) == 1 else 1.0


# A workload's row as the sampler reads it: id, tenant, queue, idle since, started, admitted.
_Row = tuple[int, int | None, int, datetime | None, datetime | None, datetime | None]


def record_activity(
    activity: Mapping[PodKey, PodActivity],
    pods: Mapping[PodKey, WorkloadKey],
    *,
    start: float,
    end: float,
    idle: dict[int, IdleWrite] | None = None,
    facts: PodFactsByWorkload | None = None,
) -> int:
    """One ``ActivityWindow`` per workload whose pods the readout saw, and each such
    workload's idle spell (``Workload.idle_since``, where it changed: the idle policy's fact,
    ``activity.idle_spell_start``); returns how many windows. A pod's GPU-seconds are
    recorded at its share of the GPU (a shared flavor's pod at its milli-GPU fraction), so a
    window is in the allocation's unit: the share the cluster says of the pod (``facts``,
    the loop's mirror: ``cluster_share``), whatever its name. Only a pod ``facts`` does not
    hold (a caller that gives none; the loop's reads give every pod they tie to a workload)
    is weighed by its name (``pod_share``), the one case that reads the pod sets.
    ``idle``, when given, receives the idle spells written (workload id -> ``IdleWrite``)."""
    by_workload: dict[WorkloadKey, list[PodActivity]] = defaultdict(list)
    weights: dict[PodKey, float] = {}
    for pod, pod_seen in activity.items():
        key = pods.get(pod)
        if key is None:
            continue
        by_workload[key].append(pod_seen)
        known = facts.get(key, {}).get(pod) if facts is not None else None
        share = None if known is None else cluster_share(known)
        if share is not None:
            weights[pod] = share
    if not by_workload:
        return 0
    namespaces = {key.namespace for key in by_workload}
    found = Workload.objects.filter(
        namespace__in=namespaces, name__in={key.name for key in by_workload}
    ).values_list(
        "namespace",
        "name",
        "id",
        "queue__tenant_id",
        "queue_id",
        "idle_since",
        "started_at",
        "admitted_at",
    )
    rows: dict[tuple[str, str], _Row] = {(row[0], row[1]): row[2:] for row in found}
    unknown = {key for key, seen in by_workload.items() if any(s.pod not in weights for s in seen)}
    if unknown:
        logger.debug("%d workloads' pods weighed by their names (no cluster facts)", len(unknown))
    shares = (
        pod_shares({row[0] for key, row in rows.items() if WorkloadKey(*key) in unknown})
        if unknown
        else {}
    )
    windows: list[WindowValues] = []
    spells: dict[int, datetime | None] = {}
    started_at, ended_at = moment(start), moment(end)
    for key, seen in sorted(by_workload.items()):
        row = rows.get((key.namespace, key.name))
        if row is None:
            continue
        workload_id, tenant_id, queue_id, idle_since, began_at, admitted_at = row
        # Weighed where it is recorded: a pod of a shared flavor holds its share of the GPU
        # the source sees whole, so each of its GPU-seconds counts that share (the unit of
        # the allocation), as the figures and the cost roll-up then count it.
        shared = [
            weights[s.pod]
            if s.pod in weights
            else pod_share(s.pod, key.name, shares.get(workload_id, []))
            for s in seen
        ]
        observed = sum(s.observed_gpu_seconds * w for s, w in zip(seen, shared, strict=True))
        active = sum(s.active_gpu_seconds * w for s, w in zip(seen, shared, strict=True))
        weighted = sum(
            s.mean_utilization * s.observed_gpu_seconds * w
            for s, w in zip(seen, shared, strict=True)
        )
        last = max((s.last_active_at for s in seen if s.last_active_at is not None), default=None)
        last_seen = max((s.last_seen_at for s in seen if s.last_seen_at is not None), default=end)
        windows.append(
            WindowValues(
                workload_id,
                tenant_id,
                queue_id,
                started_at,
                ended_at,
                sum(s.gpus for s in seen),
                observed,
                min(active, observed),
                weighted / observed if observed else 0.0,
                None if last is None else moment(last),
            )
        )
        began = began_at or admitted_at
        spell = idle_spell_start(
            previous=None if idle_since is None else idle_since.timestamp(),
            window_start=start,
            last_seen_at=last_seen,
            last_active_at=last,
            started_at=None if began is None else began.timestamp(),
        )
        since = None if spell is None else moment(spell)
        if since != idle_since:
            spells[workload_id] = since
    stamps: dict[int, tuple[datetime, datetime]] = {}
    count = do_record_activity(windows, idle_since=spells, stamps=stamps)
    if idle is not None:
        idle.update(
            {pk: IdleWrite(spells[pk], before, stamp) for pk, (before, stamp) in stamps.items()}
        )
    return count
