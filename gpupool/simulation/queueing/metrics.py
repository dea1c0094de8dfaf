"""Queueing metrics of a replay: completion times, waits, utilisation, preemption losses.

Definitions (B3):

- job completion time (JCT) = finish - submit;
- queueing delay (wait) = the time a job spent pending: JCT minus the time it held GPUs, so
  the wait after an eviction counts too (first-start delay is reported separately);
- utilisation = GPU-seconds held (useful or later lost) / (pool GPUs x window), over the
  arrival window [0, window); ``utilisation_makespan`` uses [0, last finish) instead;
- GPU-hours lost = progress thrown away by evictions (work since the last checkpoint), and
  its fraction of the GPU-hours delivered (held) in the whole replay;
- p99 = the 99th percentile with linear interpolation (numpy's default).

The sharing-incentive check compares each tenant's mean wait with its mean wait when its
jobs run alone on a pool the size of its deserved share.

Fairness: each tenant's finish-time fairness rho = its mean JCT shared / its mean JCT alone
on its deserved share (Themis, Mahajan et al., NSDI'20, with "alone on 1/N of the cluster"
replaced by "alone on its deserved share", as the sharing-incentive check does). A policy
reports the worst tenant's rho: <= 1 when nobody finishes later, on average, than alone.
(Jain's index of the rhos was tried and dropped: on B3 it was 0.89 for all three policies,
fifo's worst rho of 2.4 included, because tenants that gain from sharing spread it as much.)

Share deviation (DESIGN section 6's "fairness (share deviation)"): at every instant of the
window, each tenant's fair share is its part of a weighted max-min split of the pool, as a
fluid: min(its demand, lambda x its deserved GPUs), lambda as large as the pool allows. Its
demand is the GPUs of its jobs that have arrived and not finished, running or pending. The
split knows no capability: it is the same reference for every policy, so a policy's caps
(fifo's capability = deserved, the others' 2 x) count against it where they leave demand
unserved beside idle GPUs. The policy's share deviation is the time average of half the L1
distance between what the tenants hold and their fair shares, as a fraction of the pool: the
part of the pool that would have to change hands to be fair (0 = always exactly fair; a
shortfall against a work-conserving split counts too). Each tenant's share gap is the time
average of what it holds minus its fair share, in GPUs (above 0: more than its fair share).
Gangs make 0 unreachable; the figure is for comparing policies on the same jobs.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gpupool.scheduler.types import MILLI, SECONDS_PER_HOUR, QueueInfo
from gpupool.simulation.queueing.events import ClusterSetup, JobRecord, ReplayOutcome, Segment


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0 when empty)."""
    return float(np.percentile(np.asarray(values, dtype=float), q)) if values else 0.0


def mean(values: Sequence[float]) -> float:
    """The arithmetic mean (0 when empty)."""
    return float(np.mean(np.asarray(values, dtype=float))) if values else 0.0


def held_gpu_seconds(segments: Iterable[Segment], start: float, end: float) -> float:
    """GPU-seconds held by ``segments`` inside [start, end)."""
    total = 0.0
    for segment in segments:
        overlap = min(segment.end, end) - max(segment.start, start)
        if overlap > 0:
            total += overlap * segment.gpus
    return total


