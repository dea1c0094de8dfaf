"""Benchmark B3: multi-tenant queueing on the Philly virtual-cluster trace.

The trace is Gavel's per-VC form of Microsoft's Philly trace (Jeon et al., USENIX ATC'19;
Narayanan et al., OSDI'20; see the README's "Trace data"): each of 15 virtual
clusters is a tenant with its own queue; a job is a gang of ``num_gpus`` GPUs that runs for
``est_duration_s_v100`` seconds. We keep the jobs arriving in each tenant's first ``days`` days
(arrival times are relative to each VC's first job), replay them on 128 nodes of 8 GPUs (one
NVLink domain per node) and compare policies, each expressed as settings of the same core:

- ``fifo``: capability = deserved (no borrowing), no preemption or reclaim, strict FIFO per
  queue (``queueing: "fifo"``: nothing behind a blocked head) and no fair sharing;
- ``kueue-like``: Kueue's defaults: borrowing up to capability within the cohort, reclaim of
  borrowed capacity and preemption inside a queue, BestEffortFIFO queues, fair sharing off
  (heads served within-deserved first, then by priority and submit time), no protected
  runtime, no back-off or victim protection;
- ``gpupool``: the product's defaults: DRF, borrowing, preemption and reclaim with a
  protected runtime of one checkpoint interval (30 min), back-off and victim protection.

Each tenant's deserved share is proportional to its GPU-hour demand in the window, but never
below its largest gang (else it could not run that job alone on its share), rounded to whole
GPUs by largest remainder so that the shares sum to the pool; capability is twice deserved.
Each queue's weight is its deserved GPUs, as an admin of such a pool would set it: weighted
DRF (Ghodsi et al., NSDI'11) then turns to the tenant furthest below its entitlement, not the
one using the fewest GPUs (``queue_weights="equal"`` gives the equal-weight comparison).
"""

from __future__ import annotations

import csv
import math
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from gpupool.scheduler.types import (
    MIB_PER_GB,
    MILLI,
    SECONDS_PER_HOUR,
    FlavorInfo,
    NodeInfo,
    PodSetInfo,
    PolicyInfo,
    QueueInfo,
    QuotaInfo,
)
from gpupool.simulation.datasets import PHILLY
from gpupool.simulation.queueing.events import (
    DEFAULT_CHECKPOINT_S,
    ClusterSetup,
    ReplayOutcome,
    SimJob,
    SimPolicy,
    replay_jobs,
)
from gpupool.simulation.queueing.metrics import PolicyMetrics, summarise

FLAVOR = "v100"
NODES = 128
GPUS_PER_NODE = 8
NODE_CPU_MILLI = 96_000
NODE_MEMORY_MIB = 768 * MIB_PER_GB
DAY_S = 86_400.0
DEFAULT_DAYS = 30.0
# How the setup weighs the tenants' queues for weighted DRF (see make_cluster).
QUEUE_WEIGHTS = ("deserved", "equal")
DEFAULT_QUEUE_WEIGHTS = "deserved"
CAPABILITY_FACTOR = 2.0
PROTECTED_RUNTIME_S = 1800.0
JOBS_TABLE = "jobs_by_vc_seed0.csv"  # the flat table of every VC's jobs
CYCLE_S = 60.0  # cycles run on a 60 s beat, only when something happened since the last


@dataclass(frozen=True, slots=True)
class PhillyJob:
    """One row of ``jobs_by_vc_seed0.csv``: a VC's job, its gang size and its V100 run time."""

    vc: str
    index: int
    arrival_s: float
    gpus: int
    duration_s: float

    @property
    def name(self) -> str:
        """A unique job name: VC and line number."""
        return f"{self.vc}-{self.index:04d}"

    @property
    def gpu_hours(self) -> float:
        """GPU-hours the job needs when run alone."""
        return self.gpus * self.duration_s / SECONDS_PER_HOUR


def load_jobs(path: Path | None = None) -> list[PhillyJob]:
    """Every job of the flat table, in file order."""
    path = path or PHILLY.file(JOBS_TABLE)
    with path.open(newline="", encoding="utf-8") as handle:
        return [
            PhillyJob(
                vc=row["vc"],
                index=int(row["job_idx"]),
                arrival_s=float(row["arrival_time_s"]),
                gpus=int(row["num_gpus"]),
                duration_s=float(row["est_duration_s_v100"]),
            )
            for row in csv.DictReader(handle)
        ]


