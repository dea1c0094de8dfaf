"""Seeded synthetic multi-tenant job traces for the queueing simulator.

A real trace fixes one demand. To see how a policy fares with more or fewer tenants, more or
less load, or a more lopsided tenant mix, `synthetic_jobs` draws a trace of the same form as
the Philly jobs (`PhillyJob`: tenant, arrival, gang size, run time). Everything that runs
the Philly trace then runs it too: the policies, the alone baselines, the metrics and the
report.

How a trace is drawn, from one seed:

- **Tenants.** Tenant k (k = 0, 1, ...) asks for a part of the demand in proportion to
  1 / (k + 1) ** skew (Zipf; skew 0 gives equal tenants).
- **Jobs.** A tenant's jobs are drawn from a population of real jobs, with replacement: by
  default the 4,889 Philly jobs of B3 (Jeon et al., ATC'19). Gang size and run time are drawn
  together, so their heavy tails and their correlation are the trace's own. A tenant draws
  jobs until the GPU-hours they would run inside the window, started on arrival, reach its
  part of ``load x capacity x window``. (Counting whole jobs instead would let the few
  month-long runs stand for most of the load while running mostly after the window.)
- **Arrivals.** A share ``burst_share`` of each tenant's jobs arrives in ``bursts`` bursts.
  Each burst starts at a uniform time in the window, and its jobs follow at exponential
  offsets, one hour on average. The rest arrive uniformly over the window, which is a
  Poisson process given their number. Queues form in the bursts, as they do in the real
  trace.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from gpupool.scheduler.types import SECONDS_PER_HOUR
from gpupool.simulation.queueing.philly import DAY_S, PhillyJob

BURST_SPREAD_S = 3600.0  # mean offset of a burst's jobs from its start


@dataclass(frozen=True, slots=True)
class SyntheticSpec:
    """What to draw: tenants, window, load on the pool, tenant skew, burstiness, seed."""

    tenants: int = 8
    days: float = 14.0
    load: float = 0.8  # GPU-hours asked inside the window / (capacity x window)
    skew: float = 1.0
    bursts: int = 4  # per tenant
    burst_share: float = 0.5
    seed: int = 42

    def __post_init__(self) -> None:
        checks = [
            ("tenants", self.tenants >= 1, "must be at least 1"),
            ("days", self.days > 0 and math.isfinite(self.days), "must be a positive number"),
            ("load", self.load > 0 and math.isfinite(self.load), "must be a positive number"),
            ("skew", self.skew >= 0 and math.isfinite(self.skew), "must be 0 or more"),
            ("bursts", self.bursts >= 0, "must be 0 or more"),
            ("burst_share", 0 <= self.burst_share <= 1, "must lie in 0..1"),
        ]
        for name, ok, message in checks:
            if not ok:
                raise ValueError(f"{name}: {message}, got {getattr(self, name)!r}")
        if self.bursts == 0 and self.burst_share > 0:
            raise ValueError("burst_share: must be 0 when bursts is 0")

    def to_json(self) -> dict[str, Any]:
        """The spec as JSON."""
        return asdict(self)


def tenant_name(index: int, tenants: int) -> str:
    """``t01``, ``t02``, ... padded to the number of tenants."""
    return f"t{index + 1:0{max(2, len(str(tenants)))}d}"


def synthetic_jobs(
    spec: SyntheticSpec, population: Sequence[PhillyJob], capacity_gpus: int
) -> list[PhillyJob]:
    """A trace drawn as the module says, by arrival; the same spec gives the same trace."""
    sample = [job for job in population if job.gpus > 0 and job.duration_s > 0]
    if not sample:
        raise ValueError("population: no job with GPUs and a run time to draw from")
    if capacity_gpus <= 0:
        raise ValueError(f"capacity_gpus: must be positive, got {capacity_gpus}")
    rng = random.Random(spec.seed)
    window_s = spec.days * DAY_S
    weights = [1 / (k + 1) ** spec.skew for k in range(spec.tenants)]
    total_gpu_hours = spec.load * capacity_gpus * window_s / SECONDS_PER_HOUR
    jobs: list[PhillyJob] = []
    for k, weight in enumerate(weights):
        name = tenant_name(k, spec.tenants)
        target = total_gpu_hours * weight / sum(weights)
        starts = [rng.uniform(0, window_s) for _ in range(spec.bursts)]
        asked = 0.0
        index = 0
        while asked < target:
            job = rng.choice(sample)
            if starts and rng.random() < spec.burst_share:
                arrival = rng.choice(starts) + rng.expovariate(1 / BURST_SPREAD_S)
                arrival = min(arrival, math.nextafter(window_s, 0))
            else:
                arrival = rng.uniform(0, window_s)
            jobs.append(PhillyJob(name, index, arrival, job.gpus, job.duration_s))
            asked += job.gpus * min(job.duration_s, window_s - arrival) / SECONDS_PER_HOUR
            index += 1
    jobs.sort(key=lambda job: (job.arrival_s, job.vc, job.index))
    return jobs
