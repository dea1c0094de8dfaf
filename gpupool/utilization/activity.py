"""What the samples say about each pod: GPU-seconds observed and active, and since when idle.

Pure functions over a ``UtilizationReadout``. A GPU-step is active when the GPU's utilisation
reaches the threshold (``GPUPOOL_IDLE_UTILIZATION_PERCENT``, 1 % by default); a pod is active
in a step when any of its GPUs is.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import numpy as np

from gpupool.clusters.base import PodKey
from gpupool.utilization.source import UtilizationReadout, UtilizationSource, XidReport

DEFAULT_IDLE_UTILIZATION_PERCENT = 1.0


def counted_within_allocation(held: np.ndarray, seen: np.ndarray) -> np.ndarray:
    """The one rule by which what a source saw meets the allocation, for the Utilisation
    page, the API, the command line and the cost roll-up alike: of each workload's
    GPU-seconds (or GPU-hours) ``seen`` -- observed, or active -- over a stretch of time,
    those that count are at most what it ``held`` there. A workload is never more active
    than what it held, and activity seen outside any allocation counts nothing.

    The share of a shared GPU is weighed where the sampler records the seconds, not here
    (``share_of_gpu``: a pod at 650 milli-GPU counts 0.65 of each second its GPU was seen),
    so what is seen of a pod is already in the allocation's unit when it is capped."""
    counted: np.ndarray = np.minimum(np.maximum(np.asarray(seen, dtype=np.float64), 0.0), held)
    return counted


def share_of_gpu(milli: int | None) -> float:
    """What one GPU-second of a pod's GPU counts for the pod: its placement's share of the
    GPU (``gpu_milli`` / 1000 on a shared flavor), else the whole second."""
    return 1.0 if milli is None else milli / 1000


@dataclass(frozen=True, slots=True)
class PodActivity:
    """One pod's GPU use in a window: GPU-seconds seen and active, mean use, last activity."""

    pod: PodKey
    gpus: int
    observed_gpu_seconds: float
    active_gpu_seconds: float
    mean_utilization: float  # percent, over every GPU-step seen
    last_active_at: float | None  # the end of the last step in which any of its GPUs worked
    last_seen_at: float | None = None  # the end of the last step the source has a sample of

    @property
    def idle_gpu_seconds(self) -> float:
        """GPU-seconds the pod held without using them."""
        return self.observed_gpu_seconds - self.active_gpu_seconds


def pod_activity(
    readout: UtilizationReadout, *, threshold: float = DEFAULT_IDLE_UTILIZATION_PERCENT
) -> dict[PodKey, PodActivity]:
    """Each pod's activity in the readout's window (GPUs nobody held are left out)."""
    # observed, active, utilisation sum, last active, last seen
    seen: dict[PodKey, list[float]] = {}
    devices: dict[PodKey, set[tuple[str, int]]] = {}
    for series in readout.series:
        if series.pod is None:
            continue
        totals = seen.setdefault(series.pod, [0.0, 0.0, 0.0, -1.0, -1.0])
        devices.setdefault(series.pod, set()).add((series.device.node, series.device.index))
        for sample in series.samples:
            totals[0] += readout.step
            totals[2] += sample.utilization * readout.step
            totals[4] = max(totals[4], sample.at)
            if sample.utilization >= threshold:
                totals[1] += readout.step
                totals[3] = max(totals[3], sample.at)
    return {
        pod: PodActivity(
            pod=pod,
            gpus=len(devices[pod]),
            observed_gpu_seconds=observed,
            active_gpu_seconds=active,
            mean_utilization=weighted / observed if observed else 0.0,
            last_active_at=None if last < 0 else last,
            last_seen_at=None if last_seen < 0 else last_seen,
        )
        for pod, (observed, active, weighted, last, last_seen) in sorted(seen.items())
    }


@dataclass(frozen=True, slots=True)
class ActivityReadout:
    """What a source saw in a window, summed per pod: each pod's activity, the XID errors,
    and how many queries it took."""

    activity: dict[PodKey, PodActivity] = field(default_factory=dict)
    xid_errors: tuple[XidReport, ...] = ()
    queries: int = 0


@runtime_checkable
class SummarizingSource(Protocol):
    """A source that sums its own samples per pod (the simulated one draws them in arrays;
    building a sample object each only to add them up was most of its cost)."""

    def read_activity(
        self, start: float, end: float, step: float, *, threshold: float
    ) -> ActivityReadout:
        """``pod_activity`` of ``read(start, end, step)``, with the same XID errors."""
        ...


def read_activity(
    source: UtilizationSource, start: float, end: float, step: float, *, threshold: float
) -> ActivityReadout:
    """Each pod's activity in ``[start, end]`` every ``step``: the source's own sum where it
    makes one, else ``pod_activity`` of its samples."""
    if isinstance(source, SummarizingSource):
        return source.read_activity(start, end, step, threshold=threshold)
    readout = source.read(start, end, step)
    return ActivityReadout(
        pod_activity(readout, threshold=threshold), readout.xid_errors, readout.queries
    )


def idle_since(activity: PodActivity | None, *, previous: float) -> float:
    """Since when a pod has not worked: the end of its last active step in this window, else
    what was known before (``previous``: the last window's answer, or when the pod started)."""
    if activity is not None and activity.last_active_at is not None:
        return activity.last_active_at
    return previous


def idle_spell_start(
    *,
    previous: float | None,
    window_start: float,
    last_seen_at: float,
    last_active_at: float | None,
    started_at: float | None,
) -> float | None:
    """Since when a workload has been idle after a window that saw it (None: it worked in the
    last step the source has a sample of -- a gap in the source, a failed scrape, is no
    idleness). Idle since the end of its last active step in the window; with no
    activity in the window, since what was known (``previous``, when of this run: not before
    ``started_at``), else since the later of its start and the window's start -- the source
    vouches for no earlier idleness than it saw."""
    if last_active_at is not None:
        return None if last_active_at >= last_seen_at else last_active_at
    if previous is not None and (started_at is None or previous >= started_at):
        return previous
    return window_start if started_at is None else max(started_at, window_start)
