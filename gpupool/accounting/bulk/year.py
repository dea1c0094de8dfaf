"""A seeded year of a busy pool (benchmark B5), planned as plain arrays; nothing is written here.

``plan_year(shape, seed=..., end=...)`` decides everything: the flavors and how many nodes each
needs, the tenants (each owning the namespace of its name) and the queue tree (root, one queue
per organization, one or two leaf queues per tenant) with guarantees, deserved shares and caps,
and the workloads of the year before ``end`` with their runs, usage intervals, preemptions and
state transitions. ``actions.do_load_year`` writes the plan.

How the year is made (the same seed and end give the same year):

- Arrivals are spread evenly over the year; tenants differ in size (Zipf-like weights); 80% of
  workloads use ``h100``, 12% ``gb200`` and 8% ``l40s``; sizes 1-32 GPUs (half of them 1 GPU),
  gangs of 8-GPU (``gb200``: 4-GPU) pods; runtimes log-normal around 3 hours (mean about 7.5);
  85% of workloads run at ``normal``, 10% at the budgeted ``high``, 5% at ``interactive``.
- Each workload waits (about 20 minutes on average) and runs; 4% are cancelled while pending.
  ``preemptions`` of the runs are cut by a preemption (preempt, reclaim, node failure, drain or
  budget) and requeued: the victim loses the progress since its last checkpoint and runs the
  rest after a second wait. Work still running at ``end`` is running, with an open interval;
  work whose (next) start falls after ``end`` is pending.
- The control loop opens a new usage interval whenever a run's GPUs or class change (elastic
  gangs resizing, budgets running out); each run here is cut into pieces so that the year has
  exactly ``intervals`` of them, and the last piece of a ``high`` run is sometimes demoted to
  ``normal``.
- The pool is sized to the work: each flavor gets the nodes that put its average use at
  ``utilisation``. Some GPUs fail for a few hours now and then (capacity samples), the ``h100``
  price drops half-way through the year, and a tenth of the guaranteed queues change their
  guarantee at the same moment. The year ends with a finished scheduling cycle.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import numpy as np

HOUR_S = 3600.0
DAY_S = 86400.0


@dataclass(frozen=True)
class YearShape:
    """How big the year is (B5's sizes by default) and how busy its pool."""

    tenants: int = 200
    queues: int = 400
    workloads: int = 500_000
    intervals: int = 5_000_000
    preemptions: int = 50_000
    days: int = 365
    utilisation: float = 0.6

    def problems(self) -> list[str]:
        """Why this shape cannot be planned (empty when it can)."""
        found = []
        organizations = organizations_for(self.tenants)
        if self.tenants < 1:
            found.append("tenants: at least 1")
        if self.queues < 1 + organizations + self.tenants:
            found.append(
                f"queues: at least {1 + organizations + self.tenants} for {self.tenants} tenants "
                f"(a root, {organizations} organizations and a leaf queue per tenant)"
            )
        elif self.queues > 1 + organizations + 2 * self.tenants:
            found.append(f"queues: at most {1 + organizations + 2 * self.tenants} (two per tenant)")
        if self.workloads < 1:
            found.append("workloads: at least 1")
        if not 0 <= self.preemptions <= self.workloads // 4:
            found.append("preemptions: between 0 and a quarter of the workloads")
        if self.intervals < self.workloads:
            found.append("intervals: at least one per workload")
        if self.days < 1:
            found.append("days: at least 1")
        if not 0.05 <= self.utilisation <= 0.95:
            found.append("utilisation: between 0.05 and 0.95")
        return found


def organizations_for(tenants: int) -> int:
    """Organizations (inner queues) for ``tenants`` teams: about ten teams each."""
    return max(1, round(tenants / 10))


@dataclass(frozen=True)
class FlavorPlan:
    """A flavor of the pool: its node shape, how many nodes, its price before and after."""

    name: str
    gpu_model: str
    gpu_memory_gb: int
    gpus_per_node: int
    pod_gpus: int  # the most GPUs one pod of it asks (bigger gangs use more pods)
    domain_nodes: int  # nodes per NVLink domain
    price: Decimal
    later_price: Decimal
    nodes: int = 0


FLAVORS = (
    FlavorPlan("h100", "H100-80GB", 80, 8, 8, 1, Decimal("2.50"), Decimal("2.20")),
    FlavorPlan("gb200", "GB200", 186, 4, 4, 18, Decimal("6.00"), Decimal("6.00")),
    FlavorPlan("l40s", "L40S", 48, 4, 4, 1, Decimal("1.10"), Decimal("1.10")),
)
FLAVOR_SHARES = (0.80, 0.12, 0.08)
SIZES = np.array([1, 2, 4, 8, 16, 32])
SIZE_SHARES = np.array([0.50, 0.15, 0.15, 0.15, 0.04, 0.01])
CLASSES = ("normal", "high", "interactive")
CLASS_SHARES = (0.85, 0.10, 0.05)
# DESIGN §2's reasons (a budget demotes, never evicts); an idle workload's end is not drawn here.
REASONS = ("preempt", "reclaim", "node-failure", "admin")
REASON_SHARES = (0.50, 0.30, 0.12, 0.08)
PENDING_REASONS = ("quota", "capacity", "behind", "fragmentation")


@dataclass(frozen=True)
class QueuePlan:
    """A queue of the tree: name, parent (index into the plan's queues), tenant (index)."""

    name: str
    parent: int | None
    tenant: int | None


@dataclass(frozen=True)
class QuotaPlan:
    """A queue's quota of one flavor, from ``at`` on."""

    queue: int
    flavor: int
    guarantee: int
    deserved: int
    capability: int
    at: datetime


@dataclass
class YearPlan:
    """The whole year: the pool, the tree, and the work as arrays (indices, not ids)."""

    start: datetime
    end: datetime
    flavors: list[FlavorPlan]
    tenants: list[str]
    organizations: list[str]
    queues: list[QueuePlan]
    quotas: list[QuotaPlan]  # in time order: the year's first quotas, then the changes
    failures: list[tuple[int, datetime, int]]  # (flavor, at, healthy GPUs from then on)
    # workloads (index w): submit time, queue, class, flavor, pod count and GPUs per pod ...
    workloads: dict[str, np.ndarray] = field(default_factory=dict)
    intervals: dict[str, np.ndarray] = field(default_factory=dict)
    preemptions: dict[str, np.ndarray] = field(default_factory=dict)
    transitions: dict[str, np.ndarray] = field(default_factory=dict)

    def at(self, seconds: np.ndarray | float) -> datetime:
        """A time of the year given in seconds after its start."""
        return self.start + timedelta(seconds=float(seconds))


def plan_year(shape: YearShape, *, seed: int, end: datetime) -> YearPlan:
    """Plan the year before ``end`` for ``shape`` from ``seed``."""
    problems = shape.problems()
    if problems:
        raise ValueError("; ".join(problems))
    rng = np.random.default_rng(seed)
    end = end.astimezone(UTC)
    span = shape.days * DAY_S
    start = end - timedelta(seconds=span)
    tenants = [f"t{i:03d}" for i in range(shape.tenants)]
    organizations = [f"org{i:02d}" for i in range(organizations_for(shape.tenants))]
    queues = _tree(shape, tenants, organizations)
    plan = YearPlan(
        start=start,
        end=end,
        flavors=[],
        tenants=tenants,
        organizations=organizations,
        queues=queues,
        quotas=[],
        failures=[],
    )
    _workloads(plan, shape, rng, span)
    plan.flavors = _size_pool(plan, shape, span)
    _quotas(plan, rng)
    _failures(plan, rng, span)
    _runs(plan, shape, rng, span)
    return plan


def _tree(shape: YearShape, tenants: list[str], organizations: list[str]) -> list[QueuePlan]:
    """Root, one queue per organization, then each tenant's one or two leaf queues."""
    queues = [QueuePlan("root", None, None)]
    queues += [QueuePlan(name, 0, None) for name in organizations]
    spare = shape.queues - 1 - len(organizations) - len(tenants)
    for index, tenant in enumerate(tenants):
        parent = 1 + index % len(organizations)
        queues.append(QueuePlan(tenant, parent, index))
        if index < spare:
            queues.append(QueuePlan(f"{tenant}-batch", parent, index))
    return queues


def _workloads(plan: YearPlan, shape: YearShape, rng: np.random.Generator, span: float) -> None:
    """Who submits what, when: submit times, queues, classes, flavors, sizes, runtimes."""
    n = shape.workloads
    submit = np.sort(rng.random(n) * span)
    weights = 1.0 / np.arange(1, shape.tenants + 1) ** 0.8
    tenant = rng.choice(shape.tenants, size=n, p=weights / weights.sum())
    leaves: dict[int, list[int]] = {}
    for index, planned in enumerate(plan.queues):
        if planned.tenant is not None:
            leaves.setdefault(planned.tenant, []).append(index)
    first = np.array([leaves[t][0] for t in range(shape.tenants)])
    second = np.array([leaves[t][-1] for t in range(shape.tenants)])
    queue = np.where(rng.random(n) < 0.5, first[tenant], second[tenant])
    flavor = rng.choice(len(FLAVORS), size=n, p=FLAVOR_SHARES)
    gpus = rng.choice(SIZES, size=n, p=SIZE_SHARES)
    gpus = np.where(flavor == 2, np.minimum(gpus, 4), gpus)  # l40s: single nodes of 4
    pod_gpus = np.array([f.pod_gpus for f in FLAVORS])[flavor]
    per_pod = np.minimum(gpus, pod_gpus)
    runtime = np.clip(rng.lognormal(math.log(3 * HOUR_S), 1.3, size=n), 300.0, 10 * DAY_S)
    plan.workloads = {
        "submit": submit,
        "tenant": tenant,
        "queue": queue,
        "class": rng.choice(len(CLASSES), size=n, p=CLASS_SHARES),
        "flavor": flavor,
        "per_pod": per_pod,
        "pods": gpus // per_pod,
        "gpus": gpus,
        "runtime": runtime,
        "wait": rng.exponential(20 * 60.0, size=n) * (1 + np.log2(gpus)),
        "cancelled": rng.random(n) < 0.04,
        "failed": rng.random(n) < 0.10,
        "protected": np.where(rng.random(n) < 0.3, 3600, 0),
    }


def _size_pool(plan: YearPlan, shape: YearShape, span: float) -> list[FlavorPlan]:
    """Give each flavor the nodes that put its average use at ``shape.utilisation``."""
    w = plan.workloads
    ran = ~w["cancelled"]
    flavors = []
    for index, flavor in enumerate(FLAVORS):
        mine = ran & (w["flavor"] == index)
        demand = float(np.sum(w["gpus"][mine] * w["runtime"][mine]))
        gpus = demand / (span * shape.utilisation)
        nodes = max(1, math.ceil(gpus / flavor.gpus_per_node))
        if nodes > flavor.domain_nodes:  # whole NVLink domains, once it fills one
            nodes = math.ceil(nodes / flavor.domain_nodes) * flavor.domain_nodes
        largest = int(np.max(w["gpus"][mine], initial=0))
        nodes = max(nodes, math.ceil(largest / flavor.gpus_per_node))
        flavors.append(FlavorPlan(**{**flavor.__dict__, "nodes": nodes}))
    return flavors


def _quotas(plan: YearPlan, rng: np.random.Generator) -> None:
    """Guarantees for 85% of each flavor's GPUs (org queues, then most of their teams), deserved
    shares by the teams' demand, caps at twice that; a tenth of the teams change half-way."""
    w = plan.workloads
    organizations = range(1, 1 + len(plan.organizations))
    leaves = [i for i, q in enumerate(plan.queues) if q.tenant is not None]
    half_way = plan.start + (plan.end - plan.start) / 2
    changes: list[QuotaPlan] = []
    for f, flavor in enumerate(plan.flavors):
        capacity = flavor.nodes * flavor.gpus_per_node
        mine = w["flavor"] == f
        demand = np.bincount(
            w["queue"][mine], weights=(w["gpus"] * w["runtime"])[mine], minlength=len(plan.queues)
        )
        total = float(demand[leaves].sum()) or 1.0
        org_demand = dict.fromkeys(organizations, 0.0)
        for leaf in leaves:
            parent = plan.queues[leaf].parent
            assert parent is not None
            org_demand[parent] += float(demand[leaf])
        guaranteed = 0.85 * capacity if f != 2 else 0.0  # l40s: no guarantees
        for org in organizations:
            share = org_demand[org] / total
            guarantee = math.floor(guaranteed * share)
            deserved = max(guarantee, math.ceil(capacity * share))
            plan.quotas.append(QuotaPlan(org, f, guarantee, deserved, capacity, plan.start))
            team_leaves = [leaf for leaf in leaves if plan.queues[leaf].parent == org]
            held = 0
            for leaf in team_leaves:
                leaf_share = float(demand[leaf]) / (org_demand[org] or 1.0)
                leaf_guarantee = 0
                if rng.random() < 0.7:
                    leaf_guarantee = min(math.floor(guarantee * leaf_share), guarantee - held)
                held += leaf_guarantee
                leaf_deserved = max(leaf_guarantee, math.ceil(deserved * leaf_share), 1)
                cap = max(2 * leaf_deserved, leaf_guarantee)
                plan.quotas.append(
                    QuotaPlan(leaf, f, leaf_guarantee, leaf_deserved, cap, plan.start)
                )
                if leaf_guarantee and rng.random() < 0.1:
                    lower = leaf_guarantee // 2
                    changes.append(QuotaPlan(leaf, f, lower, leaf_deserved, cap, half_way))
    plan.quotas.extend(changes)


def _failures(plan: YearPlan, rng: np.random.Generator, span: float) -> None:
    """GPUs failing for a few hours at a time: about one episode per flavor per fortnight."""
    for f, flavor in enumerate(plan.flavors):
        capacity = flavor.nodes * flavor.gpus_per_node
        plan.failures.append((f, plan.start, capacity))
        episodes = rng.poisson(span / (14 * DAY_S))
        starts = np.sort(rng.random(episodes) * span)
        cursor = 0.0
        for begin in starts:
            if begin < cursor:
                continue
            lost = int(rng.integers(1, flavor.gpus_per_node + 1))
            length = float(rng.uniform(1, 48)) * HOUR_S
            plan.failures.append((f, plan.at(begin), capacity - lost))
            cursor = min(begin + length, span - 1)
            plan.failures.append((f, plan.at(cursor), capacity))


def _runs(plan: YearPlan, shape: YearShape, rng: np.random.Generator, span: float) -> None:
    """Runs, preemptions, usage intervals and transitions of every workload."""
    w = plan.workloads
    n = len(w["submit"])
    first_start = w["submit"] + w["wait"]
    cancelled = w["cancelled"]
    ran = ~cancelled & (first_start < span)
    # Preemptions: runs long enough to be cut, cut early enough to be seen this year.
    cut_at = first_start + w["runtime"] * rng.uniform(0.1, 0.9, size=n)
    eligible = np.flatnonzero(ran & (w["runtime"] > 1800) & (cut_at < span))
    count = min(shape.preemptions, len(eligible))
    victims = np.sort(rng.choice(eligible, size=count, replace=False))
    preempted = np.zeros(n, dtype=bool)
    preempted[victims] = True
    lost = np.minimum(rng.uniform(0, 1800, size=n), cut_at - first_start)
    second_start = cut_at + rng.exponential(15 * 60.0, size=n)
    # Each run as (workload, start, end); end beyond the year means still running.
    first_end = np.where(preempted, cut_at, first_start + w["runtime"])
    remaining = w["runtime"] - (cut_at - first_start) + lost
    second_end = second_start + remaining
    runs_w = np.concatenate([np.flatnonzero(ran), victims[second_start[victims] < span]])
    runs_start = np.concatenate([first_start[ran], second_start[runs_w[ran.sum() :]]])
    runs_end = np.concatenate([first_end[ran], second_end[runs_w[ran.sum() :]]])
    _intervals(plan, shape, rng, span, runs_w, runs_start, runs_end)
    _preemption_events(plan, rng, victims, cut_at, lost, first_start, ran)
    # Final states and the times the workloads row keeps.
    last_start = first_start.copy()
    second_seen = preempted & (second_start < span)
    last_start[second_seen] = second_start[second_seen]
    last_end = np.where(second_seen, second_end, first_end)
    pending_again = preempted & ~second_seen
    finished = ran & ~pending_again & (last_end < span)
    running = ran & ~pending_again & (last_end >= span)
    state = np.full(n, "pending", dtype=object)
    state[cancelled] = "cancelled"
    state[running] = "running"
    state[finished & ~w["failed"]] = "succeeded"
    state[finished & w["failed"]] = "failed"
    cancel_at = w["submit"] + w["wait"] * rng.uniform(0.1, 0.9, size=n)
    w.update(
        {
            "state": state,
            "started": np.where(running | finished, last_start, np.nan),
            "finished": np.where(finished, last_end, np.where(cancelled, cancel_at, np.nan)),
            "preempted": preempted,
            "pending_reason": rng.choice(len(PENDING_REASONS), size=n),
        }
    )
    _transitions(
        plan,
        ran=ran,
        cancelled=cancelled,
        cancel_at=cancel_at,
        first_start=first_start,
        cut_at=cut_at,
        preempted=preempted,
        second_seen=second_seen,
        second_start=second_start,
        finished=finished,
        last_end=last_end,
    )


def _intervals(
    plan: YearPlan,
    shape: YearShape,
    rng: np.random.Generator,
    span: float,
    runs_w: np.ndarray,
    runs_start: np.ndarray,
    runs_end: np.ndarray,
) -> None:
    """Cut each run into pieces (new intervals) so that the year has ``shape.intervals``."""
    w = plan.workloads
    runs = len(runs_w)
    end = np.minimum(runs_end, span)
    length = np.maximum(end - runs_start, 1.0)
    extra = max(shape.intervals - runs, 0)
    pieces = 1 + rng.multinomial(extra, length / length.sum()) if runs else np.zeros(0, int)
    run_of = np.repeat(np.arange(runs), pieces)
    fraction = rng.random(len(run_of))
    firsts = np.concatenate([[0], np.cumsum(pieces)[:-1]]).astype(int) if runs else np.zeros(0, int)
    fraction[firsts] = 0.0
    order = np.lexsort((fraction, run_of))
    run_of, fraction = run_of[order], fraction[order]
    starts = runs_start[run_of] + fraction * length[run_of]
    ends = np.empty_like(starts)
    ends[:-1] = starts[1:]
    lasts = np.cumsum(pieces) - 1 if runs else np.zeros(0, int)
    ends[lasts] = runs_end[np.arange(runs)]
    workload = runs_w[run_of]
    still_running = ends >= span
    klass = w["class"][workload].copy()
    demoted = np.zeros(len(klass), dtype=bool)
    demoted[lasts] = rng.random(runs) < 0.3
    klass[demoted & (klass == 1)] = 0
    plan.intervals = {
        "workload": workload,
        "start": starts,
        "end": np.where(still_running, np.nan, ends),
        "gpus": w["gpus"][workload],
        "class": klass,
    }


def _preemption_events(
    plan: YearPlan,
    rng: np.random.Generator,
    victims: np.ndarray,
    cut_at: np.ndarray,
    lost: np.ndarray,
    first_start: np.ndarray,
    ran: np.ndarray,
) -> None:
    """One event per victim: reason, preemptor (a workload that started near the cut)."""
    w = plan.workloads
    reason = rng.choice(len(REASONS), size=len(victims), p=REASON_SHARES)
    started = np.flatnonzero(ran)
    order = started[np.argsort(first_start[started])]
    nearest = np.searchsorted(first_start[order], cut_at[victims]).clip(0, len(order) - 1)
    preemptor = order[nearest]
    preemptor = np.where(preemptor == victims, order[(nearest + 1) % len(order)], preemptor)
    with_preemptor = reason < 2  # preempt and reclaim name the workload they made room for
    plan.preemptions = {
        "victim": victims,
        "at": cut_at[victims],
        "reason": reason,
        "preemptor": np.where(with_preemptor, preemptor, -1),
        "gpus": w["gpus"][victims],
        "lost_gpu_hours": w["gpus"][victims] * lost[victims] / HOUR_S,
    }


def _transitions(
    plan: YearPlan,
    *,
    ran: np.ndarray,
    cancelled: np.ndarray,
    cancel_at: np.ndarray,
    first_start: np.ndarray,
    cut_at: np.ndarray,
    preempted: np.ndarray,
    second_seen: np.ndarray,
    second_start: np.ndarray,
    finished: np.ndarray,
    last_end: np.ndarray,
) -> None:
    """Every state change: submitted, admitted, running, preempted and requeued, ended."""
    w = plan.workloads
    everyone = np.arange(len(w["submit"]))
    parts: list[tuple[np.ndarray, np.ndarray, str, str, str]] = [
        (everyone, w["submit"], "", "pending", "submitted"),
        (everyone[cancelled], cancel_at[cancelled], "pending", "cancelled", "cancelled by user"),
        (everyone[ran], first_start[ran], "pending", "admitted", "admitted"),
        (everyone[ran], first_start[ran], "admitted", "running", "pods running"),
        (everyone[preempted], cut_at[preempted], "running", "preempted", "preempted"),
        (everyone[preempted], cut_at[preempted], "preempted", "pending", "requeued"),
        (everyone[second_seen], second_start[second_seen], "pending", "admitted", "admitted"),
        (everyone[second_seen], second_start[second_seen], "admitted", "running", "pods running"),
    ]
    ok = finished & ~w["failed"]
    bad = finished & w["failed"]
    parts.append((everyone[ok], last_end[ok], "running", "succeeded", "pods succeeded"))
    parts.append((everyone[bad], last_end[bad], "running", "failed", "a pod failed"))
    plan.transitions = {
        "workload": np.concatenate([p[0] for p in parts]),
        "at": np.concatenate([p[1] for p in parts]),
        "from": np.concatenate([np.full(len(p[0]), p[2], dtype=object) for p in parts]),
        "to": np.concatenate([np.full(len(p[0]), p[3], dtype=object) for p in parts]),
        "reason": np.concatenate([np.full(len(p[0]), p[4], dtype=object) for p in parts]),
    }


@dataclass(frozen=True)
class NodeRoom:
    """A node as the packer sees it: its flavor, NVLink domain and the GPU indices free on it."""

    name: str
    flavor: str
    domain: str
    free: tuple[int, ...]


@dataclass(frozen=True)
class Gang:
    """The pods of one running pod set to place: ``pods`` pods of ``per_pod`` GPUs of
    ``flavor``; ``key`` is the caller's (a pod set id)."""

    key: int
    name: str
    flavor: str
    pods: int
    per_pod: int


def pack_gangs(nodes: list[NodeRoom], gangs: list[Gang]) -> dict[int, list[tuple[str, list[int]]]]:
    """Where each gang's pods run: per gang key, (node name, GPU indices) for pod 0, 1, ...

    Whole GPUs, each to one pod (the year's flavors are exclusive), on nodes of the gang's
    flavor. Largest gangs first; a gang goes into one NVLink domain when one has the room
    (the domain with the least room that fits, as a scheduler that keeps domains whole
    would), else across domains; within a domain each pod takes the node with the fewest
    free GPUs that still fit it. ``ValueError`` names the first gang that does not fit."""
    free = {node.name: list(node.free) for node in nodes}
    domains: dict[tuple[str, str], list[str]] = {}
    for node in sorted(nodes, key=lambda n: n.name):
        domains.setdefault((node.flavor, node.domain), []).append(node.name)
    placed: dict[int, list[tuple[str, list[int]]]] = {}
    for gang in sorted(gangs, key=lambda g: (-g.pods * g.per_pod, g.key)):
        mine = [names for (flavor, _), names in domains.items() if flavor == gang.flavor]

        def room(names: list[str], per_pod: int = gang.per_pod) -> int:
            return sum(len(free[name]) // per_pod for name in names)

        whole = [names for names in mine if room(names) >= gang.pods]
        order = [min(whole, key=room)] if whole else sorted(mine, key=room, reverse=True)
        pods: list[tuple[str, list[int]]] = []
        for names in order:
            while len(pods) < gang.pods:
                fits = [name for name in names if len(free[name]) >= gang.per_pod]
                if not fits:
                    break
                name = min(fits, key=lambda n: (len(free[n]), n))
                taken, free[name] = free[name][: gang.per_pod], free[name][gang.per_pod :]
                pods.append((name, taken))
        if len(pods) < gang.pods:
            raise ValueError(
                f"{gang.name}: {gang.pods} pods of {gang.per_pod} {gang.flavor} GPUs do not fit "
                f"in the GPUs left free ({sum(len(free[n]) for ns in mine for n in ns)})"
            )
        placed[gang.key] = pods
    return placed
