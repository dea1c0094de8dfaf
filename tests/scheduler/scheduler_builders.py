"""Builders that read like the cases they build, and the plan invariants of docs/scheduler.md.

Builders produce scenario-format dicts, so every test also goes through the validator;
``snapshots`` draws random valid ones for the property tests.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st

from gpupool.scheduler import plan
from gpupool.scheduler.contracts import Contracts
from gpupool.scheduler.scenario import Scenario, scenario_from_dict
from gpupool.scheduler.types import MILLI, Plan

DAY = "2026-11-29"

CLASSES: list[dict[str, Any]] = [
    {"name": "low", "value": -100, "budget_rate": 0},
    {"name": "normal", "value": 0, "default": True, "budget_rate": 0},
    {"name": "interactive", "value": 500, "preemption_policy": "Never", "budget_rate": 0},
    {"name": "high", "value": 1000, "budget_rate": 1},
]


def at(hhmm: str) -> str:
    """A time on the test day: ``at("09:30")``."""
    return f"{DAY}T{hhmm}:00Z"


def node(
    name: str,
    gpus: int = 8,
    flavor: str = "h100",
    domain: str | None = None,
    cpu: float = 192,
    memory_gb: float = 2048,
    unhealthy: tuple[int, ...] = (),
    cordoned: bool = False,
    foreign: tuple[int, ...] = (),
) -> dict[str, Any]:
    """A node: ``node("n1", gpus=8, domain="d1")``; ``cordoned`` (or NotReady) takes it out;
    ``foreign`` GPUs are held by another scheduler's pods."""
    out = {
        "name": name,
        "flavor": flavor,
        "gpus": gpus,
        "unhealthy_gpus": list(unhealthy),
        "cpu": cpu,
        "memory_gb": memory_gb,
        "domain": domain or name,
    }
    if cordoned:
        out["cordoned"] = True
    if foreign:
        out["foreign_gpus"] = list(foreign)
    return out


def pool(
    count: int, *, prefix: str = "n", domain_size: int | None = None, **options: Any
) -> list[dict[str, Any]]:
    """``count`` alike nodes named n1, n2, ...: ``pool(3)``, ``pool(2, cpu=16)``.

    ``options`` are ``node``'s; with ``domain_size`` the nodes share NVLink domains d1, d2, ...
    of that many nodes each (else each node is its own domain).
    """
    return [
        node(
            f"{prefix}{i}",
            domain=None if domain_size is None else f"d{(i - 1) // domain_size + 1}",
            **options,
        )
        for i in range(1, count + 1)
    ]


def queue(
    name: str,
    deserved: float | None = None,
    capability: float | None = None,
    guarantee: float = 0,
    parent: str = "root",
    flavor: str = "h100",
    **extra: Any,
) -> dict[str, Any]:
    """A queue with one flavor's quota: ``queue("team-a", deserved=8, capability=16)``."""
    out: dict[str, Any] = {"name": name, "parent": parent, "tenant": extra.pop("tenant", name)}
    if deserved is not None:
        out["quota"] = {
            flavor: {
                "guarantee": guarantee,
                "deserved": deserved,
                "capability": deserved if capability is None else capability,
            }
        }
    out.update(extra)
    return out


def workload(
    name: str,
    queue: str = "team-a",
    gpus: int = 8,
    count: int = 1,
    flavor: str | list[str] | None = "h100",
    priority: str = "normal",
    submitted: str = "09:00",
    on: list[tuple[str, list[int]]] | None = None,
    started: str = "08:00",
    protected_s: float = 0,
    **extra: Any,
) -> dict[str, Any]:
    """A pending workload, or a running one when ``on`` gives its pods' nodes and GPUs.

    ``flavor=None`` leaves the flavor out (a CPU-only pod set that may run on any node).
    """
    pod_set: dict[str, Any] = {"count": count, "gpus": gpus}
    if flavor is not None:
        pod_set["flavor"] = flavor
    for key in ("cpu", "memory_gb", "gpu_milli"):
        if key in extra:
            pod_set[key] = extra.pop(key)
    out: dict[str, Any] = {
        "name": name,
        "queue": queue,
        "priority_class": priority,
        "pod_sets": [pod_set],
        "protected_runtime_s": protected_s,
        "state": "pending",
        "submitted_at": at(submitted),
    }
    if on is not None:
        out["state"] = "running"
        out["started_at"] = at(started)
        out["submitted_at"] = at(min(submitted, started))
        out["placement"] = [{"node": n, "gpus": g} for n, g in on]
    out.update(extra)
    return out


