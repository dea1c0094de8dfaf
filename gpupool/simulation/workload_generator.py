"""The demo's workload generator: tenants submitting work the way the public traces do.

Pure and seeded (no Django): ``WorkloadGenerator.until(t)`` returns every submission due up to
simulated time ``t``, and the same seed, teams and start give the same submissions.

What comes from the traces (``workload_mix.json``, made by ``make_workload_mix``): how many
GPUs a job asks (Philly's gang sizes), how long it runs (Philly's run-time distribution for
its size, scaled to Philly's recorded median), how the jobs of one tenant arrive (the gaps of
one Philly virtual cluster, bursts included), and which one-GPU jobs share a GPU and how much
of it they ask (openb). Each demo team follows one of the six largest Philly VCs (teams by
name, VCs by size).

What is the demo's own choice (``DemoChoices``), to fit the demo pool of ``seed-demo``:

- which flavor a job runs on: a shared one-GPU job on the time-sliced flavor; half of the
  other one-GPU jobs on a MIG instance, the rest on whole GPUs; two to eight GPUs on one
  whole-GPU node; larger gangs either as 4-GPU pods in one NVLink rack (``topology: domain``)
  or as 8-GPU pods on whole nodes (``preferred``);
- the priority class (some interactive notebooks on shared GPUs, a few budgeted ``high``
  jobs), the requests of CPU and memory per GPU, run times capped at two days;
- the declared expected run time: most jobs declare the run time times 1 to 2 (people
  over-estimate), the others none (the loop learns it from history);
- the load: arrival rates are scaled so that the GPU-hours offered per hour are ``load``
  times the pool's GPUs (``rate_scale``), so queues form and preemptions happen.
"""

from __future__ import annotations

import bisect
import itertools
import json
import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MIX_FILE = Path(__file__).with_name("workload_mix.json")
MAX_RUNTIME_S = 2 * 86400.0


@dataclass(frozen=True, slots=True)
class WorkloadMix:
    """The trace-derived distributions (see ``make_workload_mix``)."""

    gang_sizes: tuple[tuple[int, float], ...]  # (GPUs, probability)
    runtime_s: tuple[tuple[int, int, tuple[float, ...]], ...]  # (min, max GPUs, quantiles)
    streams: tuple[tuple[str, tuple[float, ...]], ...]  # (Philly VC, gap quantiles)
    shared_fraction: float  # of one-GPU jobs
    gpu_milli: tuple[tuple[int, float], ...]  # (milli-GPU, probability)

    @classmethod
    def load(cls, path: Path = MIX_FILE) -> WorkloadMix:
        """Read the committed mix."""
        data: dict[str, Any] = json.loads(path.read_text())
        return cls(
            gang_sizes=tuple(sorted((int(k), float(v)) for k, v in data["gang_sizes"].items())),
            runtime_s=tuple(
                (int(r["min_gpus"]), int(r["max_gpus"]), tuple(map(float, r["quantiles"])))
                for r in data["runtime_s"]
            ),
            streams=tuple(
                (str(s["philly_vc"]), tuple(map(float, s["interarrival_s"])))
                for s in data["tenant_streams"]
            ),
            shared_fraction=float(data["shared"]["fraction_of_one_gpu_tasks"]),
            gpu_milli=tuple(
                sorted((int(k), float(v)) for k, v in data["shared"]["gpu_milli"].items())
            ),
        )