@dataclass(frozen=True, slots=True)
class TenantMetrics:
    """One tenant's outcome under a policy, and alone on its deserved share."""

    jobs: int
    deserved_gpus: int
    gpu_hours: float
    wait_mean_s: float
    wait_p99_s: float
    jct_mean_s: float
    preemptions: int
    gpu_hours_lost: float
    alone_wait_mean_s: float | None
    alone_jct_mean_s: float | None = None
    share_gap_gpus: float = 0.0  # time-average GPUs held minus fair share (module docstring)
    waits_s: tuple[float, ...] = field(default=(), repr=False)

    @property
    def worse_than_alone(self) -> bool | None:
        """Whether it waits longer on average than alone on its share (None: no baseline)."""
        if self.alone_wait_mean_s is None:
            return None
        return self.wait_mean_s > self.alone_wait_mean_s

    @property
    def finish_time_fairness(self) -> float | None:
        """Mean JCT shared / mean JCT alone on its deserved share (None: no baseline)."""
        if not self.alone_jct_mean_s:
            return None
        return self.jct_mean_s / self.alone_jct_mean_s

    def to_json(self) -> dict[str, Any]:
        """The tenant's figures as JSON."""
        return {
            "jobs": self.jobs,
            "deserved_gpus": self.deserved_gpus,
            "gpu_hours": round(self.gpu_hours, 1),
            "wait_mean_s": round(self.wait_mean_s, 1),
            "wait_p99_s": round(self.wait_p99_s, 1),
            "jct_mean_s": round(self.jct_mean_s, 1),
            "preemptions": self.preemptions,
            "gpu_hours_lost": round(self.gpu_hours_lost, 2),
            "alone_wait_mean_s": _rounded(self.alone_wait_mean_s, 1),
            "worse_than_alone": self.worse_than_alone,
            "alone_jct_mean_s": _rounded(self.alone_jct_mean_s, 1),
            "finish_time_fairness": _rounded(self.finish_time_fairness, 4),
            "share_gap_gpus": round(self.share_gap_gpus, 2),
        }


@dataclass(frozen=True, slots=True)
class PolicyMetrics:
    """A policy's B3 figures over all jobs, and per tenant."""

    jobs: int
    jct_mean_s: float
    jct_p99_s: float
    wait_mean_s: float
    wait_p99_s: float
    first_start_wait_mean_s: float
    utilisation: float
    utilisation_makespan: float
    preemptions: int
    gpu_hours_delivered: float
    gpu_hours_lost: float
    makespan_s: float
    cycles: int
    plan_s: float
    tenants: dict[str, TenantMetrics]
    share_deviation: float = 0.0  # time-average fraction of the pool off the fair split

    @property
    def gpu_hours_lost_fraction(self) -> float:
        """Lost GPU-hours as a fraction of delivered GPU-hours."""
        return self.gpu_hours_lost / self.gpu_hours_delivered if self.gpu_hours_delivered else 0.0

    @property
    def tenants_worse_than_alone(self) -> list[str] | None:
        """Tenants that wait longer on average than alone on their deserved share.

        None when the run had no alone baseline (``--no-alone``): nothing was checked.
        """
        if all(t.alone_wait_mean_s is None for t in self.tenants.values()):
            return None
        return sorted(name for name, t in self.tenants.items() if t.worse_than_alone)

    @property
    def finish_time_fairness_max(self) -> float | None:
        """The worst tenant's finish-time fairness (None without the alone baseline)."""
        rhos = [t.finish_time_fairness for t in self.tenants.values()]
        known = [rho for rho in rhos if rho is not None]
        return max(known) if known else None

    def to_json(self) -> dict[str, Any]:
        """The policy's figures as the B3 JSON entry."""
        return {
            "jobs": self.jobs,
            "jct_mean_s": round(self.jct_mean_s, 1),
            "jct_p99_s": round(self.jct_p99_s, 1),
            "wait_mean_s": round(self.wait_mean_s, 1),
            "wait_p99_s": round(self.wait_p99_s, 1),
            "first_start_wait_mean_s": round(self.first_start_wait_mean_s, 1),
            "utilisation": round(self.utilisation, 4),
            "utilisation_makespan": round(self.utilisation_makespan, 4),
            "preemptions": self.preemptions,
            "gpu_hours_delivered": round(self.gpu_hours_delivered, 1),
            "gpu_hours_lost": round(self.gpu_hours_lost, 2),
            "gpu_hours_lost_fraction": round(self.gpu_hours_lost_fraction, 6),
            "makespan_s": round(self.makespan_s, 1),
            "cycles": self.cycles,
            "plan_s": round(self.plan_s, 2),
            "tenants_worse_than_alone": self.tenants_worse_than_alone,
            "finish_time_fairness_max": _rounded(self.finish_time_fairness_max, 4),
            "share_deviation": round(self.share_deviation, 4),
            "tenants": {name: t.to_json() for name, t in self.tenants.items()},
        }