def scenario(
    nodes: list[dict[str, Any]],
    queues: list[dict[str, Any]],
    workloads: list[dict[str, Any]],
    now: str = "10:00",
    budgets: list[dict[str, Any]] | None = None,
    policy: dict[str, Any] | None = None,
    history: list[dict[str, Any]] | None = None,
    flavors: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """A whole scenario dict with a root queue and the standard classes."""
    return {
        "now": at(now),
        "policy": policy or {"placement": "gpupool"},
        "flavors": flavors
        or [
            {"name": "h100", "sharing": "exclusive", "gpu_memory_gb": 80, "hourly_price": 2.5},
            {"name": "gb200", "sharing": "exclusive", "gpu_memory_gb": 192, "hourly_price": 6},
            {"name": "l4s", "sharing": "shared", "gpu_memory_gb": 24, "hourly_price": 0.8},
        ],
        "nodes": nodes,
        "queues": [{"name": "root", "parent": None}, *queues],
        "priority_classes": CLASSES,
        "budgets": budgets or [],
        "workloads": workloads,
        "preemption_history": history or [],
    }


@dataclass
class Case:
    """A table-driven case: the snapshot and what the plan must show."""

    name: str
    nodes: list[dict[str, Any]]
    queues: list[dict[str, Any]]
    workloads: list[dict[str, Any]]
    want_admitted: set[str] = field(default_factory=set)
    want_not_admitted: set[str] = field(default_factory=set)
    want_evicted: dict[str, str] = field(default_factory=dict)
    want_reasons: dict[str, str] = field(default_factory=dict)
    budgets: list[dict[str, Any]] = field(default_factory=list)
    policy: dict[str, Any] | None = None
    history: list[dict[str, Any]] = field(default_factory=list)
    now: str = "10:00"
    flavors: list[dict[str, Any]] | None = None

    def load(self) -> Scenario:
        """Validate and load the case's scenario."""
        return scenario_from_dict(
            scenario(
                self.nodes,
                self.queues,
                self.workloads,
                now=self.now,
                budgets=self.budgets,
                policy=self.policy,
                history=self.history,
                flavors=self.flavors,
            )
        )


def run_case(case: Case) -> Plan:
    """Plan the case, check the invariants, and check every ``want``."""
    loaded = case.load()
    result = plan(loaded.snapshot, loaded.policy, loaded.now)
    check_invariants(loaded, result)
    admitted = {a.workload for a in result.admit}
    assert case.want_admitted <= admitted, f"not admitted: {case.want_admitted - admitted}"
    assert not case.want_not_admitted & admitted, f"admitted: {case.want_not_admitted & admitted}"
    evicted = {e.workload: e.reason for e in result.evict}
    assert evicted == case.want_evicted, evicted
    reasons = {p.workload: p.reason for p in result.pending}
    for name, reason in case.want_reasons.items():
        assert reasons.get(name) == reason, (name, reasons.get(name), result.pending)
    return result


def check_invariants(loaded: Scenario, result: Plan) -> None:
    """The invariants every plan keeps (docs/scheduler.md, "Scenario files")."""
    snapshot = loaded.snapshot
    nodes = {n.name: n for n in snapshot.nodes}
    flavors = {f.name: f for f in snapshot.flavors}
    workloads = {w.name: w for w in snapshot.workloads}
    queues = {q.name: q for q in snapshot.queues}
    classes = {c.name: c for c in snapshot.priority_classes}
    contracts = Contracts(snapshot, loaded.policy, loaded.now)
    evicted = {e.workload for e in result.evict}
    admitted = {a.workload: a.placement for a in result.admit}
    assert not evicted & set(admitted)
    for name in admitted:
        assert workloads[name].state == "pending"
    # A grown workload is running, neither admitted nor evicted, and adds its next pods.
    grown = {g.workload: g for g in result.grow}
    assert not grown.keys() & (evicted | set(admitted)), "grown and admitted or evicted"
    for name, growth in grown.items():
        w = workloads[name]
        assert w.state == "running" and w.min_member is not None
        assert growth.backfill_for is None and growth.budget_reservation == 0
        refs = [(i, j) for i, ps in enumerate(w.pod_sets) for j in range(ps.count)]
        added = refs[len(w.placement) : len(w.placement) + len(growth.pod_refs)]
        assert [(r.pod_set, r.index) for r in growth.pod_refs] == added, f"{name} grew out of order"
    pending_names = {p.workload for p in result.pending}
    assert pending_names == {
        w.name for w in snapshot.workloads if w.state == "pending" and w.name not in admitted
    }
    # Occupancy after the plan: running (evicted ones still hold until gone) plus admitted.
    gpu: dict[tuple[str, int], int] = defaultdict(int)
    exclusive_users: dict[tuple[str, int], int] = defaultdict(int)
    cpu: dict[str, int] = defaultdict(int)
    memory: dict[str, int] = defaultdict(int)
    usage: dict[tuple[str, str], int] = defaultdict(int)
    before: dict[tuple[str, str], int] = defaultdict(int)
    left: dict[tuple[str, str], int] = defaultdict(int)  # per leaf queue, once evictions are done
    for w in snapshot.workloads:
        placement = admitted.get(w.name, w.placement if w.state == "running" else ())
        if w.name in grown:
            placement = placement + grown[w.name].placement
            if w.topology == "domain":
                assert len({nodes[p.node].domain for p in placement}) == 1, f"{w.name} spread"
        pod_sets = [ps for ps in w.pod_sets for _ in range(ps.count)]
        if w.name in admitted:
            assert w.gang_minimum <= len(placement) <= w.pod_count, f"{w.name} split"
            if w.topology == "domain":
                assert len({nodes[p.node].domain for p in placement}) == 1
        for pod, pod_set in zip(placement, pod_sets, strict=False):
            n = nodes[pod.node]
            assert not pod_set.flavors or n.flavor in pod_set.flavors
            shared = flavors[n.flavor].sharing == "shared"
            milli = (pod.milli or pod_set.gpu_milli) if shared else MILLI
            assert len(pod.gpus) == pod_set.gpus
            for index in pod.gpus:
                gpu[(pod.node, index)] += milli
                if not shared:
                    exclusive_users[(pod.node, index)] += 1
                if w.name in admitted or (w.name in grown and pod in grown[w.name].placement):
                    assert index not in n.unhealthy_gpus and not n.cordoned
                    assert index not in n.foreign_gpus, "placed on another scheduler's GPU"
            cpu[pod.node] += pod_set.cpu_milli
            memory[pod.node] += pod_set.memory_mib
            amount = milli * len(pod.gpus)
            if w.name not in evicted:
                left[(w.queue, n.flavor)] += amount
            for q in _path(queues, w.queue):
                usage[(q, n.flavor)] += amount
                if w.name not in admitted and (w.name not in grown or pod in w.placement):
                    before[(q, n.flavor)] += amount
    for (name, index), milli in gpu.items():
        assert milli <= MILLI, f"GPU {index} of {name} over capacity"
        assert exclusive_users.get((name, index), 0) <= 1, f"GPU {index} of {name} shared"
    for name, used in cpu.items():
        assert used <= nodes[name].cpu_milli, f"CPU of {name} over capacity"
    for name, used in memory.items():
        assert used <= nodes[name].memory_mib, f"memory of {name} over capacity"
    for (q, flavor), used in usage.items():
        quota = queues[q].quota.get(flavor)
        if quota is not None:
            assert used <= max(quota.capability, before[(q, flavor)]), f"{q} over capability"
    # Growth never borrows: every queue on a grown workload's path stays within its deserved
    # share of what it grew (queues an eviction of the plan frees quota under are left out:
    # the plan does not show the preemptor's reservation that replaces it).
    freeing = {q for e in result.evict for q in _path(queues, workloads[e.workload].queue)}
    for name, growth in grown.items():
        for flavor in {nodes[pod.node].flavor for pod in growth.placement if pod.gpus}:
            for q in _path(queues, workloads[name].queue):
                quota = queues[q].quota.get(flavor)
                if quota is not None and q not in freeing:
                    assert usage[(q, flavor)] <= quota.deserved, f"{name} grew {q} past deserved"
    for eviction in result.evict:
        victim = workloads[eviction.workload]
        assert victim.state == "running"
        assert contracts.protected_until(victim) <= loaded.now, f"{victim.name} protected"
        if eviction.reason == "idle":  # no preemptor: idle past its class's (queue's) timeout
            assert eviction.preemptor is None
            assert contracts.idle_reclaimable(victim), f"{victim.name} not idle long enough"
            continue
        assert eviction.preemptor is not None
        preemptor = workloads[eviction.preemptor]
        assert classes[preemptor.priority_class].preemption_policy != "Never", (
            f"{victim.name} evicted for {preemptor.name}, whose class says Never"
        )
        if eviction.reason == "preempt":
            assert not contracts.standing[preemptor.name].budget_demoted
            victim_value = contracts.standing[victim.name].value
            preemptor_value = contracts.standing[preemptor.name].value
            if victim.backfilled_for == preemptor.name:
                # backfilled onto the preemptor's hold: any queue, no higher priority
                assert victim_value <= preemptor_value, f"{victim.name} is above {preemptor.name}"
                assert contracts.starving(preemptor), f"{preemptor.name} does not starve"
            else:
                assert victim_value < preemptor_value, (
                    f"{victim.name} is not lower than {preemptor.name}"
                )
                assert victim.queue == preemptor.queue
        if eviction.reason == "reclaim":
            assert queues[victim.queue].reclaimable
    _preemptors_fit_on_healthy_gpus(loaded, result)
    _holds_are_kept(loaded, result)
    # Reclaim takes a victim's queue below its deserved share only with its last victim: the
    # queue was above its deserved share before that one left (fair-share reclaim included):
    # what its workloads hold once the plan is applied (admissions counted), plus its largest
    # reclaimed victim. A queue with a preemptor of its own in the plan -- or one still waiting
    # for earlier victims to leave -- also counts that preemptor's reservation, whose flavor
    # the plan does not show, so such queues are left out of this check.
    reserving = {workloads[e.preemptor].queue for e in result.evict if e.preemptor}
    reserving |= {
        workloads[p.workload].queue for p in result.pending if p.reason == "waiting-for-preemption"
    }
    largest: dict[tuple[str, str], int] = defaultdict(int)
    for eviction in result.evict:
        victim = workloads[eviction.workload]
        if eviction.reason != "reclaim" or victim.queue in reserving:
            continue
        held: dict[str, int] = defaultdict(int)
        pod_sets = [ps for ps in victim.pod_sets for _ in range(ps.count)]
        for pod, pod_set in zip(victim.placement, pod_sets, strict=False):
            held[nodes[pod.node].flavor] += len(pod.gpus) * (pod.milli or pod_set.gpu_milli)
        for flavor, amount in held.items():
            key = (victim.queue, flavor)
            largest[key] = max(largest[key], amount)
    for (queue_name, flavor), amount in largest.items():
        quota = queues[queue_name].quota.get(flavor)
        if quota is not None:
            assert left[(queue_name, flavor)] + amount > quota.deserved, (
                f"reclaim took {queue_name} below its deserved {flavor} before its last victim"
            )


def _holds_are_kept(loaded: Scenario, result: Plan) -> None:
    """Nothing is admitted on nodes held for a nominated preemptor (held before anything is
    admitted); an admission that names a holder it backfilled for landed on that holder's
    held nodes, which it may then take back. (A starving workload's hold is made when its
    turn fails, so work admitted before it may share its nodes: the plan cannot tell.)"""
    promised: dict[str, str] = {}
    starving: dict[str, set[str]] = {}
    for pending in result.pending:
        nodes = pending.facts.get("held_nodes")
        if not isinstance(nodes, list):
            continue
        if pending.reason == "waiting-for-preemption":
            promised.update(dict.fromkeys(map(str, nodes), pending.workload))
        elif pending.facts.get("holding_capacity"):
            starving[pending.workload] = set(map(str, nodes))
    for admission in result.admit:
        nodes = {pod.node for pod in admission.placement}
        taken = sorted(nodes & promised.keys())
        assert not taken, f"{admission.workload} took {promised[taken[0]]}'s promised {taken[0]}"
        if admission.backfill_for is not None:
            assert nodes & starving.get(admission.backfill_for, set()), (
                f"{admission.workload} names {admission.backfill_for}, on none of its held nodes"
            )
    # Growth runs after every hold is made: it takes no held node at all.
    held = set(promised).union(*starving.values())
    for growth in result.grow:
        taken = sorted({pod.node for pod in growth.placement} & held)
        assert not taken, f"{growth.workload} grew onto held {taken[0]}"


def _preemptors_fit_on_healthy_gpus(loaded: Scenario, result: Plan) -> None:
    """No eviction unless its preemptor fits on healthy, schedulable GPUs once the victims
    are gone: each preemptor's minimum, and all single-flavor preemptors of a flavor
    together, within the healthy free milli-GPU left after the plan (a necessary condition)."""
    snapshot = loaded.snapshot
    nodes = {n.name: n for n in snapshot.nodes}
    workloads = {w.name: w for w in snapshot.workloads}
    evicted = {e.workload for e in result.evict}
    admitted = {a.workload: a.placement for a in result.admit}
    free: dict[tuple[str, int], int] = {
        (n.name, i): MILLI
        for n in snapshot.nodes
        if not n.cordoned
        for i in range(n.gpus)
        if i not in n.unhealthy_gpus and i not in n.foreign_gpus
    }
    for w in snapshot.workloads:
        placement = admitted.get(w.name, w.placement if w.name not in evicted else ())
        pod_sets = [ps for ps in w.pod_sets for _ in range(ps.count)]
        for pod, pod_set in zip(placement, pod_sets, strict=False):
            for index in pod.gpus:
                if (pod.node, index) in free:
                    free[(pod.node, index)] -= pod.milli or pod_set.gpu_milli
    by_flavor: dict[str, int] = defaultdict(int)
    for (name, _), milli in free.items():
        by_flavor[nodes[name].flavor] += max(milli, 0)
    wanted: dict[str, int] = defaultdict(int)
    for name in sorted({e.preemptor for e in result.evict if e.preemptor}):
        preemptor = workloads[name]
        pods = [ps for ps in preemptor.pod_sets for _ in range(ps.count)]
        first = pods[: preemptor.gang_minimum]
        need = sum(ps.gpus * ps.gpu_milli for ps in first)
        flavors = {f for ps in first for f in ps.flavors}
        assert need <= sum(by_flavor[f] for f in flavors or by_flavor), (
            f"{name} evicts for room it cannot use"
        )
        if len(flavors) == 1:
            wanted[flavors.pop()] += need
    for flavor, need in wanted.items():
        assert need <= by_flavor[flavor], f"preemptors for {flavor} cannot all fit"


def _path(queues: dict[str, Any], name: str) -> list[str]:
    out = [name]
    while queues[out[-1]].parent is not None:
        out.append(queues[out[-1]].parent)
    return out


RANDOM_FLAVORS = ("h100", "l4s")
TIMES = ["06:00", "07:00", "08:00", "09:00", "09:30", "09:50"]


@st.composite
def snapshots(draw: st.DrawFn) -> dict[str, Any]:
    """A valid random scenario: nodes, a two-level queue tree, running and pending work."""
    nodes: list[dict[str, Any]] = []
    for i in range(draw(st.integers(1, 5))):
        flavor = draw(st.sampled_from(RANDOM_FLAVORS))
        gpus = draw(st.integers(0, 8))
        unhealthy = draw(st.lists(st.integers(0, max(gpus - 1, 0)), max_size=2, unique=True))
        nodes.append(
            {
                "name": f"n{i}",
                "flavor": flavor,
                "gpus": gpus,
                "unhealthy_gpus": [u for u in unhealthy if u < gpus],
                "cpu": draw(st.sampled_from([16, 64, 192])),
                "memory_gb": draw(st.sampled_from([64, 512, 2048])),
                "domain": f"d{draw(st.integers(0, 2))}",
            }
        )
    leaves: list[str] = []
    queues: list[dict[str, Any]] = []
    for o in range(draw(st.integers(1, 2))):
        queues.append({"name": f"org{o}", "parent": "root", "tenant": f"org{o}"})
        for leaf in range(draw(st.integers(1, 3))):
            name = f"q{o}{leaf}"
            quota = {}
            for flavor in RANDOM_FLAVORS:
                deserved = draw(st.integers(0, 12))
                quota[flavor] = {
                    "guarantee": 0,
                    "deserved": deserved,
                    "capability": deserved + draw(st.integers(0, 12)),
                }
            queues.append(
                {
                    "name": name,
                    "parent": f"org{o}",
                    "tenant": name,
                    "quota": quota,
                    "reclaimable": draw(st.booleans()),
                    "weight": draw(st.sampled_from([1, 2])),
                    "max_protected_runtime_s": draw(st.sampled_from([None, 1800])),
                }
            )
            leaves.append(name)
    free = {
        n["name"]: [1000 if g not in n["unhealthy_gpus"] else 0 for g in range(n["gpus"])]
        for n in nodes
    }
    cpu_free = {n["name"]: n["cpu"] for n in nodes}
    workloads: list[dict[str, Any]] = []
    for w in range(draw(st.integers(0, 8))):
        target = draw(st.sampled_from(nodes))
        shared = target["flavor"] == "l4s"
        gpus = 1 if shared else draw(st.integers(0, 4))
        milli = draw(st.sampled_from([250, 500, 700])) if shared else 1000
        chosen = [g for g, f in enumerate(free[target["name"]]) if f >= milli][:gpus]
        cpu = draw(st.sampled_from([0, 4, 8]))
        if len(chosen) < gpus or cpu > cpu_free[target["name"]]:
            continue
        for g in chosen:
            free[target["name"]][g] -= milli
        cpu_free[target["name"]] -= cpu
        pod_set: dict[str, Any] = {"count": 1, "gpus": gpus, "flavor": target["flavor"], "cpu": cpu}
        placement: dict[str, Any] = {"node": target["name"], "gpus": chosen}
        if shared:
            pod_set["gpu_milli"] = milli
            placement["milli"] = milli
        started = draw(st.sampled_from(TIMES))
        klass = draw(st.sampled_from([c["name"] for c in CLASSES]))
        running = {
            "name": f"r{w}",
            "queue": draw(st.sampled_from(leaves)),
            "priority_class": klass,
            "pod_sets": [pod_set],
            "state": "running",
            "submitted_at": at(started),
            "started_at": at(started),
            "protected_runtime_s": draw(st.sampled_from([0, 1800, 3600 * 3])),
            "placement": [placement],
        }
        # What the loop tells the core: whether a budgeted admission reserved its window,
        # and a disruption budget's refusal of an eviction (before or after now, 10:00).
        if klass == "high" and draw(st.booleans()):
            running["window_reserved"] = draw(st.booleans())
        refused = draw(st.sampled_from([None, "09:55", "10:30"]))
        if refused is not None:
            running["eviction_refused_until"] = at(refused)
        # An elastic gang running its first pod of up to three (the grow phase may add more).
        lacking = draw(st.integers(0, 2))
        if lacking:
            pod_set["count"] = 1 + lacking
            running["min_member"] = 1
            running["topology"] = draw(st.sampled_from([None, "domain", "preferred"]))
        workloads.append(running)
    # GPUs that fail, and nodes cordoned, under running work (what a cycle sees after it).
    for failed in draw(st.lists(st.sampled_from(nodes), max_size=2, unique_by=lambda n: n["name"])):
        if draw(st.booleans()):
            failed["cordoned"] = True
        elif failed["gpus"]:
            index = draw(st.integers(0, failed["gpus"] - 1))
            failed["unhealthy_gpus"] = sorted({*failed["unhealthy_gpus"], index})
    # GPUs other schedulers' pods hold, taken from those still wholly free.
    for held in draw(st.lists(st.sampled_from(nodes), max_size=2, unique_by=lambda n: n["name"])):
        idle = [
            g
            for g, f in enumerate(free[held["name"]])
            if f == 1000 and g not in held["unhealthy_gpus"]
        ]
        if idle:
            held["foreign_gpus"] = draw(st.lists(st.sampled_from(idle), min_size=1, unique=True))
    for w in range(draw(st.integers(1, 8))):
        flavor = draw(st.sampled_from(RANDOM_FLAVORS))
        shared = flavor == "l4s"
        count = draw(st.integers(1, 3))
        pod_set = {
            "count": count,
            "gpus": 1 if shared else draw(st.integers(0, 8)),
            "flavor": flavor,
            "cpu": draw(st.sampled_from([0, 4, 32])),
        }
        if shared:
            pod_set["gpu_milli"] = draw(st.sampled_from([300, 500, 1000]))
        workloads.append(
            {
                "name": f"p{w}",
                "queue": draw(st.sampled_from(leaves)),
                "priority_class": draw(st.sampled_from([c["name"] for c in CLASSES])),
                "pod_sets": [pod_set],
                "min_member": draw(st.integers(1, count)),
                "topology": draw(st.sampled_from([None, "domain", "preferred"])),
                "protected_runtime_s": draw(st.sampled_from([0, 3600])),
                "submitted_at": at(draw(st.sampled_from(TIMES))),
                "state": "pending",
            }
        )
    budgets = [
        {
            "tenant": leaf,
            "priority_class": "high",
            "gpu_hours": draw(st.sampled_from([0, 50])),
            "used": 0,
        }
        for leaf in leaves
    ]
    policy = {"placement": draw(st.sampled_from(["gpupool", "bestfit"]))}
    if draw(st.booleans()):
        policy["starvation_limit_s"] = 3600
    return scenario(nodes, queues, workloads, budgets=budgets, policy=policy)


@st.composite
def failing_pools(draw: st.DrawFn) -> dict[str, Any]:
    """A full pool of one queue whose GPUs fail (or nodes are cordoned) under running work,
    with urgent work pending: where a victim's GPUs are broken its eviction frees less."""
    nodes = [node(f"n{i}") for i in range(draw(st.integers(1, 3)))]
    workloads: list[dict[str, Any]] = []
    for n in nodes:
        left = list(range(8))
        while left:
            size = min(draw(st.sampled_from([1, 2, 4, 8])), len(left))
            taken, left = left[:size], left[size:]
            workloads.append(
                workload(
                    f"r{len(workloads)}",
                    gpus=size,
                    on=[(n["name"], taken)],
                    started=draw(st.sampled_from(TIMES)),
                    protected_s=draw(st.sampled_from([0, 0, 3 * 3600])),
                )
            )
        if draw(st.booleans()):
            if draw(st.booleans()):
                n["cordoned"] = True
            else:
                n["unhealthy_gpus"] = draw(st.lists(st.integers(0, 7), min_size=1, unique=True))
    for i in range(draw(st.integers(1, 2))):
        workloads.append(
            workload(
                f"u{i}",
                gpus=draw(st.sampled_from([1, 2, 4, 8])),
                count=draw(st.integers(1, 2)),
                priority="high",
            )
        )
    budgets = [{"tenant": "team-a", "priority_class": "high", "gpu_hours": 1000, "used": 0}]
    return scenario(nodes, [queue("team-a", deserved=8 * len(nodes))], workloads, budgets=budgets)