@dataclass(frozen=True, slots=True)
class DemoChoices:
    """The demo's own choices (not from the traces): flavors, classes, requests, estimates."""

    whole_gpu_flavor: str = "h100"
    rack_flavor: str = "gb200"
    rack_gpus_per_pod: int = 4
    rack_gpus: int = 72  # a gang larger than one rack goes on whole-GPU nodes
    shared_flavor: str = "l40s-shared"
    mig_flavor: str = "a100-3g.40gb"
    mig_share_of_one_gpu: float = 0.5  # of the one-GPU jobs that do not share a GPU
    rack_share_of_large: float = 0.5  # of gangs above 8 GPUs
    interactive_class: str = "interactive"
    interactive_share_of_shared: float = 0.6
    high_class: str = "high"
    high_share: float = 0.08
    default_class: str = ""  # "": the default class
    cpu_per_gpu: Mapping[str, int] = field(
        default_factory=lambda: {"h100": 12, "gb200": 12, "l40s-shared": 4, "a100-3g.40gb": 8}
    )
    memory_gb_per_gpu: Mapping[str, int] = field(
        default_factory=lambda: {"h100": 96, "gb200": 96, "l40s-shared": 16, "a100-3g.40gb": 48}
    )
    declared_share: float = 0.7  # jobs that declare an expected run time


@dataclass(frozen=True, slots=True)
class DemoSubmission:
    """One workload a demo team submits: when, its pods, its class, how long it really runs."""

    at: float
    team: str
    serial: int  # the team's n-th submission, from 1
    pods: int
    gpus_per_pod: int
    flavor: str
    gpu_milli: int | None
    topology: str  # "", "domain" or "preferred"
    priority_class: str  # "" for the default class
    runtime_s: float
    expected_runtime_s: int | None

    @property
    def name(self) -> str:
        """The workload's name in its team's namespace, e.g. ``train-00042``."""
        kind = "notebook" if self.gpu_milli is not None else "train"
        return f"{kind}-{self.serial:05d}"

    @property
    def gpus(self) -> float:
        """GPUs the workload holds while it runs (a shared GPU counts its fraction)."""
        share = (self.gpu_milli or 1000) / 1000
        return self.pods * self.gpus_per_pod * share


def _weighted(rng: random.Random, table: Sequence[tuple[int, float]]) -> int:
    total = sum(weight for _, weight in table)
    point = rng.random() * total
    for value, weight in table:
        point -= weight
        if point < 0:
            return value
    return table[-1][0]


def _from_quantiles(u: float, table: Sequence[float], *, log: bool) -> float:
    """A value at cumulative probability ``u`` of evenly spaced quantiles (interpolated)."""
    position = u * (len(table) - 1)
    low = min(int(position), len(table) - 2)
    fraction = position - low
    a, b = table[low], table[low + 1]
    if log and a > 0 and b > 0:
        return math.exp(math.log(a) + (math.log(b) - math.log(a)) * fraction)
    return a + (b - a) * fraction


def sample_job(
    rng: random.Random, mix: WorkloadMix, choices: DemoChoices
) -> tuple[int, int, str, int | None, str, str, float, int | None]:
    """One job's pods, GPUs per pod, flavor, milli, topology, class, run time and estimate."""
    gpus = _weighted(rng, mix.gang_sizes)
    table = next(q for low, high, q in mix.runtime_s if low <= gpus <= high)
    runtime = min(_from_quantiles(rng.random(), table, log=True), MAX_RUNTIME_S)
    priority = choices.default_class
    milli: int | None = None
    topology = ""
    pods, per_pod = 1, gpus
    if gpus == 1:
        roll = rng.random()
        if roll < mix.shared_fraction:
            flavor, milli = choices.shared_flavor, _weighted(rng, mix.gpu_milli)
            if rng.random() < choices.interactive_share_of_shared:
                priority = choices.interactive_class
        elif roll < mix.shared_fraction + (1 - mix.shared_fraction) * choices.mig_share_of_one_gpu:
            flavor = choices.mig_flavor
        else:
            flavor = choices.whole_gpu_flavor
    elif gpus <= 8:
        flavor = choices.whole_gpu_flavor
    elif gpus <= choices.rack_gpus and rng.random() < choices.rack_share_of_large:
        flavor, topology = choices.rack_flavor, "domain"
        per_pod = choices.rack_gpus_per_pod
        pods = math.ceil(gpus / per_pod)
    else:
        flavor, topology, per_pod = choices.whole_gpu_flavor, "preferred", 8
        pods = math.ceil(gpus / per_pod)
    if priority == choices.default_class and rng.random() < choices.high_share:
        priority = choices.high_class
    estimate = None
    if rng.random() < choices.declared_share:
        estimate = math.ceil(runtime * rng.uniform(1.0, 2.0) / 60) * 60
    return pods, per_pod, flavor, milli, topology, priority, runtime, estimate


