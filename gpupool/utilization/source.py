"""The one small protocol every utilisation source implements, and the facts it returns.

A source answers one question for a window of time: what did each GPU do, who held it, and
which XID errors did it report. Plain frozen data, no Django: the Prometheus source reads it
from DCGM's metrics, the simulated one draws it from per-workload profiles. Times are POSIX
seconds; a sample stands for the ``step`` seconds that end at its time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from gpupool.clusters.base import PodKey

# Prometheus refuses range queries of more than 11,000 points per series.
MAX_POINTS_PER_SERIES = 11_000


class UtilizationUnavailable(RuntimeError):
    """The source could not answer (Prometheus unreachable, or it refused the query)."""


@dataclass(frozen=True, slots=True)
class GpuDevice:
    """One physical GPU: its node (DCGM's ``Hostname``), index on the node, UUID and model."""

    node: str
    index: int
    uuid: str = ""
    model: str = ""


@dataclass(frozen=True, slots=True)
class GpuSample:
    """What a GPU did in one step: utilisation in percent (0..100) and memory used (MiB)."""

    at: float
    utilization: float
    memory_used_mib: float | None = None


@dataclass(frozen=True, slots=True)
class GpuSeries:
    """One GPU's samples over the window while one pod held it (``pod`` None: nobody)."""

    device: GpuDevice
    pod: PodKey | None
    container: str
    samples: tuple[GpuSample, ...]


@dataclass(frozen=True, slots=True)
class XidReport:
    """A GPU reported a new XID error code at ``at`` (the exporter's gauge changed to it)."""

    device: GpuDevice
    code: int
    at: float


@dataclass(frozen=True, slots=True)
class UtilizationReadout:
    """Everything a source saw in ``[start, end]``, sampled every ``step`` seconds."""

    start: float
    end: float
    step: float
    series: tuple[GpuSeries, ...] = ()
    xid_errors: tuple[XidReport, ...] = ()
    queries: int = 0  # how many queries the source sent to answer


class UtilizationSource(Protocol):
    """Where the facts about GPU use come from (Prometheus over DCGM, or the simulation)."""

    def read(self, start: float, end: float, step: float) -> UtilizationReadout:
        """The GPUs' use and XID errors in ``[start, end]`` every ``step`` seconds, in a
        bounded number of queries whatever the number of GPUs and pods."""
        ...


def check_window(start: float, end: float, step: float) -> None:
    """Refuse a window a range query cannot answer: empty, reversed, or too many points."""
    if step <= 0:
        raise ValueError(f"the step must be positive, not {step}")
    if end < start:
        raise ValueError(f"the window ends ({end}) before it starts ({start})")
    if (end - start) / step + 1 > MAX_POINTS_PER_SERIES:
        raise ValueError(
            f"{(end - start) / step + 1:.0f} points per series: more than the "
            f"{MAX_POINTS_PER_SERIES} a range query returns; take a larger step"
        )