def window(
    jobs: Sequence[PhillyJob], days: float = DEFAULT_DAYS, limit: int | None = None
) -> list[PhillyJob]:
    """Jobs arriving in each VC's first ``days`` days, by arrival; the first ``limit`` only."""
    kept = sorted(
        (job for job in jobs if job.arrival_s < days * DAY_S),
        key=lambda job: (job.arrival_s, job.vc, job.index),
    )
    return kept if limit is None else kept[:limit]


def pod_sets(gpus: int) -> tuple[PodSetInfo, ...]:
    """A gang of ``gpus`` GPUs as pods of at most one node each: equal pods, as few as can be.

    Up to 8 GPUs is one pod; beyond, the pod size is the largest divisor of the gang that is
    at most 8 (16 -> 2 x 8, 12 -> 2 x 6, 20 -> 4 x 5).
    """
    if gpus <= GPUS_PER_NODE:
        return (PodSetInfo(count=1, gpus=gpus, flavors=(FLAVOR,)),)
    size = max(d for d in range(1, GPUS_PER_NODE + 1) if gpus % d == 0)
    return (PodSetInfo(count=gpus // size, gpus=size, flavors=(FLAVOR,)),)


def queue_name(vc: str) -> str:
    """The leaf queue of a VC."""
    return f"vc-{vc}"


def sim_jobs(jobs: Sequence[PhillyJob]) -> list[SimJob]:
    """The Philly jobs as simulator jobs."""
    return [
        SimJob(
            name=job.name,
            queue=queue_name(job.vc),
            pod_sets=pod_sets(job.gpus),
            submitted_at=job.arrival_s,
            duration_s=job.duration_s,
        )
        for job in jobs
    ]


def deserved_shares(
    demand: Mapping[str, float], floors: Mapping[str, int], capacity: int
) -> dict[str, int]:
    """Whole-GPU shares proportional to ``demand``, each at least its floor, summing to capacity.

    Tenants whose proportional share falls below their floor get the floor, and the rest of
    the pool is shared again among the others (water-filling); the result is rounded by
    largest remainder (ties by name).
    """
    if sum(floors.values()) > capacity:
        raise ValueError("the tenants' floors exceed the pool")
    fixed: dict[str, int] = {}
    while True:
        free = capacity - sum(fixed.values())
        rest = {t: d for t, d in demand.items() if t not in fixed}
        total = sum(rest.values())
        if not rest or total <= 0:
            raw = {t: free / len(rest) for t in rest} if rest else {}
        else:
            raw = {t: free * d / total for t, d in rest.items()}
        low = [t for t in rest if raw[t] < floors.get(t, 0)]
        if not low:
            break
        for tenant in low:
            fixed[tenant] = floors[tenant]
    shares = {t: math.floor(r + 1e-9) for t, r in raw.items()}
    leftover = free - sum(shares.values())
    for tenant in sorted(raw, key=lambda t: (-(raw[t] - shares[t]), t))[:leftover]:
        shares[tenant] += 1
    shares.update(fixed)
    return dict(sorted(shares.items()))


def tenant_shares(
    jobs: Sequence[PhillyJob], capacity: int = NODES * GPUS_PER_NODE
) -> dict[str, int]:
    """Each VC's deserved GPUs for this set of jobs."""
    demand: dict[str, float] = defaultdict(float)
    floors: dict[str, int] = defaultdict(int)
    for job in jobs:
        demand[job.vc] += job.gpu_hours
        floors[job.vc] = max(floors[job.vc], job.gpus)
    return deserved_shares(demand, floors, capacity)


def make_nodes(gpus: int, prefix: str = "n") -> tuple[NodeInfo, ...]:
    """Nodes of 8 GPUs (one NVLink domain each) holding ``gpus`` GPUs; the last may be smaller."""
    nodes: list[NodeInfo] = []
    count = math.ceil(gpus / GPUS_PER_NODE)
    width = max(3, len(str(count)))
    for i in range(count):
        size = min(GPUS_PER_NODE, gpus - i * GPUS_PER_NODE)
        name = f"{prefix}{i:0{width}d}"
        nodes.append(NodeInfo(name, FLAVOR, size, NODE_CPU_MILLI, NODE_MEMORY_MIB, domain=name))
    return tuple(nodes)


def make_cluster(
    shares: Mapping[str, int],
    gpus: int,
    capability_factor: float = CAPABILITY_FACTOR,
    max_protected_runtime_s: float | None = None,
    queue_weights: str = DEFAULT_QUEUE_WEIGHTS,
) -> ClusterSetup:
    """The pool and one leaf queue per VC under the root (one cohort).

    ``queue_weights``: ``"deserved"`` gives each queue a weight equal to its deserved GPUs
    (weighted DRF: entitlement-proportional), ``"equal"`` gives every queue weight 1.
    """
    if queue_weights not in QUEUE_WEIGHTS:
        raise ValueError(f"queue_weights must be one of {QUEUE_WEIGHTS}, not {queue_weights!r}")
    queues = [QueueInfo("root", None)]
    for vc, deserved in shares.items():
        capability = min(gpus, math.floor(deserved * capability_factor))
        quota = QuotaInfo(0, deserved * MILLI, capability * MILLI)
        queues.append(
            QueueInfo(
                queue_name(vc),
                "root",
                tenant=vc,
                weight=float(deserved) if queue_weights == "deserved" else 1.0,
                max_protected_runtime_s=max_protected_runtime_s,
                quota={FLAVOR: quota},
            )
        )
    return ClusterSetup(flavors=(FlavorInfo(FLAVOR),), nodes=make_nodes(gpus), queues=tuple(queues))


@dataclass(frozen=True, slots=True)
class PhillyPolicy:
    """A B3 policy: the core's settings plus how queues are sized."""

    sim: SimPolicy
    capability_factor: float = CAPABILITY_FACTOR
    description: str = ""


QUEUEING_POLICIES: dict[str, PhillyPolicy] = {
    "fifo": PhillyPolicy(
        SimPolicy(
            "fifo",
            PolicyInfo(
                phases=("enqueue", "allocate"),
                backoff=None,
                victim_protection=None,
                queueing="fifo",
                queue_order="head-rank",
                fair_reclaim=False,
            ),
        ),
        capability_factor=1.0,
        description="capability = deserved, no preemption, strict FIFO per queue",
    ),
    "kueue-like": PhillyPolicy(
        SimPolicy(
            "kueue-like",
            PolicyInfo(
                phases=("enqueue", "allocate", "preempt", "reclaim"),
                backoff=None,
                victim_protection=None,
                queue_order="head-rank",
                fair_reclaim=False,
                victim_search="greedy",
            ),
        ),
        description=(
            "borrowing to 2 x deserved, reclaim, no fair sharing, no protected runtime, "
            "Kueue's greedy victim search"
        ),
    ),
}


def gpupool_policy(
    protected_runtime_s: float = PROTECTED_RUNTIME_S, starvation_limit_s: float | None = None
) -> PhillyPolicy:
    """The product's policy (``PolicyInfo()`` defaults) with jobs protected for a while.

    The defaults are what B3 reports; the two knobs exist for sensitivity runs.
    """
    return PhillyPolicy(
        SimPolicy(
            "gpupool",
            PolicyInfo(starvation_limit_s=starvation_limit_s),
            protected_runtime_s=protected_runtime_s,
        ),
        description="DRF, borrowing, reclaim after a protected window, back-off",
    )


QUEUEING_POLICIES["gpupool"] = gpupool_policy()

ALONE_POLICY = "gpupool"


@dataclass(slots=True)
class PhillyRun:
    """Results of one B3 run: the trace's facts, per-policy metrics and the alone baseline."""

    days: float
    limit: int | None
    jobs: int
    gpu_hours: float
    capacity_gpus: int
    shares: dict[str, int]
    queue_weights: str = DEFAULT_QUEUE_WEIGHTS
    trace: str = "philly"  # or "synthetic" (`gpupool.simulation.queueing.synthetic_trace`)
    source: dict[str, Any] = field(default_factory=dict)  # how a synthetic trace was drawn
    metrics: dict[str, PolicyMetrics] = field(default_factory=dict)
    outcomes: dict[str, ReplayOutcome] = field(default_factory=dict)
    alone: dict[str, ReplayOutcome] = field(default_factory=dict)
    elapsed_s: dict[str, float] = field(default_factory=dict)
    settings: dict[str, PhillyPolicy] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The B3 document: ``{"trace": "philly", "policies": {name: {...}}}`` and context."""
        document: dict[str, Any] = {"trace": self.trace}
        if self.source:
            document[self.trace] = self.source
        return document | {
            "days": self.days,
            "limit": self.limit,
            "jobs": self.jobs,
            "gpu_hours": round(self.gpu_hours, 1),
            "capacity_gpus": self.capacity_gpus,
            "deserved_gpus": self.shares,
            "queue_weights": self.queue_weights,
            "checkpoint_s": DEFAULT_CHECKPOINT_S,
            "cycle_s": CYCLE_S,
            "elapsed_s": {k: round(v, 2) for k, v in self.elapsed_s.items()},
            "settings": {name: _settings_json(p) for name, p in self.settings.items()},
            "policies": {name: m.to_json() for name, m in self.metrics.items()},
        }


ProgressHook = Callable[[str, int, int], None]


def _settings_json(setup: PhillyPolicy) -> dict[str, Any]:
    """How a policy was expressed: the core's knobs, the protection, the queues' sizing."""
    policy = setup.sim.policy
    return {
        "description": setup.description,
        "phases": list(policy.phases),
        "protected_runtime_s": setup.sim.protected_runtime_s,
        "starvation_limit_s": policy.starvation_limit_s,
        "backoff": policy.backoff is not None,
        "victim_protection": policy.victim_protection is not None,
        "queueing": policy.queueing,
        "queue_order": policy.queue_order,
        "fair_reclaim": policy.fair_reclaim,
        "victim_search": policy.victim_search,
        "capability_factor": setup.capability_factor,
    }


def run_philly(
    policies: Sequence[str] = tuple(QUEUEING_POLICIES),
    *,
    days: float = DEFAULT_DAYS,
    limit: int | None = None,
    jobs: Sequence[PhillyJob] | None = None,
    alone: bool = True,
    on_progress: ProgressHook | None = None,
    settings: Mapping[str, PhillyPolicy] | None = None,
    queue_weights: str = DEFAULT_QUEUE_WEIGHTS,
    trace: str = "philly",
    source: Mapping[str, Any] | None = None,
) -> PhillyRun:
    """Run B3: every policy on the same jobs, plus each tenant alone on its deserved share.

    ``settings`` replaces the named policies' settings (e.g. a gpupool variant);
    ``queue_weights`` is the pool's queue weighting, the same for every policy. ``trace`` and
    ``source`` label the jobs when they are not the Philly trace's (a synthetic trace).
    """
    import time

    chosen = window(jobs if jobs is not None else load_jobs(), days, limit)
    capacity = NODES * GPUS_PER_NODE
    shares = tenant_shares(chosen, capacity)
    run = PhillyRun(
        days=days,
        limit=limit,
        jobs=len(chosen),
        gpu_hours=sum(job.gpu_hours for job in chosen),
        capacity_gpus=capacity,
        shares=shares,
        queue_weights=queue_weights,
        trace=trace,
        source=dict(source or {}),
    )
    simulated = sim_jobs(chosen)
    window_s = days * DAY_S
    if alone:
        started = time.perf_counter()
        run.alone = alone_baselines(simulated, shares, on_progress)
        run.elapsed_s["alone"] = time.perf_counter() - started
    for name in policies:
        setup = (settings or {}).get(name) or QUEUEING_POLICIES[name]
        run.settings[name] = setup
        cluster = make_cluster(
            shares,
            capacity,
            setup.capability_factor,
            setup.sim.protected_runtime_s or None,
            queue_weights,
        )
        hook = _hook(on_progress, name)
        started = time.perf_counter()
        outcome = replay_jobs(simulated, cluster, setup.sim, cycle_s=CYCLE_S, on_progress=hook)
        run.elapsed_s[name] = time.perf_counter() - started
        run.outcomes[name] = outcome
        run.metrics[name] = summarise(outcome, cluster, window_s, shares, run.alone)
    return run


def alone_baselines(
    jobs: Sequence[SimJob], shares: Mapping[str, int], on_progress: ProgressHook | None = None
) -> dict[str, ReplayOutcome]:
    """Each tenant's jobs replayed alone on a pool the size of its deserved share."""
    setup = QUEUEING_POLICIES[ALONE_POLICY]
    by_queue: dict[str, list[SimJob]] = defaultdict(list)
    for job in jobs:
        by_queue[job.queue].append(job)
    result: dict[str, ReplayOutcome] = {}
    for vc, deserved in shares.items():
        mine = by_queue.get(queue_name(vc), [])
        if not mine:
            continue
        cluster = make_cluster({vc: deserved}, deserved, 1.0, setup.sim.protected_runtime_s)
        sim = replace(setup.sim, name=f"alone-{vc}")
        hook = _hook(on_progress, f"alone {vc}")
        result[vc] = replay_jobs(mine, cluster, sim, cycle_s=CYCLE_S, on_progress=hook)
    return result


def _hook(on_progress: ProgressHook | None, label: str) -> Callable[[int, int], None] | None:
    if on_progress is None:
        return None

    def hook(done: int, total: int) -> None:
        on_progress(label, done, total)

    return hook