def offered_gpu_seconds_per_job(
    mix: WorkloadMix, choices: DemoChoices, samples: int = 20_000
) -> float:
    """The mean GPU-seconds one job asks (GPUs x run time; shared GPUs by their fraction)."""
    rng = random.Random(0)  # a fixed sample: the same mix always gives the same mean
    total = 0.0
    for _ in range(samples):
        pods, per_pod, _, milli, _, _, runtime, _ = sample_job(rng, mix, choices)
        total += pods * per_pod * (milli or 1000) / 1000 * runtime
    return total / samples


def _mean_gap(table: Sequence[float]) -> float:
    """The mean of a gap distribution given by evenly spaced quantiles (trapezoids)."""
    steps = len(table) - 1
    return sum((a + b) / 2 for a, b in itertools.pairwise(table)) / steps


def rate_scale(
    mix: WorkloadMix,
    teams: Sequence[str],
    pool_gpus: float,
    load: float,
    choices: DemoChoices | None = None,
) -> float:
    """How much faster than their Philly VCs the teams submit, for the offered GPU-hours per
    hour to be ``load`` times ``pool_gpus``."""
    choices = choices or DemoChoices()
    jobs_per_second = sum(1 / _mean_gap(gaps) for _, gaps in _streams_of(mix, teams).values())
    offered = jobs_per_second * offered_gpu_seconds_per_job(mix, choices)
    return load * pool_gpus / offered


def _streams_of(mix: WorkloadMix, teams: Sequence[str]) -> dict[str, tuple[str, tuple[float, ...]]]:
    """Each team's Philly stream: teams in name order take the VCs in size order."""
    return {team: mix.streams[i % len(mix.streams)] for i, team in enumerate(sorted(teams))}


class WorkloadGenerator:
    """Submissions of every team in time order, up to any simulated time (see the module)."""

    def __init__(
        self,
        mix: WorkloadMix,
        teams: Sequence[str],
        *,
        seed: int,
        start: float,
        scale: float,
        choices: DemoChoices | None = None,
    ) -> None:
        if scale <= 0:
            raise ValueError("the rate scale must be positive")
        self.mix = mix
        self.choices = choices or DemoChoices()
        self.scale = scale
        self._streams = _streams_of(mix, teams)
        # One random stream per team, so that a team's work does not depend on the others'.
        self._rngs = {team: random.Random(f"{seed}/{team}") for team in self._streams}
        self._serials = dict.fromkeys(self._streams, 0)
        self._next: list[tuple[float, str]] = sorted(
            (start + self._gap(team), team) for team in self._streams
        )

    def _gap(self, team: str) -> float:
        _, gaps = self._streams[team]
        return _from_quantiles(self._rngs[team].random(), gaps, log=False) / self.scale

    def next_at(self) -> float:
        """When the next submission is due."""
        return self._next[0][0]

    def until(self, t: float) -> list[DemoSubmission]:
        """Every submission due at or before ``t``, in time order (then by team)."""
        due: list[DemoSubmission] = []
        while self._next and self._next[0][0] <= t:
            at, team = self._next.pop(0)
            rng = self._rngs[team]
            pods, per_pod, flavor, milli, topology, priority, runtime, estimate = sample_job(
                rng, self.mix, self.choices
            )
            self._serials[team] += 1
            due.append(
                DemoSubmission(
                    at=at,
                    team=team,
                    serial=self._serials[team],
                    pods=pods,
                    gpus_per_pod=per_pod,
                    flavor=flavor,
                    gpu_milli=milli,
                    topology=topology,
                    priority_class=priority,
                    runtime_s=round(runtime),
                    expected_runtime_s=estimate,
                )
            )
            bisect.insort(self._next, (at + self._gap(team), team))
        return due