def _rounded(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)


def tenant_of(cluster: ClusterSetup) -> dict[str, str]:
    """Queue name -> tenant (the queue's own name when it has none)."""
    return {q.name: q.tenant or q.name for q in cluster.queues}


def deserved_gpus(queues: Sequence[QueueInfo]) -> dict[str, float]:
    """Per tenant, the deserved GPUs of its leaf queues over every flavor."""
    parents = {q.parent for q in queues if q.parent is not None}
    result: dict[str, float] = defaultdict(float)
    for queue in queues:
        if queue.name in parents:
            continue
        tenant = queue.tenant or queue.name
        result[tenant] += sum(quota.deserved for quota in queue.quota.values()) / MILLI
    return dict(result)


def _by_tenant(
    records: Iterable[JobRecord], tenants: Mapping[str, str]
) -> dict[str, list[JobRecord]]:
    grouped: dict[str, list[JobRecord]] = defaultdict(list)
    for record in records:
        grouped[tenants.get(record.job.queue, record.job.queue)].append(record)
    return grouped


def summarise(
    outcome: ReplayOutcome,
    cluster: ClusterSetup,
    window_s: float,
    shares: Mapping[str, int],
    alone: Mapping[str, ReplayOutcome] | None = None,
) -> PolicyMetrics:
    """The B3 metrics of one replay (``alone``: each tenant's replay alone on its share)."""
    records = outcome.records
    jct = [r.jct_s for r in records]
    wait = [r.wait_s for r in records]
    first = [(r.first_started_at or 0.0) - r.job.submitted_at for r in records]
    capacity = outcome.capacity_gpus
    delivered = held_gpu_seconds(outcome.segments, 0.0, float("inf")) / SECONDS_PER_HOUR
    in_window = held_gpu_seconds(outcome.segments, 0.0, window_s)
    makespan = outcome.makespan_s
    tenants = tenant_of(cluster)
    deviation = share_deviation(outcome, cluster, window_s)
    per_tenant: dict[str, TenantMetrics] = {}
    for tenant, mine in sorted(_by_tenant(records, tenants).items()):
        waits = [r.wait_s for r in mine]
        baseline = (alone or {}).get(tenant)
        per_tenant[tenant] = TenantMetrics(
            jobs=len(mine),
            deserved_gpus=shares.get(tenant, 0),
            gpu_hours=sum(r.job.gpus * r.job.duration_s for r in mine) / SECONDS_PER_HOUR,
            wait_mean_s=mean(waits),
            wait_p99_s=percentile(waits, 99),
            jct_mean_s=mean([r.jct_s for r in mine]),
            preemptions=sum(r.evictions for r in mine),
            gpu_hours_lost=sum(r.lost_gpu_hours for r in mine),
            alone_wait_mean_s=(
                mean([r.wait_s for r in baseline.records]) if baseline is not None else None
            ),
            alone_jct_mean_s=(
                mean([r.jct_s for r in baseline.records]) if baseline is not None else None
            ),
            share_gap_gpus=deviation.gap_gpus.get(tenant, 0.0),
            waits_s=tuple(waits),
        )
    return PolicyMetrics(
        jobs=len(records),
        jct_mean_s=mean(jct),
        jct_p99_s=percentile(jct, 99),
        wait_mean_s=mean(wait),
        wait_p99_s=percentile(wait, 99),
        first_start_wait_mean_s=mean(first),
        utilisation=in_window / (capacity * window_s) if capacity and window_s else 0.0,
        utilisation_makespan=(
            delivered * SECONDS_PER_HOUR / (capacity * makespan) if capacity and makespan else 0.0
        ),
        preemptions=outcome.preemptions,
        gpu_hours_delivered=delivered,
        gpu_hours_lost=sum(r.lost_gpu_hours for r in records),
        makespan_s=makespan,
        cycles=outcome.cycles,
        plan_s=outcome.plan_s,
        tenants=per_tenant,
        share_deviation=deviation.pool,
    )


