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
import math
from collections.abc import Mapping, Sequence
from enum import StrEnum
from typing import Protocol

from gpupool.clusters.grouping import PRIORITY_CLASS, WORKLOAD_LABEL
from gpupool.clusters.simulated import GpuHolding
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
    digest = hashlib.blake2b("/".join(map(str, parts)).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


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


def sample_at(profile: Profile, workload: str, gpu: int, at: float, seed: int) -> GpuSample:
    """What one GPU of ``workload`` does at ``at`` under ``profile``."""
    minute = math.floor(at / 60)
    noise = _unit(seed, workload, gpu, minute)
    if profile is Profile.BUSY_TRAINING:
        return GpuSample(at, round(80 + 20 * noise, 1), round(60_000 + 15_000 * noise))
    if profile is Profile.BURSTY_NOTEBOOK:
        spell = math.floor(at / BURST_SPELL_S)
        busy = _unit(seed, workload, "spell", spell) < BURST_CHANCE
        return GpuSample(at, round(20 + 70 * noise, 1) if busy else 0.0, 12_000)
    return GpuSample(at, 0.0, 0.0)


class SimulatedSource:
    """Utilisation drawn from profiles over the simulated cluster's running pods."""

    def __init__(
        self, cluster: HoldsGpus, *, seed: int = 0, chosen: Mapping[str, Profile] | None = None
    ) -> None:
        self.cluster = cluster
        self.seed = seed
        self.chosen = dict(chosen or {})  # namespace/workload -> profile, over the draw

    def read(self, start: float, end: float, step: float) -> UtilizationReadout:
        """The running pods' GPUs in ``[start, end]`` every ``step`` (from their start)."""
        check_window(start, end, step)
        times = [start + k * step for k in range(int((end - start) / step) + 1)]
        series: list[GpuSeries] = []
        for holding in self.cluster.gpus_in_use():
            workload = workload_of(holding)
            profile = self.chosen.get(workload) or profile_of(holding, self.seed)
            for gpu in holding.gpus:
                device = GpuDevice(holding.node, gpu, model=holding.gpu_model)
                samples = tuple(
                    sample_at(profile, workload, gpu, at, self.seed)
                    for at in times
                    if at >= holding.started_at
                )
                series.append(GpuSeries(device, holding.pod.key, "main", samples))
        return UtilizationReadout(start, end, step, series=tuple(series), queries=1)


def profiles(holdings: Sequence[GpuHolding], seed: int) -> dict[str, Profile]:
    """Each workload's profile (for the demo's explanations and the tests)."""
    return {workload_of(h): profile_of(h, seed) for h in holdings}
