"""The simulated source of GPU utilisation: per-workload profiles drawn over the simulated
cluster's running pods, so the demo shows waste as well as work.

Each workload follows one profile: ``busy-training`` (80-100 % on every GPU), ``bursty-
notebook`` (bursts of 20-90 % in some ten-minute spells, idle in between, memory held), or
``idle-reservation`` (nothing at all). A pod's annotation ``gpupool.io/utilization-profile``
chooses it; otherwise it is drawn from the workload's name and the seed (60 % busy, 25 %
bursty, 15 % idle; interactive classes are bursty or idle). Values are a pure function of the
seed, the workload, the GPU and the time, so reading a window twice gives the same answer.
The source sees the pods running when it is read (a pod that ended inside the window is
missed: the sampler reads often enough for that to be a minute at most).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from gpupool.clusters.base import PodKey
from gpupool.clusters.grouping import PRIORITY_CLASS, WORKLOAD_LABEL
from gpupool.clusters.simulated import GpuHolding
from gpupool.utilization.activity import ActivityReadout, PodActivity
from gpupool.utilization.source import (
    GpuDevice,
    GpuSample,
    GpuSeries,
    UtilizationReadout,
    check_window,
)

PROFILE_ANNOTATION = "gpupool.io/utilization-profile"
BURST_SPELL_S = 600.0  # a notebook works, or not, for ten minutes at a time
BURST_CHANCE = 0.3  # of a spell being busy
INTERACTIVE_WORDS = ("interactive", "notebook", "dev")


class Profile(StrEnum):
    """How a simulated workload uses its GPUs."""

    BUSY_TRAINING = "busy-training"
    BURSTY_NOTEBOOK = "bursty-notebook"
    IDLE_RESERVATION = "idle-reservation"


class HoldsGpus(Protocol):
    """What the source needs of the simulated cluster: who holds which GPUs now."""

    def gpus_in_use(self) -> list[GpuHolding]:
        """The physical GPUs each running pod holds."""
        ...


def _unit(*parts: object) -> float:
    """A number in [0, 1) drawn from ``parts`` (deterministic)."""
    return _key(*parts) / 2**64


def workload_of(holding: GpuHolding) -> str:
    """The workload a pod belongs to: its ``gpupool.io/workload`` label, else the pod."""
    pod = holding.pod
    return f"{pod.namespace}/{pod.labels.get(WORKLOAD_LABEL) or pod.name}"


def profile_of(holding: GpuHolding, seed: int) -> Profile:
    """The pod's profile: its annotation, else drawn from its workload and the seed."""
    chosen = holding.pod.annotations.get(PROFILE_ANNOTATION, "")
    if chosen in Profile.__members__.values():
        return Profile(chosen)
    draw = _unit(seed, "profile", workload_of(holding))
    klass = holding.pod.annotations.get(PRIORITY_CLASS) or holding.pod.labels.get(
        PRIORITY_CLASS, ""
    )
    if any(word in klass for word in INTERACTIVE_WORDS):
        return Profile.BURSTY_NOTEBOOK if draw < 0.6 else Profile.IDLE_RESERVATION
    if draw < 0.6:
        return Profile.BUSY_TRAINING
    return Profile.BURSTY_NOTEBOOK if draw < 0.85 else Profile.IDLE_RESERVATION


# A draw per (GPU, minute) and per (workload, spell) for thousands of GPUs at once: a
# counter-based generator (SplitMix64's finaliser over a per-series key plus the counter times
# the golden ratio), vectorised with numpy -- a digest per sample cost the demo's loop most of
# its CPU at B1's size (a million samples per ten-minute read; docs/benchmarks.md B1-loop).
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX_1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX_2 = np.uint64(0x94D049BB133111EB)
_CELLS_PER_CHUNK = 1 << 20  # GPU-series x samples drawn at once (bounds the memory a read takes)