def fair_split(
    demand: Mapping[str, float], weight: Mapping[str, float], capacity: float
) -> dict[str, float]:
    """Weighted max-min fair split of ``capacity`` (water-filling): each tenant gets
    min(its demand, lambda x its weight), with lambda as large as the pool allows."""
    limit = {t: max(0.0, d) for t, d in demand.items()}
    if sum(limit.values()) <= capacity:
        return limit
    split = dict.fromkeys(limit, 0.0)
    order = sorted((t for t in limit if limit[t] > 0), key=lambda t: limit[t] / weight[t])
    remaining, weights = capacity, sum(weight[t] for t in order)
    for i, tenant in enumerate(order):
        level = remaining / weights
        if limit[tenant] <= level * weight[tenant]:
            split[tenant] = limit[tenant]
            remaining -= limit[tenant]
            weights -= weight[tenant]
            continue
        for other in order[i:]:
            split[other] = level * weight[other]
        break
    return split


@dataclass(frozen=True, slots=True)
class ShareDeviation:
    """Time averages over the window (module docstring): the pool's fraction off the fair
    split, and per tenant GPUs held minus its fair share."""

    pool: float
    gap_gpus: dict[str, float]


def share_deviation(
    outcome: ReplayOutcome, cluster: ClusterSetup, window_s: float
) -> ShareDeviation:
    """How far the GPUs the tenants held were from a weighted max-min fair split."""
    tenants = tenant_of(cluster)
    weight: dict[str, float] = defaultdict(float, deserved_gpus(cluster.queues))
    changes: list[tuple[float, str, str, float]] = []  # time, tenant, "demand"/"held", delta
    for record in outcome.records:
        tenant = tenants.get(record.job.queue, record.job.queue)
        end = record.finished_at if record.finished_at is not None else math.inf
        changes += [
            (record.job.submitted_at, tenant, "demand", record.job.gpus),
            (end, tenant, "demand", -record.job.gpus),
        ]
    for segment in outcome.segments:
        tenant = tenants.get(segment.queue, segment.queue)
        changes += [(segment.start, tenant, "held", segment.gpus)]
        changes += [(segment.end, tenant, "held", -segment.gpus)]
    changes.sort(key=lambda change: change[0])
    capacity = float(outcome.capacity_gpus)
    names = sorted(set(weight) | {change[1] for change in changes})
    if window_s <= 0 or capacity <= 0:
        return ShareDeviation(0.0, dict.fromkeys(names, 0.0))
    for name in names:  # a tenant with no deserved share still counts, barely
        weight[name] = max(weight[name], 1e-9)
    demand = dict.fromkeys(names, 0.0)
    held = dict.fromkeys(names, 0.0)
    off = 0.0
    gap = dict.fromkeys(names, 0.0)
    now, i = 0.0, 0
    while now < window_s:
        while i < len(changes) and changes[i][0] <= now:
            _, tenant, kind, delta = changes[i]
            (demand if kind == "demand" else held)[tenant] += delta
            i += 1
        following = changes[i][0] if i < len(changes) else math.inf
        until = min(following, window_s)
        fair = fair_split(demand, weight, capacity)
        span = until - now
        off += span * sum(abs(held[t] - fair[t]) for t in names) / 2
        for tenant in names:
            gap[tenant] += span * (held[tenant] - fair[tenant])
        now = until
    return ShareDeviation(
        off / (capacity * window_s), {t: value / window_s for t, value in gap.items()}
    )
