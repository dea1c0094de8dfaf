"""The working state of one cycle: what its phases read and change (``cycle.py`` runs them).

``Cycle`` is built from the snapshot once per cycle: the contracts' standings, the running
workloads as ``RunningWork`` with what they occupy, the cluster's free resources
(``ClusterState``), the quota tree's usage, the queues' dominant shares, the placer, and
every pending workload as ``PendingWork`` with its flavor assignments. Its methods are the
steps the phases share: try to place a workload (quota, then capacity, then placement, each
answered by a ``Verdict`` when it fails), explain a failure, admit, hold capacity for a
starving workload, reserve a preemptor's place, record evictions. Tentative changes to the
cluster and the quota tree go on a ``Statement`` that the caller commits or discards; what a
committed step decided (an admission, a reservation, an eviction) is then recorded here.
"""

from __future__ import annotations

import itertools
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gpupool.scheduler.contracts import Contracts, Standing
from gpupool.scheduler.explain import (
    IN_ONE_DOMAIN_FACT,
    TOPOLOGY_FACT,
    Verdict,
    flavor_units,
    quota_verdict,
    waiting_verdict,
)
from gpupool.scheduler.fairshare import CPU, MEMORY, DominantShares, gpu_resource
from gpupool.scheduler.fragmentation import PodShape, ShapeDistribution
from gpupool.scheduler.placement import Placer, PodRequest, count_placeable
from gpupool.scheduler.preemption import (
    VICTIM_SEARCHES,
    RunningWork,
    remove_workload,
    victim_preference,
)
from gpupool.scheduler.quota import QuotaTree
from gpupool.scheduler.statement import CanonKey, ClusterState, PlacedPod, Statement
from gpupool.scheduler.types import (
    MIB_PER_GB,
    MILLI,
    Eviction,
    EvictReason,
    IdleAlert,
    PodSetInfo,
    PolicyInfo,
    Snapshot,
    WorkloadInfo,
)

MAX_FLAVOR_ASSIGNMENTS = 16
RETRYABLE = frozenset({"quota", "capacity", "fragmentation", "topology", "behind"})


_SHAPES: dict[tuple[int, int, int, int], PodShape] = {}


def pod_shape(pod_set: PodSetInfo, shared: bool) -> PodShape:
    """The node-level shape of one pod of a pod set (interned: equal shapes are one object)."""
    milli = pod_set.gpu_milli if shared and pod_set.gpus else MILLI
    key = (pod_set.gpus, milli, pod_set.cpu_milli, pod_set.memory_mib)
    shape = _SHAPES.get(key)
    if shape is None:
        shape = _SHAPES.setdefault(key, PodShape(*key))
    return shape


@dataclass(slots=True)
class Assignment:
    """One choice of flavor per pod set: the pods to place and the quota they need."""

    pods: list[PodRequest]
    need: dict[str, int]
    vector: dict[str, int]


@dataclass(slots=True, eq=False)
class PendingWork:
    """A pending workload as the cycle sees it (compared by identity)."""

    name: str
    info: WorkloadInfo
    standing: Standing
    rank: tuple[int, float, str]
    assignments: list[Assignment]
    minimum: int = 1
    verdict: Verdict | None = None
    schedulable: bool = True
    victims: list[str] = field(default_factory=list)


def prefix_need(pods: list[PodRequest], count: int) -> dict[str, int]:
    """Milli-GPU per flavor of the first ``count`` pods of a gang."""
    need: dict[str, int] = {}
    for pod in pods[:count]:
        need[pod.flavor] = need.get(pod.flavor, 0) + pod.shape.gpu_milli_total
    return need