def _key(*parts: object) -> int:
    """A 64-bit key of ``parts`` (deterministic)."""
    digest = hashlib.blake2b("/".join(map(str, parts)).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def _units_at(keys: npt.NDArray[np.uint64], counters: npt.NDArray[np.int64]) -> npt.NDArray[Any]:
    """Numbers in [0, 1), one per key and counter (rows: keys, columns: counters)."""
    with np.errstate(over="ignore"):
        z = keys[:, None] + counters.astype(np.uint64)[None, :] * _GOLDEN
        z ^= z >> np.uint64(30)
        z *= _MIX_1
        z ^= z >> np.uint64(27)
        z *= _MIX_2
        z ^= z >> np.uint64(31)
    return (z >> np.uint64(11)).astype(np.float64) * 2.0**-53


@dataclass(frozen=True, slots=True)
class _Drawn:
    """The samples of some GPU series at common times: ``utilization`` and ``memory`` per
    series (rows) and time (columns); a series has samples from column ``first`` on."""

    times: npt.NDArray[np.float64]
    utilization: npt.NDArray[np.float64]
    memory: npt.NDArray[np.float64]
    first: npt.NDArray[np.int64]


@dataclass(frozen=True, slots=True)
class SeriesKeys:
    """What a GPU series' draws depend on: its profile, the keys of its GPU's noise
    (``_key(seed, workload, gpu)``) and of its workload's spells (``_key(seed, workload,
    "spell")``), and when its pod started."""

    profile: Profile
    gpu_key: int
    spell_key: int
    started_at: float


def series_keys(
    profile: Profile, workload: str, gpu: int, started_at: float, seed: int
) -> SeriesKeys:
    """A GPU series' keys, drawn from the seed, its workload and its GPU."""
    return SeriesKeys(profile, _key(seed, workload, gpu), _key(seed, workload, "spell"), started_at)


def draw(series: Sequence[SeriesKeys], times: npt.NDArray[np.float64]) -> _Drawn:
    """What each GPU series does at ``times``: a busy trainer 80-100 % (memory 60-75 GB), a
    notebook 20-90 % in its busy ten-minute spells and idle in the others (12 GB held), an
    idle reservation nothing. A GPU's noise is drawn once a minute, a notebook's spell once per
    ``BURST_SPELL_S``: a pure function of the keys (the seed, the workload, the GPU) and the
    time."""
    minutes, per_minute = np.unique(np.floor(times / 60).astype(np.int64), return_inverse=True)
    spells, per_spell = np.unique(
        np.floor(times / BURST_SPELL_S).astype(np.int64), return_inverse=True
    )
    gpu_keys = np.array([s.gpu_key for s in series], dtype=np.uint64)
    spell_keys = np.array([s.spell_key for s in series], dtype=np.uint64)
    noise = _units_at(gpu_keys, minutes)[:, per_minute]
    busy_spell = (_units_at(spell_keys, spells) < BURST_CHANCE)[:, per_spell]
    profile = np.array([_PROFILE_CODE[s.profile] for s in series], dtype=np.int8)[:, None]
    training, notebook = profile == 0, profile == 1
    utilization = np.where(
        training,
        np.round(80 + 20 * noise, 1),
        np.where(notebook & busy_spell, np.round(20 + 70 * noise, 1), 0.0),
    )
    memory = np.where(
        training, np.round(60_000 + 15_000 * noise), np.where(notebook, 12_000.0, 0.0)
    )
    started = np.array([s.started_at for s in series], dtype=np.float64)
    first = np.searchsorted(times, started, side="left").astype(np.int64)
    return _Drawn(times, utilization, memory, first)


_PROFILE_CODE = {Profile.BUSY_TRAINING: 0, Profile.BURSTY_NOTEBOOK: 1, Profile.IDLE_RESERVATION: 2}


def sample_at(profile: Profile, workload: str, gpu: int, at: float, seed: int) -> GpuSample:
    """What one GPU of ``workload`` does at ``at`` under ``profile``."""
    drawn = draw([series_keys(profile, workload, gpu, at, seed)], np.array([at]))
    return GpuSample(at, float(drawn.utilization[0, 0]), float(drawn.memory[0, 0]))


class SimulatedSource:
    """Utilisation drawn from profiles over the simulated cluster's running pods."""

    def __init__(
        self, cluster: HoldsGpus, *, seed: int = 0, chosen: Mapping[str, Profile] | None = None
    ) -> None:
        self.cluster = cluster
        self.seed = seed
        self.chosen = dict(chosen or {})  # namespace/workload -> profile, over the draw
        # Each running pod's series keys as last read (digests: drawn once per pod's run).
        self._keys: dict[tuple[object, ...], tuple[SeriesKeys, ...]] = {}

    def _series_of(self, holding: GpuHolding) -> tuple[SeriesKeys, ...]:
        workload = workload_of(holding)
        profile = self.chosen.get(workload) or profile_of(holding, self.seed)
        return tuple(
            series_keys(profile, workload, gpu, holding.started_at, self.seed)
            for gpu in holding.gpus
        )

    def _cache_key(self, holding: GpuHolding) -> tuple[object, ...]:
        pod = holding.pod
        workload = pod.labels.get(WORKLOAD_LABEL) or pod.name
        chosen = self.chosen.get(f"{pod.namespace}/{workload}") if self.chosen else None
        return (pod.namespace, pod.name, holding.gpus, holding.started_at, chosen)

    def _drawn(
        self, start: float, end: float, step: float
    ) -> Iterator[tuple[list[GpuHolding], _Drawn]]:
        """The running pods' GPUs drawn at every ``step`` of ``[start, end]``, a chunk of
        holdings at a time (their series in order: each holding's GPUs in turn)."""
        check_window(start, end, step)
        times = start + step * np.arange(int((end - start) / step) + 1, dtype=np.float64)
        per_chunk = max(_CELLS_PER_CHUNK // (len(times) * 8), 1)
        holdings = self.cluster.gpus_in_use()
        known, self._keys = self._keys, {}
        for offset in range(0, len(holdings), per_chunk):
            chunk = holdings[offset : offset + per_chunk]
            series: list[SeriesKeys] = []
            for holding in chunk:
                cache_key = self._cache_key(holding)
                keys = known.get(cache_key)
                if keys is None:
                    keys = self._series_of(holding)
                self._keys[cache_key] = keys
                series.extend(keys)
            yield chunk, draw(series, times)

    def read(self, start: float, end: float, step: float) -> UtilizationReadout:
        """The running pods' GPUs in ``[start, end]`` every ``step`` (from their start)."""
        series: list[GpuSeries] = []
        for chunk, drawn in self._drawn(start, end, step):
            times = drawn.times.tolist()
            row = 0
            for holding in chunk:
                for gpu in holding.gpus:
                    first = int(drawn.first[row])
                    samples = tuple(
                        map(
                            GpuSample,
                            times[first:],
                            drawn.utilization[row, first:].tolist(),
                            drawn.memory[row, first:].tolist(),
                        )
                    )
                    device = GpuDevice(holding.node, gpu, model=holding.gpu_model)
                    series.append(GpuSeries(device, holding.pod.key, "main", samples))
                    row += 1
        return UtilizationReadout(start, end, step, series=tuple(series), queries=1)

    def read_activity(
        self, start: float, end: float, step: float, *, threshold: float
    ) -> ActivityReadout:
        """Each running pod's activity in ``[start, end]`` (``activity.pod_activity`` of
        ``read``'s samples, summed per pod with numpy instead of sample by sample)."""
        found: dict[PodKey, PodActivity] = {}
        for chunk, drawn in self._drawn(start, end, step):
            times = drawn.times
            seen = np.arange(len(times))[None, :] >= drawn.first[:, None]
            active = seen & (drawn.utilization >= threshold)
            # Per pod: its GPUs' rows summed (each holding's rows follow one another).
            offsets = np.cumsum([0] + [len(h.gpus) for h in chunk[:-1]])
            observed = np.add.reduceat(seen.sum(axis=1), offsets) * step
            active_s = np.add.reduceat(active.sum(axis=1), offsets) * step
            weighted = np.add.reduceat(np.where(seen, drawn.utilization, 0.0).sum(axis=1), offsets)
            last_active = np.maximum.reduceat(np.where(active, times, -1.0).max(axis=1), offsets)
            last_seen = float(times[-1])
            for holding, seen_s, active_gpu_s, total, last in zip(
                chunk,
                observed.tolist(),
                active_s.tolist(),
                (weighted * step).tolist(),
                last_active.tolist(),
                strict=True,
            ):
                pod = holding.pod.key
                found[pod] = PodActivity(
                    pod=pod,
                    gpus=len(holding.gpus),
                    observed_gpu_seconds=seen_s,
                    active_gpu_seconds=active_gpu_s,
                    mean_utilization=total / seen_s if seen_s else 0.0,
                    last_active_at=None if last < 0 else last,
                    last_seen_at=last_seen if seen_s else None,
                )
        return ActivityReadout(dict(sorted(found.items())), queries=1)


def profiles(holdings: Sequence[GpuHolding], seed: int) -> dict[str, Profile]:
    """Each workload's profile (for the demo's explanations and the tests)."""
    return {workload_of(h): profile_of(h, seed) for h in holdings}
