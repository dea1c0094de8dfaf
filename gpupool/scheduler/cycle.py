"""One scheduling cycle: ``plan(snapshot, policy, now) -> Plan``.

The cycle is five numbered phases (DESIGN section 3), each a function of the ``Cycle`` it
works on, registered in ``PHASES`` in order so a policy can drop or reorder them:

    # 1 enqueue   settle budgets and back-off, drop what can never run now (gang, quota)
    # 2 allocate  DRF across queues, rank inside a queue, quota then gang placement
    # 3 preempt   inside the queue: strictly lower priority, outside protected windows
    # 4 reclaim   across queues: from borrowers above deserved, never below it
    # 5 backfill  idle GPUs behind a hold, for work that can be evicted at any time

Every tentative change goes on a Statement and is committed only when the whole step
succeeds. A preemptor is not admitted in the cycle that evicts for it: the capacity its
victims free is reserved for it on the cluster state, and it is reported as
``waiting-for-preemption``.
"""

from __future__ import annotations

import heapq
import itertools
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gpupool.scheduler.contracts import Contracts, Standing
from gpupool.scheduler.explain import Verdict, explanation, quota_verdict
from gpupool.scheduler.fairshare import CPU, MEMORY, DominantShares, gpu_resource
from gpupool.scheduler.fragmentation import PodShape, ShapeDistribution
from gpupool.scheduler.placement import Placer, PodRequest, count_placeable
from gpupool.scheduler.preemption import (
    RunningWork,
    SearchOrders,
    find_victims,
    held,
    lowest_then_smallest,
    mark_borrowed,
    size_first,
    victim_preference,
)
from gpupool.scheduler.quota import QuotaTree
from gpupool.scheduler.statement import CanonKey, ClusterState, PlacedPod, Statement
from gpupool.scheduler.types import (
    MIB_PER_GB,
    MILLI,
    SECONDS_PER_HOUR,
    Admission,
    Eviction,
    EvictReason,
    PendingExplanation,
    Plan,
    PodPlacement,
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


VictimKey = Callable[[RunningWork], tuple[int, ...]]


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
        self._shape_counts: Counter[tuple[str, PodShape]] = Counter()
        self._queue_usage: dict[str, tuple[dict[str, int], int, int]] = {}
        occupied = self._occupancy()
        self.cluster = ClusterState(snapshot.nodes, occupied)
        self._empty_classes: dict[str, dict[CanonKey, int]] | None = None
        pool: dict[str, int] = defaultdict(int)
        cpu = memory = 0
        for node in snapshot.nodes:
            pool[node.flavor] += node.healthy_gpus * MILLI
            if not node.cordoned:
                cpu += node.cpu_milli
                memory += node.memory_mib
        self.quota = QuotaTree(snapshot.queues, pool)
        capacity = {gpu_resource(flavor): amount for flavor, amount in pool.items()}
        capacity[CPU] = cpu
        capacity[MEMORY] = memory
        self.shares = DominantShares(capacity, {q.name: q.weight for q in snapshot.queues})
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
        self._queue_victims: dict[tuple[str, str], list[RunningWork]] = {}
        self._lenders_memo: dict[tuple[str, str], list[str]] = {}
        self._borrow_marked: set[str] = set()
        self.all_running_by_queue: dict[str, list[RunningWork]] = defaultdict(list)
        for running in self.running.values():
            self.all_running_by_queue[running.info.queue].append(running)
        self.leaves_under: dict[str, list[str]] = defaultdict(list)
        for name in sorted(self.queues):
            if self.quota.is_leaf(name):
                for ancestor in self.quota.path[name]:
                    self.leaves_under[ancestor].append(name)
        self.by_queue: dict[str, list[PendingWork]] = defaultdict(list)
        for work in sorted(self.pending.values(), key=lambda w: w.rank):
            self.by_queue[work.info.queue].append(work)
        self.admitted: dict[str, list[PlacedPod]] = {}
        self.evicted: dict[str, Eviction] = {}
        self.waiting: set[str] = set()
        self.holders: list[str] = []
        self.held_by: dict[str, list[str]] = {}
        self.start_classes: dict[str, dict[CanonKey, int]] = {}
        self.start_free: dict[str, tuple[int, int, int]] = {}
        self._failed: dict[tuple[object, ...], tuple[int, int, Verdict]] = {}
        self._totals: dict[tuple[int, int], list[tuple[str, int, int, int]]] = {}

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
            for pod_set in workload.pod_sets:
                shape_flavor, shape = "", None
                tally: list[Any] = []
                for placement in placements[first : first + pod_set.count]:
                    node = placement.node
                    flavor = node_flavor[node]
                    if shape is None or flavor != shape_flavor:
                        shape_flavor, shape = flavor, pod_shape(pod_set, flavor in shared)
                        tally = shape_pods.setdefault((flavor, id(shape)), [flavor, shape, 0])
                    tally[2] += 1
                    pods.append(PlacedPod(node, placement.gpus, shape))
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
            for pod_set, flavor in zip(workload.pod_sets, flavors, strict=True):
                shape = pod_shape(pod_set, self.flavors[flavor].sharing == "shared")
                pods.extend(PodRequest(shape, flavor) for _ in range(pod_set.count))
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

    def larger_than_pool(self, need: Mapping[str, int]) -> Verdict | None:
        """A request larger than the pool's healthy GPUs of a flavor, even when idle."""
        for flavor, amount in sorted(need.items()):
            if amount > self.quota.pool.get(flavor, 0):
                facts: dict[str, object] = {
                    "flavor": flavor,
                    "resource": "gpu",
                    "asked": amount / MILLI,
                    "free": self.cluster.free_gpu[flavor] / MILLI,
                    "healthy": self.quota.pool.get(flavor, 0) / MILLI,
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
                for name, nodes in self.held_by.items()
                if any(self.nodes[node].flavor == flavor for node in nodes)
            ),
            None,
        )
        if holder is not None:
            facts["held_for"] = holder
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
        return Verdict("fragmentation", facts)

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

    def admit(self, work: PendingWork, assignment: Assignment, placed: list[PlacedPod]) -> None:
        """Record an admission (the statement holding it is committed by the caller)."""
        self.admitted[work.name] = placed
        vector = assignment.vector
        if len(placed) < len(assignment.pods):  # an elastic gang took fewer pods
            vector = defaultdict(int)
            for pod in placed:
                vector[gpu_resource(self.nodes[pod.node].flavor)] += pod.shape.gpu_milli_total
                vector[CPU] += pod.shape.cpu_milli
                vector[MEMORY] += pod.shape.memory_mib
        self.shares.add(work.info.queue, vector)
        work.verdict = None

    def starving(self, work: PendingWork) -> bool:
        """Whether the workload waited past the policy's starvation limit."""
        limit = self.policy.starvation_limit_s
        return limit is not None and self.now - work.info.submitted_at > limit

    def hold_for(self, work: PendingWork, assignment: Assignment) -> bool:
        """Reserve the nodes closest to fitting the starving gang; False if it never fits."""
        by_flavor: dict[str, list[PodShape]] = defaultdict(list)
        for pod in assignment.pods:
            by_flavor[pod.flavor].append(pod.shape)
        if self._empty_classes is None:
            self._empty_classes = ClusterState(self.snapshot.nodes).class_counts()
        healthy = sum(
            count_placeable(self._empty_classes.get(f, {}), shapes, self.placer, f)
            for f, shapes in by_flavor.items()
        )
        if healthy < work.minimum:
            return False
        held: list[str] = []
        for pod in assignment.pods:
            classes = self.cluster.classes.get(pod.flavor, {})
            # The node closest to fitting: most free GPUs first (then a fixed order).
            for key in sorted(classes, key=lambda k: (-sum(k[0]), k)):
                name = next((n for n in classes[key] if n not in self.cluster.held), None)
                if name is not None:
                    self.cluster.held.add(name)
                    held.append(name)
                    break
        self.holders.append(work.name)
        self.held_by[work.name] = held
        return True

    def evict(self, victims: list[RunningWork], reason: EvictReason, preemptor: str) -> None:
        """Record evictions (already removed on a committed statement)."""
        for victim in victims:
            self.evicted[victim.name] = Eviction(victim.name, reason, preemptor)

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

        def check(statement: Statement) -> bool:
            for assignment in work.assignments:
                if self.quota.check(work.info.queue, assignment.need) is not None:
                    continue
                if any(
                    amount > self.cluster.free_gpu[flavor]
                    for flavor, amount in assignment.need.items()
                ) or not self.placer.may_fit(assignment.pods, work.minimum):
                    continue
                trial = statement.child()
                placed = self.placer.place(trial, assignment.pods, work.minimum, work.info.topology)
                trial.discard()
                if placed is not None:
                    return True
            return False

        return check

    def tree_distance(self, reclaimer: str) -> Callable[[RunningWork], int]:
        """How far up the reclaimer's path a victim's queue meets it (0: same queue)."""
        path = self.quota.path[reclaimer]
        distances: dict[str, int] = {}  # per victim queue: the same for all its workloads

        def distance(victim: RunningWork) -> int:
            queue = victim.info.queue
            found = distances.get(queue)
            if found is None:
                shared = set(self.quota.path[queue])
                found = next(i for i, node in enumerate(path) if node in shared)
                distances[queue] = found
            return found

        return distance

    def reclaim_orders(self, reclaimer: str) -> tuple[VictimKey, VictimKey]:
        """Reclaim's two size orders, on one tree-distance memo: for the fewest-victims
        pass, nearest in the tree then biggest; among lone victims, the candidates' own
        order (nearest, borrowed first, lowest priority) then fewest GPUs held."""
        distance = self.tree_distance(reclaimer)

        def nearest_then_biggest(victim: RunningWork) -> tuple[int, ...]:
            return (distance(victim), *size_first(victim))

        def nearest_then_smallest(victim: RunningWork) -> tuple[int, ...]:
            return (distance(victim), not victim.borrowed, victim.value, held(victim))

        return nearest_then_biggest, nearest_then_smallest

    def room_without(self, work: PendingWork) -> Callable[[Sequence[RunningWork]], bool]:
        """A cheap necessary condition for a victim search: with every candidate gone, would
        some assignment's whole-GPU pods find enough whole GPUs, node by node? CPU, memory,
        GPU models, domains, holds and GPU health are left out, and a candidate's GPUs count
        as freed whole, so it only ever says no when placement must fail. Pods sharing GPUs
        (fractions) or asking none are not checked."""

        def check(candidates: Sequence[RunningWork]) -> bool:
            return not work.assignments or any(
                self._whole_gpu_room(assignment, work.minimum, candidates)
                for assignment in work.assignments
            )

        return check

    def _whole_gpu_room(
        self, assignment: Assignment, minimum: int, candidates: Sequence[RunningWork]
    ) -> bool:
        wanted: Counter[tuple[str, int]] = Counter()
        for pod in assignment.pods[: max(minimum, 1)]:
            if pod.shape.gpus == 0 or pod.shape.milli < MILLI:
                return True
            wanted[(pod.flavor, pod.shape.gpus)] += 1
        cluster = self.cluster
        for (flavor, gpus), count in wanted.items():
            room = 0
            for key, names in cluster.classes.get(flavor, {}).items():
                room += len(names) * (sum(1 for free in key[0] if free >= MILLI) // gpus)
                if room >= count:
                    break
            # Free the candidates one by one, node by node, until the pods would fit.
            whole: dict[str, int] = {}
            freed: dict[str, int] = {}
            for victim in candidates:
                if room >= count:
                    break
                for placed in victim.pods:
                    name = placed.node
                    node = self.nodes[name]
                    if node.flavor != flavor:
                        continue
                    if name not in whole:
                        state = cluster.state[name].gpu_free_milli
                        whole[name] = sum(1 for free in state if free >= MILLI)
                        freed[name] = 0
                    before = min(node.gpus, whole[name] + freed[name]) // gpus
                    freed[name] += len(placed.gpus)
                    room += min(node.gpus, whole[name] + freed[name]) // gpus - before
            if room < count:
                return False
        return True

    def allowance(self, victim: RunningWork) -> float:
        """GPU-hours of the victim's work its protected window covers: what its contract
        expects an eviction may throw away (a window is meant to reach a first checkpoint)."""
        seconds = self.contracts.protected_runtime(victim.info)
        return sum(victim.need.values()) / MILLI * seconds / SECONDS_PER_HOUR

    def might_suffice(self, work: PendingWork) -> tuple[Callable[[RunningWork], bool], int]:
        """Whether one victim frees as many GPUs of each flavor as the preemptor lacks, and
        the fewest milli-GPUs such a victim can hold."""
        need = work.assignments[0].need if work.assignments else {}
        missing = {
            flavor: max(
                amount - self.cluster.free_gpu[flavor],
                amount - self.quota.available(work.info.queue, flavor),
            )
            for flavor, amount in need.items()
        }

        def check(victim: RunningWork) -> bool:
            return all(victim.need.get(flavor, 0) >= amount for flavor, amount in missing.items())

        return check, sum(max(amount, 0) for amount in missing.values())

    def reserve(self, work: PendingWork, statement: Statement, victims: list[RunningWork]) -> bool:
        """Place the preemptor on what its victims free and hold it there; commit."""
        result = self.try_place(work, statement)
        if isinstance(result, Verdict):  # pragma: no cover - fits() said it would
            statement.discard()
            return False
        statement.commit()
        self.waiting.add(work.name)
        work.victims = sorted(v.name for v in victims)
        work.verdict = Verdict("waiting-for-preemption", {"victims": work.victims})
        return True

    def reclaim_candidates(
        self, reclaimer: str, flavor: str, among: Callable[[str], bool] | None = None
    ) -> Iterator[RunningWork]:
        """Victims holding ``flavor`` for a reclaim: nearest in the tree, borrowers, cheapest.

        Walks the reclaimer's ancestors from the nearest; each contributes the evictable
        workloads of reclaimable queues in its subtree not already offered by a nearer one,
        from queues above their deserved share only (and, if given, only queues ``among``
        accepts), merged in preference order.
        """
        path = self.quota.path[reclaimer]
        over_deserved_by = self.quota.over_deserved_by
        for depth, ancestor in enumerate(path[1:], start=1):
            lists = [
                self._victims_of(leaf, flavor)
                for leaf in self._lenders(ancestor, path[depth - 1])
                if over_deserved_by(leaf, flavor) > 0 and (among is None or among(leaf))
            ]
            for victim in heapq.merge(*lists, key=_reclaim_key):
                if victim.name not in self.evicted:
                    yield victim

    def _lenders(self, ancestor: str, nearer: str) -> list[str]:
        """Reclaimable leaves under ``ancestor`` but not under ``nearer`` (fixed in a cycle)."""
        memo = (ancestor, nearer)
        leaves = self._lenders_memo.get(memo)
        if leaves is None:
            leaves = self._lenders_memo[memo] = [
                leaf
                for leaf in self.leaves_under[ancestor]
                if nearer not in self.quota.path[leaf] and self.queues[leaf].reclaimable
            ]
        return leaves

    def _victims_of(self, queue: str, flavor: str) -> list[RunningWork]:
        """A queue's evictable workloads holding ``flavor``: borrowers first, then cheapest."""
        memo = (queue, flavor)
        victims = self._queue_victims.get(memo)
        if victims is None:
            if queue not in self._borrow_marked:
                self._borrow_marked.add(queue)
                deserved = {f: q.deserved for f, q in self.queues[queue].quota.items()}
                mark_borrowed(self.all_running_by_queue.get(queue, []), deserved)
            victims = sorted(
                (v for v in self.running_by_queue.get(queue, ()) if flavor in v.need),
                key=_reclaim_key,
            )
            self._queue_victims[memo] = victims
        return victims


def _reclaim_key(victim: RunningWork) -> tuple[bool, tuple[float, float, float, str]]:
    """Reclaim preference inside a queue: borrowed workloads first, then the cheapest."""
    return (not victim.borrowed, victim.order)


# -- the phases ------------------------------------------------------------------------------


def enqueue(cycle: Cycle) -> None:
    """# 1 Settle what keeps a workload out of this cycle: missing pods, quota, victims."""
    leaving: dict[str, list[str]] = defaultdict(list)
    for running in cycle.running.values():
        if running.info.evicting_for is not None:
            leaving[running.info.evicting_for].append(running.name)
    never: dict[tuple[str, int, int], Verdict | None] = {}
    for work in cycle.pending.values():
        info = work.info
        if info.missing_pods > 0:
            work.schedulable = False
            work.verdict = Verdict("gang", {"missing_pods": info.missing_pods})
            continue
        if info.name in leaving:
            work.schedulable = False
            cycle.waiting.add(info.name)
            work.victims = sorted(leaving[info.name])
            work.verdict = Verdict("waiting-for-preemption", {"victims": work.victims})
            continue
        memo = (info.queue, id(work.assignments), work.minimum)
        if memo not in never:
            never[memo] = _never_runs(cycle, info.queue, work.assignments, work.minimum)
        verdict = never[memo]
        if verdict is not None:
            work.schedulable = False
            work.verdict = verdict


def _never_runs(
    cycle: Cycle, queue: str, assignments: list[Assignment], minimum: int
) -> Verdict | None:
    """Quota (a capability on the path) or capacity (the pool) that can never hold the gang."""
    needs = [prefix_need(a.pods, minimum) for a in assignments]
    shortfalls = [cycle.quota.never_fits(queue, need) for need in needs]
    if shortfalls and all(s is not None for s in shortfalls) and shortfalls[0] is not None:
        return quota_verdict(shortfalls[0])
    too_big = [cycle.larger_than_pool(need) for need in needs]
    if too_big and all(v is not None for v in too_big):
        return too_big[0]
    return None


@dataclass(frozen=True, slots=True)
class QueueOrder:
    """How allocate picks the next queue to serve: a key of the queue and its head.

    ``by_head``: the key depends on the head, so it is recomputed for every new head (not
    only after an admission changed the queue's usage).
    """

    key: Callable[[Cycle, str, PendingWork], tuple[object, ...]]
    by_head: bool


def _dominant_share(cycle: Cycle, queue: str, head: PendingWork) -> tuple[object, ...]:
    """Weighted dominant share, smallest first (ties by name)."""
    return (cycle.shares.share(queue), queue)


def _head_rank(cycle: Cycle, queue: str, head: PendingWork) -> tuple[object, ...]:
    """Kueue's order without fair sharing: within deserved first, priority, submit time."""
    need = head.assignments[0].need if head.assignments else {}
    return (not cycle.quota.below_deserved(queue, need), *head.rank, queue)


QUEUE_ORDERS: Mapping[bool, QueueOrder] = {
    True: QueueOrder(_dominant_share, by_head=False),  # policy.fair_sharing
    False: QueueOrder(_head_rank, by_head=True),
}


def _best_effort(cycle: Cycle, queue: str, blocked: PendingWork) -> bool:
    """A workload that is not admitted does not block the ones behind it."""
    return True


def _strict_fifo(cycle: Cycle, queue: str, blocked: PendingWork) -> bool:
    """Nothing behind a blocked head is admitted: close the queue for this cycle."""
    for work in cycle.by_queue[queue]:
        if work.verdict is None and work is not blocked and work.name not in cycle.admitted:
            work.verdict = Verdict("behind", {"queue": queue, "blocked_by": blocked.name})
    return False


# policy.queueing -> whether allocate keeps serving a queue after a workload was not admitted
QUEUEING: Mapping[str, Callable[[Cycle, str, PendingWork], bool]] = {
    "best-effort": _best_effort,
    "fifo": _strict_fifo,
}


def allocate(cycle: Cycle) -> None:
    """# 2 Queues by DRF (or rank); inside a queue by rank; quota, then gang placement."""
    cycle.snapshot_start()
    nominated = sorted(
        (w for w in cycle.pending.values() if w.info.nominated and w.schedulable),
        key=lambda w: w.rank,
    )
    for work in nominated:
        _attempt(cycle, work)
    order = QUEUE_ORDERS[cycle.policy.fair_sharing]
    keep_serving = QUEUEING[cycle.policy.queueing]
    cursor: dict[str, int] = defaultdict(int)

    def head(queue: str) -> PendingWork | None:
        works = cycle.by_queue[queue]
        index = cursor[queue]
        while index < len(works) and (
            not works[index].schedulable or works[index].name in cycle.admitted
        ):
            index += 1
        cursor[queue] = index
        return works[index] if index < len(works) else None

    heap: list[tuple[tuple[object, ...], str]] = []
    for queue in sorted(cycle.by_queue):
        first = head(queue)
        if first is not None:
            heap.append((order.key(cycle, queue, first), queue))
    heapq.heapify(heap)
    while heap:
        key, queue = heapq.heappop(heap)
        served = head(queue)
        if served is None:
            continue
        cursor[queue] += 1
        admitted = _attempt(cycle, served)
        if not admitted and not keep_serving(cycle, queue, served):
            continue
        after = head(queue)
        if after is None:
            continue
        if admitted or order.by_head:
            key = order.key(cycle, queue, after)
        heapq.heappush(heap, (key, queue))


def _attempt(cycle: Cycle, work: PendingWork) -> bool:
    statement = Statement(cycle.cluster, cycle.quota)
    result = cycle.try_place(work, statement)
    if isinstance(result, Verdict):
        statement.discard()
        work.verdict = result
        if (
            result.reason in ("capacity", "fragmentation", "behind")
            and cycle.starving(work)
            and work.name not in cycle.holders
        ):
            assignment = work.assignments[0]
            if cycle.quota.check(work.info.queue, assignment.need) is None and cycle.hold_for(
                work, assignment
            ):
                work.verdict = Verdict(result.reason, {**result.facts, "holding_capacity": True})
        return False
    statement.commit()
    cycle.admit(work, *result)
    return True


@dataclass(frozen=True, slots=True)
class VictimSearchStrategy:
    """``policy.victim_search``: the passes of the search, and what "recent" counts from."""

    orders: Callable[[Cycle, PendingWork, str | None], SearchOrders]  # reclaimer or None
    counts_checkpoints: bool


def _fewest_orders(cycle: Cycle, work: PendingWork, reclaimer: str | None) -> SearchOrders:
    """The product's: a lone victim if one is enough (the smallest), else the fewest."""
    single, floor = cycle.might_suffice(work)
    room = cycle.room_without(work)
    if reclaimer is None:
        return SearchOrders(
            single, size_first, lowest_then_smallest, cycle.allowance, room, lone_floor=floor
        )
    biggest, smallest = cycle.reclaim_orders(reclaimer)
    return SearchOrders(single, biggest, smallest, cycle.allowance, room, lone_floor=floor)


def _greedy_orders(cycle: Cycle, work: PendingWork, reclaimer: str | None) -> SearchOrders:
    """Kueue's: one pass in preference order, then what is not needed is put back."""
    return SearchOrders()


VICTIM_SEARCHES: Mapping[str, VictimSearchStrategy] = {
    "fewest": VictimSearchStrategy(_fewest_orders, counts_checkpoints=True),
    "greedy": VictimSearchStrategy(_greedy_orders, counts_checkpoints=False),
}


def preempt(cycle: Cycle) -> None:
    """# 3 Inside a queue: evict strictly lower priority outside protected windows."""
    for queue in sorted(cycle.by_queue):
        attempts = 0
        for work in cycle.blocked_in_order(queue):
            if attempts >= cycle.policy.preemption_attempts_per_queue:
                break
            if not work.standing.may_preempt:
                continue
            flavors = {f for a in work.assignments for f in a.need}
            value = work.standing.value
            candidates = [
                victim
                for victim in cycle.running_by_queue.get(queue, ())
                if victim.evictable
                and victim.value < value
                and victim.name not in cycle.evicted
                and (not flavors or not victim.need or victim.need.keys() & flavors)
            ]
            if not candidates:
                continue
            attempts += 1
            statement = Statement(cycle.cluster, cycle.quota)
            search = VICTIM_SEARCHES[cycle.policy.victim_search].orders(cycle, work, None)
            victims = find_victims(statement, candidates, cycle.fits(work), orders=search)
            if victims is None:
                continue
            if cycle.reserve(work, statement, victims):
                cycle.evict(victims, "preempt", work.name)


# Fair-share reclaim (a queue above deserved taking from one further above) is a refinement
# of the order, not an entitlement: its victim searches are bounded per cycle, lowest share
# first, so a pool with hundreds of borrowing queues keeps its cycle time (B1).
FAIR_RECLAIM_SEARCHES = 16


def reclaim(cycle: Cycle) -> None:
    """# 4 Across queues: take back lent capacity from borrowers above their deserved share.

    First every queue that stays within its deserved share, in name order. Then, with fair
    sharing on, queues already at or above theirs, lowest weighted share first: each may take
    borrowed capacity from a queue whose share of the contested flavor stays above its own
    after the move (``_fairer_after``), within ``FAIR_RECLAIM_SEARCHES`` searches a cycle.
    """
    for queue in sorted(cycle.by_queue):
        _reclaim_in(cycle, queue, fair=False, budget=None)
    if not cycle.policy.fair_sharing:
        return
    budget = FAIR_RECLAIM_SEARCHES
    for queue in sorted(cycle.by_queue, key=lambda q: (cycle.shares.share(q), q)):
        if budget <= 0:
            break
        budget -= _reclaim_in(cycle, queue, fair=True, budget=budget)


def _reclaim_in(cycle: Cycle, queue: str, *, fair: bool, budget: int | None) -> int:
    """Reclaim attempts for one queue's blocked work; returns the victim searches run.

    ``fair`` False: only work that keeps the queue within its deserved share; True: only
    work that does not (fair-share reclaim), at most ``budget`` searches.
    """
    attempts = 0
    limit = cycle.policy.preemption_attempts_per_queue
    if budget is not None:
        limit = min(limit, budget)
    for work in cycle.blocked_in_order(queue):
        if attempts >= limit:
            break
        need = work.assignments[0].need if work.assignments else {}
        # Reclaim returns lent GPU quota; work that asks no GPU has none to reclaim.
        if not any(need.values()) or cycle.quota.below_deserved(queue, need) == fair:
            continue
        flavor = max(need, key=lambda f: (need[f], f))
        guard = _stays_at_deserved(cycle, queue)
        among: Callable[[str], bool] | None = None
        if fair:
            found = _fairer_after(cycle, queue, need, flavor, guard)
            if found is None:
                continue
            among, guard = found
        statement = Statement(cycle.cluster, cycle.quota)
        attempts += 1
        search = VICTIM_SEARCHES[cycle.policy.victim_search].orders(cycle, work, queue)
        victims = find_victims(
            statement,
            cycle.reclaim_candidates(queue, flavor, among),
            cycle.fits(work),
            guard,
            orders=search,
        )
        if victims is None:
            continue
        if cycle.reserve(work, statement, victims):
            cycle.evict(victims, "reclaim", work.name)
    return attempts


def _stays_at_deserved(cycle: Cycle, reclaimer: str) -> Callable[[RunningWork], bool]:
    """Guard: removing the victim keeps every queue up to the common ancestor at deserved."""
    reclaimer_path = set(cycle.quota.path[reclaimer])

    def guard(victim: RunningWork) -> bool:
        for node in cycle.quota.path[victim.info.queue]:
            if node in reclaimer_path:
                break
            for flavor, amount in victim.need.items():
                quota = cycle.quota.quota(node, flavor)
                if quota is None:
                    continue
                if cycle.quota.usage[node][flavor] - amount < quota.deserved:
                    return False
        return True

    return guard


def _fairer_after(
    cycle: Cycle,
    reclaimer: str,
    need: Mapping[str, int],
    flavor: str,
    guard: Callable[[RunningWork], bool],
) -> tuple[Callable[[str], bool], Callable[[RunningWork], bool]] | None:
    """Fair-share reclaim by a queue above deserved: victims only from queues that stay fairer off.

    A queue's share here is its usage of the contested flavor over its weight (the pool's
    capacity is common to both sides). The reclaimer's share counts the workload it admits; a
    victim's queue must be above that share before the eviction and stay strictly above it
    after, so the move never swaps the two queues' order and cannot be undone by the victim's
    queue reclaiming back (Kueue's fair-sharing preemption, LessThanOrEqualToFinalShare, with
    a strict inequality against ping-pong). The victim queue also stays at its deserved share.

    Returns the queue filter and the victim guard, or None when the queues that could give
    (each at most what keeps it above the reclaimer's share and at its deserved) and the idle
    GPUs together cannot cover the workload: then no victim search is worth running.
    """
    usage = cycle.quota.usage  # updated by the statement as victims are removed
    queues = cycle.queues
    mine = (usage[reclaimer][flavor] + need[flavor]) / queues[reclaimer].weight
    givable = float(cycle.cluster.free_gpu[flavor])
    for leaf in cycle.leaves_under[cycle.quota.path[reclaimer][-1]]:
        spare = usage[leaf][flavor] - mine * queues[leaf].weight
        if leaf != reclaimer and spare > 0 and queues[leaf].reclaimable:
            givable += min(spare, cycle.quota.over_deserved_by(leaf, flavor))
    if givable < need[flavor]:
        return None

    def above(queue: str) -> bool:
        return usage[queue][flavor] / queues[queue].weight > mine

    def fairer(victim: RunningWork) -> bool:
        queue = victim.info.queue
        after = usage[queue][flavor] - victim.need.get(flavor, 0)
        return guard(victim) and after / queues[queue].weight > mine

    return above, fairer


def backfill(cycle: Cycle) -> None:
    """# 5 Idle GPUs behind a hold go to work that can be evicted at any time; evicts nobody."""
    if not cycle.cluster.held:
        return
    held = set(cycle.cluster.held)
    cycle.cluster.held.clear()
    try:
        for work in sorted(cycle.pending.values(), key=lambda w: w.rank):
            if (
                not work.schedulable
                or "blocked_by" in (work.verdict.facts if work.verdict else {})
                or work.name in cycle.admitted
                or work.name in cycle.waiting
                or work.name in cycle.holders
                or work.verdict is None
                or work.verdict.reason != "behind"
                or cycle.contracts.protected_runtime(work.info) > 0
            ):
                continue
            statement = Statement(cycle.cluster, cycle.quota)
            result = cycle.try_place(work, statement)
            if isinstance(result, Verdict):
                statement.discard()
                continue
            statement.commit()
            cycle.admit(work, *result)
    finally:
        cycle.cluster.held |= held


Phase = Callable[[Cycle], None]

PHASES: Mapping[str, Phase] = {
    "enqueue": enqueue,
    "allocate": allocate,
    "preempt": preempt,
    "reclaim": reclaim,
    "backfill": backfill,
}


def run_cycle(snapshot: Snapshot, policy: PolicyInfo, now: float) -> Cycle:
    """Run the policy's phases in order and return the finished cycle."""
    cycle = Cycle(snapshot, policy, now)
    for name in policy.phases:
        PHASES[name](cycle)
    return cycle


def _placement_out(cycle: Cycle, pods: list[PlacedPod]) -> tuple[PodPlacement, ...]:
    out: list[PodPlacement] = []
    for pod in pods:
        shared = cycle.nodes[pod.node].flavor in cycle.shared_flavors
        out.append(PodPlacement(pod.node, pod.gpus, pod.shape.milli if shared else None))
    return tuple(out)


def _budget_verdict(cycle: Cycle, work: PendingWork, then: Verdict) -> Verdict:
    standing = work.standing
    facts: dict[str, object] = {
        "tenant": cycle.contracts.tenant(work.info),
        "priority_class": standing.declared.name,
        "remaining_gpu_hours": round(standing.budget_remaining or 0.0, 3),
        "reservation_gpu_hours": round(standing.budget_reservation, 3),
        "then": then.reason,
        "then_facts": dict(then.facts),
    }
    return Verdict("budget", facts)


def pending_explanations(cycle: Cycle) -> list[PendingExplanation]:
    """One explanation per workload left pending, with its position in its queue."""
    out: list[PendingExplanation] = []
    for works in cycle.by_queue.values():
        position = 0
        for work in works:
            if work.name in cycle.admitted:
                continue
            position += 1
            verdict = work.verdict or Verdict("behind", {"queue": work.info.queue})
            if work.standing.budget_demoted and verdict.reason != "waiting-for-preemption":
                verdict = _budget_verdict(cycle, work, verdict)
            out.append(explanation(work.name, verdict, position))
    return sorted(out, key=lambda e: e.workload)


def plan_of(cycle: Cycle) -> Plan:
    """The plan a finished cycle produced."""
    admit = tuple(
        Admission(name, _placement_out(cycle, cycle.admitted[name]))
        for name in sorted(cycle.admitted)
    )
    evict = tuple(cycle.evicted[name] for name in sorted(cycle.evicted))
    return Plan(admit=admit, evict=evict, pending=tuple(pending_explanations(cycle)))


def plan(snapshot: Snapshot, policy: PolicyInfo, now: float) -> Plan:
    """Decide one cycle: what to admit where, what to evict, and why the rest waits."""
    return plan_of(run_cycle(snapshot, policy, now))


__all__ = ["PHASES", "Cycle", "plan", "run_cycle"]