class Cycle:
    """The state one cycle works on, shared by its phases."""

    def __init__(self, snapshot: Snapshot, policy: PolicyInfo, now: float) -> None:
        self.snapshot = snapshot
        self.policy = policy
        self.now = now
        self.contracts = Contracts(snapshot, policy, now)
        self.flavors = {flavor.name: flavor for flavor in snapshot.flavors}
        self.queues = {queue.name: queue for queue in snapshot.queues}
        self.nodes = {node.name: node for node in snapshot.nodes}
        self.running: dict[str, RunningWork] = {}
        self.shared_flavors = {f.name for f in snapshot.flavors if f.sharing == "shared"}
        # What each flavor's quantities count in the sentences: MIG instances, else GPUs.
        self.units = flavor_units(snapshot.flavors)
        self._shape_counts: Counter[tuple[str, PodShape]] = Counter()
        self._queue_usage: dict[str, tuple[dict[str, int], int, int]] = {}
        occupied = self._occupancy()
        self.cluster = ClusterState(snapshot.nodes, occupied)
        self._empty_classes: dict[str, dict[CanonKey, int]] | None = None
        self._empty: ClusterState | None = None
        self._largest: dict[str, int] | None = None
        # Per flavor: its domains' signatures when last measured, and the most free milli-GPU
        # inside one of them then (``free_in_one_domain``).
        self._in_one_domain: dict[str, tuple[tuple[tuple[CanonKey, ...], ...], int]] = {}
        # (flavor, allowed nodes) -> (allowed nodes of the flavor, their healthy GPUs): pods
        # of one set of constraints share one frozenset, looked up once a cycle
        self._allowed_capacity: dict[tuple[str, frozenset[str]], tuple[int, int]] = {}
        pool: dict[str, int] = defaultdict(int)
        # What the pool holds once its cordons end (a cordon, a NotReady node, passes) and
        # other schedulers' pods leave: what "never fits" is judged against, not the GPUs
        # schedulable this cycle.
        self._uncordoned: dict[str, int] = defaultdict(int)
        cpu = memory = 0
        for node in snapshot.nodes:
            pool[node.flavor] += node.healthy_gpus * MILLI
            self._uncordoned[node.flavor] += node.sound_gpus * MILLI
            if not node.cordoned:
                cpu += node.cpu_milli
                memory += node.memory_mib
        self.quota = QuotaTree(snapshot.queues, pool)
        capacity = {gpu_resource(flavor): amount for flavor, amount in pool.items()}
        capacity[CPU] = cpu
        capacity[MEMORY] = memory
        self.shares = DominantShares(
            capacity,
            {q.name: q.weight for q in snapshot.queues},
            {q.name: q.parent for q in snapshot.queues},
        )
        for queue_name, (gpus, cpu_used, memory_used) in sorted(self._queue_usage.items()):
            vector = {gpu_resource(flavor): amount for flavor, amount in gpus.items()}
            vector[CPU] = cpu_used
            vector[MEMORY] = memory_used
            self.shares.add(queue_name, vector)
            for flavor, amount in gpus.items():
                self.quota.add(queue_name, flavor, amount)
        self.placer = Placer(self.cluster, self._distributions(), policy.placement)
        self.any_node_flavors = self._any_node_flavors()
        self.pending: dict[str, PendingWork] = {}
        self._assignment_cache: dict[tuple[PodSetInfo, ...], list[Assignment]] = {}
        for workload in snapshot.workloads:
            if workload.state == "pending":
                standing = self.contracts.standing[workload.name]
                self.pending[workload.name] = PendingWork(
                    name=workload.name,
                    info=workload,
                    standing=standing,
                    rank=(-standing.value, workload.submitted_at, workload.name),
                    assignments=self._assignments(workload),
                    minimum=workload.gang_minimum,
                )
        self.running_by_queue: dict[str, list[RunningWork]] = defaultdict(list)
        for running in sorted(
            (r for r in self.running.values() if r.evictable), key=lambda r: r.order
        ):
            self.running_by_queue[running.info.queue].append(running)
        self.all_running_by_queue: dict[str, list[RunningWork]] = defaultdict(list)
        for running in self.running.values():
            self.all_running_by_queue[running.info.queue].append(running)
        self.queue_ordinal = {name: index for index, name in enumerate(sorted(self.queues))}
        self.leaves_under: dict[str, list[str]] = defaultdict(list)
        for name in sorted(self.queues):
            if self.quota.is_leaf(name):
                for ancestor in self.quota.path[name]:
                    self.leaves_under[ancestor].append(name)
        self.by_queue: dict[str, list[PendingWork]] = defaultdict(list)
        for work in sorted(self.pending.values(), key=lambda w: w.rank):
            self.by_queue[work.info.queue].append(work)
        self.admitted: dict[str, list[PlacedPod]] = {}
        self.backfilled: dict[str, str] = {}  # admitted by backfill -> the holder it may evict
        # Running elastic gangs grown by the grow phase -> the pods each added (pod-set order).
        self.grown: dict[str, list[PlacedPod]] = {}
        # Budgets as this cycle spends them: left per (tenant, class), and who reserved what.
        self.budget_left: dict[tuple[str, str], float] = dict(self.contracts.budget)
        self.budget_spent: dict[tuple[str, str], list[tuple[str, float]]] = defaultdict(list)
        # What each admission reserved of its budget as it was admitted (none: nothing).
        self.budget_reserved: dict[str, float] = {}
        self.evicted: dict[str, Eviction] = {}
        self.idle_alerts: list[IdleAlert] = []  # running work idle past its alert timeout
        self.waiting: set[str] = set()
        # Running work backfilled onto a hold, by holder (in preference order), and pending
        # preemptors whose victims are still leaving, with those victims (by name).
        self._backfilled_for: dict[str, list[RunningWork]] = defaultdict(list)
        self.leaving: dict[str, list[RunningWork]] = defaultdict(list)
        backfilled = [r for r in self.running.values() if r.info.backfilled_for is not None]
        for running in sorted(backfilled, key=lambda r: (r.order, r.name)):
            self._backfilled_for[running.info.backfilled_for or ""].append(running)
        leaving = [r for r in self.running.values() if r.info.evicting_for in self.pending]
        for running in sorted(leaving, key=lambda r: r.name):
            self.leaving[running.info.evicting_for or ""].append(running)
        self.start_classes: dict[str, dict[CanonKey, int]] = {}
        self.start_free: dict[str, tuple[int, int, int]] = {}
        # Per leaf queue with pending work, per flavor of its quota: the room its path allowed
        # once the promises were kept, before any other admission (``remember_quota_room``);
        # None until allocate remembers it.
        self.start_room: dict[str, dict[str, int]] | None = None
        self._failed: dict[tuple[object, ...], tuple[int, int, Verdict]] = {}
        self._totals: dict[tuple[int, int], list[tuple[str, int, int, int]]] = {}
        self._minimum_needs: dict[tuple[int, int], dict[str, int]] = {}
        # Per (queue owning a deserved share, flavor): what of it is lent and why it is not
        # taken back (explanations, ``cycle.lent_facts``).
        self.lent_memo: dict[tuple[str, str], dict[str, object]] = {}
        self.protected_memo: dict[tuple[str, str], float | None] = {}
        self.over_share: dict[str, list[str]] = {}  # per flavor, leaves above their share
        # Per (queue, a need's identity): the queue owning the share it falls within, and the
        # flavor it contests (("", "") when none).
        self.share_of: dict[tuple[str, int], tuple[str, str]] = {}

    # -- building ----------------------------------------------------------------------------

    def _occupancy(self) -> dict[str, tuple[dict[int, int], int, int]]:
        """Record running workloads, what they occupy on each node, and their pod shapes."""
        # Per node: [milli-GPU used per GPU index, milli-CPU used, MiB used], one lookup a pod.
        used_on: dict[str, list[Any]] = {}
        node_flavor = {name: node.flavor for name, node in self.nodes.items()}
        shared = self.shared_flavors
        queue_usage = self._queue_usage
        evictable_at = self.contracts.evictable
        standing = self.contracts.standing
        # Pods per (flavor, shape), keyed by the interned shape's id: hashing a PodShape runs
        # its Python-level __hash__, which once per running pod was a tenth of this loop.
        # First-seen order is kept, so ``_shape_counts`` ends up exactly as if keyed by shape.
        shape_pods: dict[tuple[str, int], list[Any]] = {}
        running_of = self.running
        now = self.now
        by_checkpoint = VICTIM_SEARCHES[self.policy.victim_search].counts_checkpoints
        for workload in self.snapshot.workloads:
            if workload.state != "running":
                continue
            pods: list[PlacedPod] = []
            need: dict[str, int] = {}
            cpu_total = memory_total = 0
            placements = workload.placement
            first = 0
            for set_index, pod_set in enumerate(workload.pod_sets):
                shape_flavor, shape = "", None
                tally: list[Any] = []
                for index, placement in enumerate(placements[first : first + pod_set.count]):
                    node = placement.node
                    flavor = node_flavor[node]
                    if shape is None or flavor != shape_flavor:
                        shape_flavor, shape = flavor, pod_shape(pod_set, flavor in shared)
                        tally = shape_pods.setdefault((flavor, id(shape)), [flavor, shape, 0])
                    tally[2] += 1
                    pods.append(PlacedPod(node, placement.gpus, shape, set_index, index))
                    milli = shape.milli
                    need[flavor] = need.get(flavor, 0) + shape.gpus * milli
                    cpu_total += shape.cpu_milli
                    memory_total += shape.memory_mib
                    used = used_on.get(node)
                    if used is None:
                        used = used_on[node] = [{}, 0, 0]
                    used[1] += shape.cpu_milli
                    used[2] += shape.memory_mib
                    gpus = used[0]
                    for index in placement.gpus:
                        gpus[index] = gpus.get(index, 0) + milli
                first += pod_set.count
            usage = queue_usage.get(workload.queue)
            if usage is None:
                usage = queue_usage[workload.queue] = ({}, 0, 0)
            gpus_by_flavor = usage[0]
            for flavor, amount in need.items():
                gpus_by_flavor[flavor] = gpus_by_flavor.get(flavor, 0) + amount
            queue_usage[workload.queue] = (
                gpus_by_flavor,
                usage[1] + cpu_total,
                usage[2] + memory_total,
            )
            evictable = evictable_at(workload)
            value = standing[workload.name].value
            running = RunningWork(workload.name, workload, value, pods, need, evictable)
            if evictable:
                running.order = victim_preference(
                    value,
                    workload.started_at or 0.0,
                    sum(need.values()),
                    workload.name,
                    now,
                    workload.last_checkpoint_at if by_checkpoint else None,
                )
            running_of[workload.name] = running
        counts = self._shape_counts
        for flavor, shape, count in shape_pods.values():
            counts[(flavor, shape)] += count
        return {node: (used[0], used[1], used[2]) for node, used in used_on.items()}

    def _distributions(self) -> dict[str, ShapeDistribution]:
        """Per flavor, the popularity of pod shapes among running and pending work."""
        counts = self._shape_counts
        shared = self.shared_flavors
        for workload in self.snapshot.workloads:
            if workload.state == "pending":
                for pod_set in workload.pod_sets:
                    for flavor in pod_set.flavors:
                        counts[(flavor, pod_shape(pod_set, flavor in shared))] += pod_set.count
        by_flavor: dict[str, Counter[PodShape]] = defaultdict(Counter)
        for (flavor, shape), count in counts.items():
            by_flavor[flavor][shape] += count
        return {flavor: ShapeDistribution.from_counts(c) for flavor, c in by_flavor.items()}

    def _any_node_flavors(self) -> tuple[str, ...]:
        """Flavors a CPU-only pod set without a flavor may use: CPU-only nodes, then cheapest."""
        gpus: dict[str, int] = defaultdict(int)
        for node in self.snapshot.nodes:
            gpus[node.flavor] += node.gpus
        return tuple(
            sorted(
                gpus,
                key=lambda f: (gpus[f] > 0, self.flavors[f].hourly_price, f),
            )
        )

    def _assignments(self, workload: WorkloadInfo) -> list[Assignment]:
        """The workload's flavor assignments, most preferred first (shared by equal gangs)."""
        cached = self._assignment_cache.get(workload.pod_sets)
        if cached is None:
            cached = self._assignment_cache[workload.pod_sets] = self._build_assignments(workload)
        return cached

    def _build_assignments(self, workload: WorkloadInfo) -> list[Assignment]:
        choices = itertools.islice(
            itertools.product(
                *(pod_set.flavors or self.any_node_flavors for pod_set in workload.pod_sets)
            ),
            MAX_FLAVOR_ASSIGNMENTS,
        )
        result: list[Assignment] = []
        for flavors in choices:
            pods: list[PodRequest] = []
            need: dict[str, int] = defaultdict(int)
            vector: dict[str, int] = defaultdict(int)
            for set_index, (pod_set, flavor) in enumerate(
                zip(workload.pod_sets, flavors, strict=True)
            ):
                shape = pod_shape(pod_set, self.flavors[flavor].sharing == "shared")
                allowed = pod_set.allowed_nodes
                pods.extend(
                    PodRequest(shape, flavor, set_index, i, allowed) for i in range(pod_set.count)
                )
                need[flavor] += shape.gpu_milli_total * pod_set.count
                vector[gpu_resource(flavor)] += shape.gpu_milli_total * pod_set.count
                vector[CPU] += shape.cpu_milli * pod_set.count
                vector[MEMORY] += shape.memory_mib * pod_set.count
            result.append(Assignment(pods, dict(need), dict(vector)))
        return result

    # -- attempts ----------------------------------------------------------------------------

    def try_place(
        self, work: PendingWork, statement: Statement
    ) -> tuple[Assignment, list[PlacedPod]] | Verdict:
        """Quota, then capacity, then placement, for each flavor assignment in turn.

        On success the pods are placed and charged on ``statement`` (not committed).
        """
        first: Verdict | None = None
        info = work.info
        for assignment in work.assignments:
            pods = assignment.pods
            shortfall = self.quota.check(info.queue, assignment.need)
            # An elastic gang (min_member < pods) takes as many pods as its quota allows.
            count = len(pods)
            while shortfall is not None and count > work.minimum:
                count -= 1
                if self.quota.check(info.queue, prefix_need(pods, count)) is None:
                    shortfall, pods = None, pods[:count]
            if shortfall is not None:
                first = first or quota_verdict(shortfall)
                continue
            verdict = self.capacity_verdict(work, assignment)
            if verdict is not None:
                first = first or verdict
                continue
            memo = (id(assignment), len(pods), work.minimum, info.topology)
            cached = self._failed.get(memo)
            if cached and cached[:2] == (self.cluster.generation, len(self.cluster.held)):
                # The same gang already failed on this (or a roomier) state: same answer,
                # told about this workload's queue and today's free count.
                flavor = str(cached[2].facts.get("flavor", ""))
                facts = {
                    **cached[2].facts,
                    "queue": info.queue,
                    "free_gpus": self.cluster.free_gpu[flavor] / MILLI,
                }
                if TOPOLOGY_FACT in facts:
                    facts[IN_ONE_DOMAIN_FACT] = self.free_in_one_domain(flavor) / MILLI
                first = first or Verdict(cached[2].reason, facts)
                continue
            trial = statement.child()
            placed = None
            if self.placer.may_fit(pods, work.minimum):
                placed = self.placer.place(trial, pods, work.minimum, info.topology)
            if placed is None:
                trial.discard()
                verdict = self.placement_verdict(work, assignment, statement)
                self._failed[memo] = (self.cluster.generation, len(self.cluster.held), verdict)
                first = first or verdict
                continue
            trial.charge(info.queue, self._need_of(placed))
            trial.commit()
            return assignment, placed
        if first is None:
            return Verdict("capacity", {"queue": info.queue, "resource": "node", "no_nodes": True})
        if first.reason == "capacity" and not any(p.flavors for p in info.pod_sets):
            return self._any_node_verdict(first)
        return first

    def _any_node_verdict(self, verdict: Verdict) -> Verdict:
        """A CPU-only workload may run on any node: say so, with the most free on one flavor."""
        resource = str(verdict.facts.get("resource", "cpu"))
        free_of = {"cpu": self.cluster.free_cpu, "memory": self.cluster.free_memory}.get(resource)
        facts = {**verdict.facts, "any_node": True}
        if free_of is not None and self.any_node_flavors:
            best = max(self.any_node_flavors, key=lambda f: (free_of[f], f))
            scale = MILLI if resource == "cpu" else MIB_PER_GB
            facts["flavor"], facts["free"] = best, free_of[best] / scale
        return Verdict("capacity", facts)

    def _need_of(self, placed: list[PlacedPod]) -> dict[str, int]:
        need: dict[str, int] = defaultdict(int)
        for pod in placed:
            need[self.nodes[pod.node].flavor] += pod.shape.gpu_milli_total
        return dict(need)

    def larger_than_any_node(self, assignment: Assignment, minimum: int) -> Verdict | None:
        """A pod of the gang's minimum that no node's healthy GPUs could hold even empty,
        its cordon ended: ``capacity`` with the largest pod a node of its flavor can hold
        (not fragmentation: freeing GPUs elsewhere never helps). A pod only a cordoned node
        could hold waits for the cordon's end instead."""
        largest = self._largest_node_gpus()
        gang = assignment.pods[: max(minimum, 1)]
        restricted = self._outside_allowed_nodes(gang)
        if restricted is not None:
            return restricted
        for pod in gang:
            most = largest.get(pod.flavor, 0)
            if pod.shape.gpus > most:
                facts: dict[str, object] = {
                    "flavor": pod.flavor,
                    "resource": "gpu",
                    "asked_pod_gpus": pod.shape.gpus,
                    "largest_pod_gpus": most,
                    "never_fits": True,
                }
                return Verdict("capacity", facts)
        return None

    def _outside_allowed_nodes(self, pods: Sequence[PodRequest]) -> Verdict | None:
        """Pods restricted to some nodes (node selector, required affinity, tolerations:
        DESIGN section 4) where no node of their flavor is allowed, or the allowed nodes'
        healthy GPUs, even idle, cannot hold them: ``capacity``, never fits (not a place in
        line: freeing other nodes never helps)."""
        asked: dict[tuple[str, frozenset[str]], int] = defaultdict(int)
        for pod in pods:
            if pod.allowed is not None:
                asked[(pod.flavor, pod.allowed)] += pod.shape.gpus
        for (flavor, allowed), gpus in sorted(asked.items(), key=lambda i: (i[0][0], -i[1])):
            count, healthy = self._allowed_capacity_of(flavor, allowed)
            facts: dict[str, object] = {
                "flavor": flavor,
                "resource": "node",
                "allowed_nodes": count,
                "never_fits": True,
            }
            if not count:
                return Verdict("capacity", facts)
            if gpus > healthy:
                facts.update(resource="gpu", asked=gpus, allowed_gpus=healthy)
                return Verdict("capacity", facts)
        return None

    def _allowed_capacity_of(self, flavor: str, allowed: frozenset[str]) -> tuple[int, int]:
        """How many of the ``allowed`` nodes are of ``flavor``, and their healthy GPUs (by
        name through ``self.nodes``: not a walk of every node for each restricted pod)."""
        key = (flavor, allowed)
        known = self._allowed_capacity.get(key)
        if known is None:
            count = healthy = 0
            for name in allowed:
                node = self.nodes.get(name)
                if node is not None and node.flavor == flavor:
                    count += 1
                    healthy += node.sound_gpus
            known = self._allowed_capacity[key] = (count, healthy)
        return known

    def _largest_node_gpus(self) -> dict[str, int]:
        """Per flavor, the most healthy GPUs one node has, cordoned or not, other schedulers'
        included."""
        if self._largest is None:
            self._largest = {}
            for node in self.snapshot.nodes:
                self._largest[node.flavor] = max(self._largest.get(node.flavor, 0), node.sound_gpus)
        return self._largest

    def larger_than_any_domain(
        self, need: Mapping[str, int], topology: str | None
    ) -> Verdict | None:
        """A gang that must sit in one NVLink domain (``topology: domain``: its minimum) and
        asks more GPUs of a flavor than its largest domain holds, even idle, its cordons ended
        and others' pods gone: ``topology``, never fits (DESIGN 3: it could be placed were its
        domain requirement dropped -- the pool and its nodes are checked first -- but no single
        NVLink domain holds it; without ``never_fits`` it would wait in line for ever, "no
        single NVLink domain holds its pods")."""
        if topology != "domain":
            return None
        largest = self.cluster.largest_domain_gpus()
        for flavor, amount in sorted(need.items()):
            most = largest.get(flavor, 0)
            if amount > most * MILLI:
                facts: dict[str, object] = {
                    "flavor": flavor,
                    "resource": "gpu",
                    "asked": amount / MILLI,
                    "largest_domain_gpus": most,
                    "never_fits": True,
                }
                return Verdict("topology", facts)
        return None

    def larger_than_pool(self, need: Mapping[str, int]) -> Verdict | None:
        """A request larger than the pool's healthy GPUs of a flavor, even when idle and its
        cordons ended (work that only cordons keep out waits, with its place in line)."""
        for flavor, amount in sorted(need.items()):
            if amount > self._uncordoned.get(flavor, 0):
                facts: dict[str, object] = {
                    "flavor": flavor,
                    "resource": "gpu",
                    "asked": amount / MILLI,
                    "free": self.cluster.free_gpu[flavor] / MILLI,
                    # The pool's size once cordons end and others' pods leave: why never.
                    "healthy": self._uncordoned.get(flavor, 0) / MILLI,
                    "never_fits": True,
                }
                return Verdict("capacity", facts)
        return None

    def capacity_verdict(self, work: PendingWork, assignment: Assignment) -> Verdict | None:
        """Not enough free GPUs, CPU or memory of a flavor in the whole pool."""
        memo = (id(assignment), work.minimum)
        asked = self._totals.get(memo)
        if asked is None:
            totals: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
            for pod in assignment.pods[: work.minimum]:
                entry = totals[pod.flavor]
                entry[0] += pod.shape.gpu_milli_total
                entry[1] += pod.shape.cpu_milli
                entry[2] += pod.shape.memory_mib
            asked = self._totals[memo] = [
                (f, totals[f][0], totals[f][1], totals[f][2]) for f in sorted(totals)
            ]
        cluster = self.cluster
        for flavor, gpu, cpu, memory in asked:
            if (
                gpu <= cluster.free_gpu[flavor]
                and cpu <= cluster.free_cpu[flavor]
                and memory <= cluster.free_memory[flavor]
            ):
                continue
            wanted = (gpu, cpu, memory)
            now_free = (
                cluster.free_gpu[flavor],
                cluster.free_cpu[flavor],
                cluster.free_memory[flavor],
            )
            start = self.start_free.get(flavor, now_free)
            for index, resource in enumerate(("gpu", "cpu", "memory")):
                if wanted[index] > now_free[index]:
                    scale = (MILLI, MILLI, MIB_PER_GB)[index]
                    facts: dict[str, object] = {
                        "queue": work.info.queue,
                        "flavor": flavor,
                        "resource": resource,
                        "asked": wanted[index] / scale,
                        "free": now_free[index] / scale,
                    }
                    if wanted[index] > start[index]:
                        return Verdict("capacity", facts)
                    return self._behind(work, facts)
        return None

    def _behind(self, work: PendingWork, facts: dict[str, object]) -> Verdict:
        facts = {**facts, "queue": work.info.queue}
        flavor = facts.get("flavor")
        holder = next(
            (
                name
                for name, nodes in self.cluster.holds.items()
                if name != work.name and any(self.nodes[node].flavor == flavor for node in nodes)
            ),
            None,
        )
        if holder is not None:
            facts["held_for"] = holder
            if holder in self.cluster.promised:
                facts["held_because"] = "nominated"
            else:
                facts["held_because"] = "starving"
                facts["starving_since"] = self.contracts.starving_since(self.pending[holder].info)
        return Verdict("behind", facts)

    def placement_verdict(
        self, work: PendingWork, assignment: Assignment, statement: Statement
    ) -> Verdict:
        """Enough free capacity in total, but no placement: topology, behind or fragments."""
        info = work.info
        pods = assignment.pods
        flavor = pods[0].flavor if pods else ""
        facts: dict[str, object] = {
            "queue": info.queue,
            "flavor": flavor,
            "pods": len(pods),
            "minimum": work.minimum,
            "free_gpus": self.cluster.free_gpu[flavor] / MILLI,
        }
        if info.topology == "domain":
            facts[TOPOLOGY_FACT] = "domain"
            facts[IN_ONE_DOMAIN_FACT] = self.free_in_one_domain(flavor) / MILLI
            trial = statement.child()
            spread = self.placer.place(trial, pods, work.minimum, None)
            trial.discard()
            if spread is not None:
                return Verdict("topology", facts)
        by_flavor: dict[str, list[PodShape]] = defaultdict(list)
        for pod in pods:
            by_flavor[pod.flavor].append(pod.shape)
        at_start = sum(
            count_placeable(self.start_classes.get(f, {}), shapes, self.placer, f)
            for f, shapes in by_flavor.items()
        )
        if at_start >= work.minimum:
            return self._behind(work, facts)
        facts["largest_placeable"] = self.placer.largest_placeable(statement, pods)
        shares = {pod.shape.milli for pod in pods}
        if len(shares) == 1 and (share := shares.pop()) < MILLI:
            facts["gpu_share"] = share / MILLI  # each pod asks this much of one GPU
        return Verdict("fragmentation", facts)

    def free_in_one_domain(self, flavor: str) -> int:
        """The most free milli-GPU of the flavor inside one NVLink domain now (held nodes
        counted, as in ``free_gpu``): what a gang bound to one domain could use. Measured
        again only when the flavor's set of domain signatures changed (kept here, the same
        key objects mean the same signatures), not per workload."""
        by_signature = self.cluster.domains(flavor)
        known = self._in_one_domain.get(flavor)
        if (
            known is not None
            and len(known[0]) == len(by_signature)
            and all(old is new for old, new in zip(known[0], by_signature, strict=True))
        ):
            return known[1]
        most = max((sum(sum(key[0]) for key in signature) for signature in by_signature), default=0)
        self._in_one_domain[flavor] = (tuple(by_signature), most)
        return most

    def snapshot_start(self) -> None:
        """Remember free capacity before any admission (to tell ``capacity`` from ``behind``)."""
        self.start_classes = self.cluster.class_counts()
        self.start_free = {
            flavor: (
                self.cluster.free_gpu[flavor],
                self.cluster.free_cpu[flavor],
                self.cluster.free_memory[flavor],
            )
            for flavor in self.cluster.free_gpu
        }

    def remember_quota_room(self) -> None:
        """Remember each queue's quota room before allocate's admissions (after the promises
        are kept), to tell ``quota`` from ``behind`` as free capacity tells ``capacity`` from
        ``behind`` (``cycle.pending_explanations``)."""
        quota = self.quota
        self.start_room = {
            queue: {flavor: quota.available(queue, flavor) for flavor in quota.queues[queue].quota}
            for queue in self.by_queue
        }

    def admit(
        self,
        work: PendingWork,
        assignment: Assignment,
        placed: list[PlacedPod],
        backfill_for: str | None = None,
    ) -> None:
        """Record an admission (the statement holding it is committed by the caller), and the
        starving workload whose held capacity backfill gave it, if any."""
        self.admitted[work.name] = placed
        reserved = self.spend_budget(work)
        if reserved:
            self.budget_reserved[work.name] = reserved
        if backfill_for is not None:
            self.backfilled[work.name] = backfill_for
        vector = assignment.vector
        if len(placed) < len(assignment.pods):  # an elastic gang took fewer pods
            vector = defaultdict(int)
            for pod in placed:
                vector[gpu_resource(self.nodes[pod.node].flavor)] += pod.shape.gpu_milli_total
                vector[CPU] += pod.shape.cpu_milli
                vector[MEMORY] += pod.shape.memory_mib
        self.shares.add(work.info.queue, vector)
        work.verdict = None

    def hold_for(
        self, work: PendingWork, assignment: Assignment, statement: Statement
    ) -> list[str] | None:
        """Hold the nodes closest to fitting the starving gang on ``statement`` -- inside one
        NVLink domain for a ``domain`` gang -- and return them; None (and nothing held) if
        the gang could not fit even on the empty pool (in one domain, for a ``domain``
        gang)."""
        by_flavor: dict[str, list[PodShape]] = defaultdict(list)
        for pod in assignment.pods:
            by_flavor[pod.flavor].append(pod.shape)
        if self._empty_classes is None:
            self._empty_classes = self._empty_cluster().class_counts()
        held = self.cluster.held
        nodes: list[str] = []
        if work.info.topology == "domain":
            domain = self._domain_to_hold(work, assignment)
            if domain is None:
                return None
            cluster = self.cluster
            members = cluster.domain_nodes[(assignment.pods[0].flavor, domain)]
            free = sorted(
                (n for n in members if n not in held),
                key=lambda n: (-sum(cluster.state[n].gpu_free_milli), n),
            )
            nodes = free[: len(assignment.pods)]
        else:
            healthy = sum(
                count_placeable(self._empty_classes.get(f, {}), shapes, self.placer, f)
                for f, shapes in by_flavor.items()
            )
            if healthy < work.minimum:
                return None
            for pod in assignment.pods:
                classes = self.cluster.classes.get(pod.flavor, {})
                # The node closest to fitting: most free GPUs first (then a fixed order).
                for key in sorted(classes, key=lambda k: (-sum(k[0]), k)):
                    name = next((n for n in classes[key] if n not in held and n not in nodes), None)
                    if name is not None:
                        nodes.append(name)
                        break
        statement.hold(work.name, nodes)
        return nodes

    def _empty_cluster(self) -> ClusterState:
        """The pool with nothing running: its healthy capacity (built once, when needed)."""
        if self._empty is None:
            self._empty = ClusterState(self.snapshot.nodes)
        return self._empty

    def _domain_to_hold(self, work: PendingWork, assignment: Assignment) -> str | None:
        """The NVLink domain a starving ``domain`` gang holds: of the domains whose healthy
        nodes could hold its minimum when empty, the one with the most free GPUs now (not
        counting held nodes), then by name."""
        pods = assignment.pods
        if not pods or any(pod.flavor != pods[0].flavor for pod in pods):
            return None
        flavor = pods[0].flavor
        cluster = self.cluster
        empty = self._empty_cluster()
        shapes = [pod.shape for pod in pods]
        best: tuple[int, str] | None = None
        for (of, domain), members in sorted(cluster.domain_nodes.items()):
            if of != flavor:
                continue
            classes: dict[CanonKey, int] = defaultdict(int)
            for name in members:
                classes[empty.canon[name]] += 1
            if count_placeable(classes, shapes, self.placer, flavor) < work.minimum:
                continue
            free = sum(
                sum(cluster.state[n].gpu_free_milli) for n in members if n not in cluster.held
            )
            if best is None or (-free, domain) < best:
                best = (-free, domain)
        return None if best is None else best[1]

    def hold_start(self, work: PendingWork) -> float | None:
        """The earliest time a holder could start on its held nodes: when the running work
        there expected to end first has freed, together with what is free now, as many GPUs
        as its gang's minimum asks. None when that depends on work with no expected end.
        (Counting GPUs in total over the held nodes can only make the answer earlier, which
        is the safe side for backfill.)"""
        nodes = self.cluster.holds.get(work.name, [])
        if not work.assignments:
            return None
        need = sum(self.minimum_need(work).values())
        free = sum(sum(self.cluster.state[node].gpu_free_milli) for node in nodes)
        if free >= need:
            return self.now
        held = set(nodes)
        leaving: list[tuple[float, int]] = []
        for running in self.running.values():
            freed = sum(
                len(self.cluster.usable(pod.node, pod.gpus) or ()) * pod.shape.milli
                for pod in running.pods
                if pod.node in held
            )
            if not freed:
                continue
            info = running.info
            if info.expected_runtime_s is None or info.started_at is None:
                return None
            leaving.append((info.started_at + info.expected_runtime_s, freed))
        for end, freed in sorted(leaving):
            free += freed
            if free >= need:
                return max(end, self.now)
        return None

    def backfilled_on_hold(self, work: PendingWork) -> list[RunningWork]:
        """Running work backfill placed on capacity held for ``work`` that it may now evict,
        whatever its queue: outside its protected window, of no higher priority, while
        ``work`` still starves and may preempt."""
        if not work.standing.may_preempt or not self.contracts.starving(work.info):
            return []
        return [
            running
            for running in self._backfilled_for.get(work.name, ())
            if running.evictable
            and running.value <= work.standing.value
            and running.name not in self.evicted
        ]

    def budget_covers(self, work: PendingWork) -> bool:
        """Whether what is left of the work's budget in this cycle still covers its
        reservation (always, for work that spends no budget)."""
        standing = work.standing
        if standing.budget_demoted or standing.declared.budget_rate == 0:
            return True
        left = self.budget_left.get(self.contracts.budget_key(work.info), 0.0)
        return left > 0 and left >= standing.budget_reservation

    def spend_budget(self, work: PendingWork) -> float:
        """Reserve the work's protected window from its budget, as it is admitted or its
        place reserved (the caller checked ``budget_covers``): the GPU-hours reserved (0 for
        work that spends no budget or that the budget no longer covered: demoted)."""
        standing = work.standing
        if standing.budget_demoted or standing.declared.budget_rate == 0:
            return 0.0
        key = self.contracts.budget_key(work.info)
        self.budget_left[key] = self.budget_left.get(key, 0.0) - standing.budget_reservation
        self.budget_spent[key].append((work.name, standing.budget_reservation))
        return standing.budget_reservation

    def demote(self, work: PendingWork) -> None:
        """The budget no longer covers the work: it competes at the default class now."""
        work.standing = self.contracts.demoted(work.info)
        work.rank = (-work.standing.value, work.info.submitted_at, work.name)

    def keep_promise(self, work: PendingWork) -> bool:
        """Hold for a nominated preemptor, while its victims leave, the nodes where it will
        run once they are gone, and charge its quota: nothing else is admitted there, from
        any queue. False (nothing held) when it would not fit even then."""
        victims = self.leaving[work.name]
        if not self.budget_covers(work):
            self.demote(work)
        trial = Statement(self.cluster, self.quota)
        for victim in victims:
            remove_workload(trial, victim)
        result = self.try_place(work, trial)
        trial.discard()
        if isinstance(result, Verdict):
            return False
        placed = result[1]
        # Its quota is charged too; its victims' stays charged until they are gone (as Kueue
        # keeps an evicted workload's quota until it has left): both sides are counted while
        # the capacity is on its way, so nothing is admitted on the strength of either.
        statement = Statement(self.cluster, self.quota)
        statement.charge(work.info.queue, self._need_of(placed))
        nodes = list(dict.fromkeys(pod.node for pod in placed))
        statement.hold(work.name, nodes, promised=True)
        statement.commit()
        self.spend_budget(work)
        work.verdict = waiting_verdict({v.name: v.info.queue for v in victims}, nodes)
        return True

    def evict(self, victims: list[RunningWork], reason: EvictReason, preemptor: str) -> None:
        """Record evictions (already removed on a committed statement)."""
        for victim in victims:
            self.evicted[victim.name] = Eviction(victim.name, reason, preemptor)

    def minimum_need(
        self, work: PendingWork, assignment: Assignment | None = None
    ) -> dict[str, int]:
        """Milli-GPU per flavor of the pods the gang cannot run without (its ``min_member``
        first pods) under an assignment (default its first): what preemption, reclaim and a
        hold make room for, as allocate admits an elastic gang with as many pods as fit."""
        if assignment is None:
            if not work.assignments:
                return {}
            assignment = work.assignments[0]
        if work.minimum >= len(assignment.pods):
            return assignment.need
        memo = (id(assignment), work.minimum)
        need = self._minimum_needs.get(memo)
        if need is None:
            need = self._minimum_needs[memo] = prefix_need(assignment.pods, work.minimum)
        return need

    def blocked_in_order(self, queue: str) -> list[PendingWork]:
        """Pending workloads of a queue that a preemption or reclaim could help, by rank."""
        return [
            work
            for work in self.by_queue.get(queue, [])
            if work.schedulable
            and work.name not in self.admitted
            and work.name not in self.waiting
            and work.verdict is not None
            and work.verdict.reason in RETRYABLE
            and not work.verdict.facts.get("never_fits")
            and "blocked_by" not in work.verdict.facts  # behind a strict-FIFO head
        ]

    def fits(self, work: PendingWork) -> Callable[[Statement], bool]:
        """A check that the workload would pass quota and placement on a statement."""

        # Room for the gang's minimum is enough (allocate then admits as many pods as fit).
        options = [
            (self.minimum_need(work, assignment), assignment.pods[: max(work.minimum, 1)])
            for assignment in work.assignments
        ]

        def check(statement: Statement) -> bool:
            for need, pods in options:
                if self.quota.check(work.info.queue, need) is not None:
                    continue
                if any(
                    amount > self.cluster.free_gpu[flavor] for flavor, amount in need.items()
                ) or not self.placer.may_fit(pods, work.minimum):
                    continue
                trial = statement.child()
                placed = self.placer.place(trial, pods, work.minimum, work.info.topology)
                trial.discard()
                if placed is not None:
                    return True
            return False

        return check

    def reserve(self, work: PendingWork, statement: Statement, victims: list[RunningWork]) -> bool:
        """Place the preemptor on what its victims free and hold it there; commit."""
        result = self.try_place(work, statement)
        if isinstance(result, Verdict):  # pragma: no cover - fits() said it would
            statement.discard()
            return False
        statement.commit()
        self.spend_budget(work)
        self.waiting.add(work.name)
        work.victims = sorted(v.name for v in victims)
        work.verdict = waiting_verdict({v.name: v.info.queue for v in victims})
        return True


__all__ = ["Assignment", "Cycle", "PendingWork", "pod_shape", "prefix_need"]
