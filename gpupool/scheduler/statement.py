"""The mutable side of a cycle: node occupancy, queue usage, and Statements over them.

``ClusterState`` holds each node's free resources and keeps indexes so placement never scans
every node: per flavor, nodes grouped by *canonical* state (free GPUs sorted, CPU, memory:
nodes in the same canonical state are interchangeable for scoring), and per (flavor, NVLink
domain) a signature of its nodes' states so a domain gang is tried once per distinct domain.

A ``Statement`` (Volcano's name) records every change made through it -- a pod placed or
removed, a queue's usage charged, capacity held for a starving workload or opened to backfill
-- and can ``discard()`` them in reverse order, or ``commit()`` to keep them: a gang is placed
whole or not at all, victims are removed only if the preemptor then fits.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from gpupool.scheduler.fragmentation import NodeState, PodShape, take
from gpupool.scheduler.quota import QuotaTree
from gpupool.scheduler.types import MILLI, NodeInfo

CanonKey = tuple[tuple[int, ...], int, int]


def canonical(state: NodeState) -> CanonKey:
    """The node state with its GPUs sorted, as a sortable key (GPU identity does not score)."""
    return (
        tuple(sorted(state.gpu_free_milli, reverse=True)),
        state.cpu_free_milli,
        state.memory_free_mib,
    )


def give_back(state: NodeState, pod: PodShape, gpus: tuple[int, ...]) -> NodeState:
    """The node after a pod placed on ``gpus`` leaves it (the inverse of ``take``)."""
    free = list(state.gpu_free_milli)
    for index in gpus:
        free[index] += pod.milli
    return NodeState(
        tuple(free), state.cpu_free_milli + pod.cpu_milli, state.memory_free_mib + pod.memory_mib
    )


def occupy(state: NodeState, pod: PodShape, gpus: tuple[int, ...]) -> NodeState:
    """The node with a pod that had left it back on ``gpus`` (the inverse of ``give_back``;
    unlike ``take`` it re-checks nothing: the pod was there)."""
    free = list(state.gpu_free_milli)
    for index in gpus:
        free[index] -= pod.milli
    return NodeState(
        tuple(free), state.cpu_free_milli - pod.cpu_milli, state.memory_free_mib - pod.memory_mib
    )


@dataclass(slots=True)
class PlacedPod:
    """One pod of a workload as placed: node, GPUs and the shape it took there, and which pod
    it is (its pod set's index in the workload, its index in the pod set)."""

    node: str
    gpus: tuple[int, ...]
    shape: PodShape
    pod_set: int
    index: int


def initial_state(
    node: NodeInfo, occupied: tuple[Mapping[int, int], int, int] | None = None
) -> NodeState:
    """A node's free state: healthy GPUs less what runs there; unhealthy, another
    scheduler's, or cordoned is zero.

    ``occupied`` is (milli-GPU used per GPU index, milli-CPU used, MiB used).
    """
    used, cpu, memory = occupied if occupied is not None else ({}, 0, 0)
    if node.cordoned:
        return NodeState((0,) * node.gpus, 0, 0)
    # Start from all GPUs free and visit only the used and unhealthy indices (most of a
    # node's GPUs are neither; this runs once per node per cycle).
    free = [MILLI] * node.gpus
    for index, milli in used.items():
        if 0 <= index < node.gpus:
            free[index] = max(0, MILLI - milli)
    for index in node.unhealthy_gpus:
        if 0 <= index < node.gpus:
            free[index] = 0
    for index in node.foreign_gpus:
        if 0 <= index < node.gpus:
            free[index] = 0
    return NodeState(tuple(free), max(0, node.cpu_milli - cpu), max(0, node.memory_mib - memory))


class ClusterState:
    """Free resources of every node, indexed by flavor, canonical state and domain."""

    def __init__(
        self,
        nodes: tuple[NodeInfo, ...],
        occupied: Mapping[str, tuple[Mapping[int, int], int, int]] | None = None,
    ) -> None:
        self.nodes: dict[str, NodeInfo] = {node.name: node for node in nodes}
        self.state: dict[str, NodeState] = {}
        self.canon: dict[str, CanonKey] = {}
        self.canon_state: dict[CanonKey, NodeState] = {}
        self.classes: dict[str, dict[CanonKey, list[str]]] = defaultdict(dict)
        self.domain_nodes: dict[tuple[str, str], list[str]] = defaultdict(list)
        self.signature: dict[tuple[str, str], tuple[CanonKey, ...]] = {}
        self.domains_by_signature: dict[str, dict[tuple[CanonKey, ...], list[str]]] = defaultdict(
            dict
        )
        self.free_gpu: dict[str, int] = defaultdict(int)
        self.free_cpu: dict[str, int] = defaultdict(int)
        self.free_memory: dict[str, int] = defaultdict(int)
        self.held: set[str] = set()  # nodes placement must leave alone (holds)
        self.holds: dict[str, list[str]] = {}  # holder -> the nodes held for it, in hold order
        self.promised: set[str] = set()  # holders whose victims are still leaving (nominations)
        self.generation = 0
        # Nodes where a leaving pod frees less than it holds: per node, None when nothing it
        # held can be allocated again (cordoned or NotReady), else its GPUs that cannot be
        # (unhealthy, or another scheduler's).
        self.impaired: dict[str, frozenset[int] | None] = {
            node.name: None if node.cordoned else node.unhealthy_gpus | node.foreign_gpus
            for node in nodes
            if node.cordoned or node.unhealthy_gpus or node.foreign_gpus
        }
        self._dirty: set[tuple[str, str]] = set()
        self._largest_domain: dict[str, int] | None = None
        occupied = occupied or {}
        for node in sorted(nodes, key=lambda n: n.name):
            state = initial_state(node, occupied.get(node.name))
            self.state[node.name] = state
            key = self._intern(state)
            self.canon[node.name] = key
            self.classes[node.flavor].setdefault(key, []).append(node.name)
            self.domain_nodes[(node.flavor, node.domain)].append(node.name)
            self._count(node.flavor, state, 1)
        for (flavor, domain), names in sorted(self.domain_nodes.items()):
            signature = tuple(sorted(self.canon[name] for name in names))
            self.signature[(flavor, domain)] = signature
            self.domains_by_signature[flavor].setdefault(signature, []).append(domain)

    def _intern(self, state: NodeState) -> CanonKey:
        key = canonical(state)
        if key not in self.canon_state:
            self.canon_state[key] = NodeState(key[0], key[1], key[2])
        return key

    def _count(self, flavor: str, state: NodeState, sign: int) -> None:
        self.free_gpu[flavor] += sign * sum(state.gpu_free_milli)
        self.free_cpu[flavor] += sign * state.cpu_free_milli
        self.free_memory[flavor] += sign * state.memory_free_mib

    def set_state(self, name: str, state: NodeState) -> None:
        """Replace a node's free state, keeping every index current."""
        node = self.nodes[name]
        old_key = self.canon[name]
        before = self.state[name]
        flavor = node.flavor
        self.free_gpu[flavor] += sum(state.gpu_free_milli) - sum(before.gpu_free_milli)
        self.free_cpu[flavor] += state.cpu_free_milli - before.cpu_free_milli
        self.free_memory[flavor] += state.memory_free_mib - before.memory_free_mib
        self.state[name] = state
        key = self._intern(state)
        if key == old_key:
            return
        classes = self.classes[node.flavor]
        members = classes[old_key]
        members.pop(bisect.bisect_left(members, name))
        if not members:
            del classes[old_key]
        bisect.insort(classes.setdefault(key, []), name)
        self.canon[name] = key
        self._dirty.add((node.flavor, node.domain))

    def domains(self, flavor: str) -> dict[tuple[CanonKey, ...], list[str]]:
        """The flavor's NVLink domains grouped by signature (refreshed lazily)."""
        for where in sorted(self._dirty):
            flavor_of, domain = where
            by_signature = self.domains_by_signature[flavor_of]
            old_signature = self.signature[where]
            members = by_signature[old_signature]
            members.pop(bisect.bisect_left(members, domain))
            if not members:
                del by_signature[old_signature]
            signature = tuple(sorted(self.canon[n] for n in self.domain_nodes[where]))
            self.signature[where] = signature
            bisect.insort(by_signature.setdefault(signature, []), domain)
        self._dirty.clear()
        return self.domains_by_signature.get(flavor, {})

    def usable(self, name: str, gpus: tuple[int, ...]) -> tuple[int, ...] | None:
        """Of a running pod's GPUs on a node, those its leaving frees for allocation; None
        when its leaving frees nothing at all (a cordoned or NotReady node)."""
        impaired = self.impaired
        if name not in impaired:
            return gpus
        unhealthy = impaired[name]
        if unhealthy is None:
            return None
        return tuple(index for index in gpus if index not in unhealthy)

    def largest_domain_gpus(self) -> dict[str, int]:
        """Per flavor, the sound GPUs of its largest NVLink domain (``NodeInfo.sound_gpus``:
        cordoned nodes and other schedulers' GPUs counted, unhealthy ones not): the largest
        gang that could ever sit inside one domain. What "never fits" is judged against
        (``CycleState.larger_than_any_domain``) and the gang sizes the Fragmentation page
        lists (``inventory.queries.flavor_fragmentation``). The nodes never change in a
        cycle: counted once, when first asked."""
        if self._largest_domain is None:
            largest: dict[str, int] = {}
            for (flavor, _), names in self.domain_nodes.items():
                gpus = sum(self.nodes[name].sound_gpus for name in names)
                largest[flavor] = max(largest.get(flavor, 0), gpus)
            self._largest_domain = largest
        return self._largest_domain

    def class_counts(self) -> dict[str, dict[CanonKey, int]]:
        """How many nodes of each flavor are in each canonical state."""
        return {
            flavor: {key: len(names) for key, names in classes.items()}
            for flavor, classes in self.classes.items()
        }


class Statement:
    """A transaction over the cluster and the quota tree; ``discard`` undoes it."""

    def __init__(
        self, cluster: ClusterState, quota: QuotaTree, parent: Statement | None = None
    ) -> None:
        self.cluster = cluster
        self.quota = quota
        self.parent = parent
        self._undo: list[Callable[[], None]] = []

    def child(self) -> Statement:
        """A nested statement whose commit hands its changes to this one."""
        return Statement(self.cluster, self.quota, self)

    def place(self, name: str, pod: PodShape, gpus: tuple[int, ...]) -> None:
        """Put a pod on a node's GPUs."""
        before = self.cluster.state[name]
        self.cluster.set_state(name, take(before, pod, gpus))
        self._undo.append(lambda: self.cluster.set_state(name, before))

    def remove(self, name: str, pod: PodShape, gpus: tuple[int, ...]) -> None:
        """Take a running pod off a node: what it held becomes free where it can be allocated
        again -- not on an unhealthy GPU, nothing on a cordoned or NotReady node."""
        cluster = self.cluster
        usable = cluster.usable(name, gpus)
        if usable is None:
            return
        before = cluster.state[name]
        cluster.set_state(name, give_back(before, pod, usable))
        cluster.generation += 1
        self._undo.append(lambda: cluster.set_state(name, before))

    def put_back(self, name: str, pod: PodShape, gpus: tuple[int, ...]) -> None:
        """Put a pod taken off with ``remove`` back where it was (its exact inverse)."""
        cluster = self.cluster
        usable = cluster.usable(name, gpus)
        if usable is None:
            return
        before = cluster.state[name]
        cluster.set_state(name, occupy(before, pod, usable))
        self._undo.append(lambda: cluster.set_state(name, before))

    def charge(self, queue: str, need: Mapping[str, int], sign: int = 1) -> None:
        """Add (or with ``sign=-1`` remove) usage of a leaf queue."""
        for flavor, amount in need.items():
            if amount:
                self.quota.add(queue, flavor, sign * amount)
        self._undo.append(lambda: self._uncharge(queue, need, sign))

    def _uncharge(self, queue: str, need: Mapping[str, int], sign: int) -> None:
        for flavor, amount in need.items():
            if amount:
                self.quota.add(queue, flavor, -sign * amount)

    def hold(self, holder: str, nodes: list[str], *, promised: bool = False) -> None:
        """Hold ``nodes`` for a workload: placement leaves them alone. A starving workload's
        hold may be opened to backfill; a ``promised`` one (a nominated preemptor's place,
        while its victims leave) never is."""
        cluster = self.cluster
        cluster.holds[holder] = nodes
        cluster.held.update(nodes)
        if promised:
            cluster.promised.add(holder)
        self._undo.append(lambda: self._release(holder, nodes))

    def _release(self, holder: str, nodes: list[str]) -> None:
        del self.cluster.holds[holder]
        self.cluster.held.difference_update(nodes)
        self.cluster.promised.discard(holder)

    def fence(self, nodes: Iterable[str]) -> None:
        """Keep placement off ``nodes``, held for no one, until the statement is discarded."""
        cluster = self.cluster
        fenced = set(nodes) - cluster.held
        cluster.held.update(fenced)
        self._undo.append(lambda: cluster.held.difference_update(fenced))

    def open_holds(self, holders: list[str]) -> None:
        """Let placement use the nodes held for ``holders`` (the holds stay recorded)."""
        cluster = self.cluster
        opened = {node for holder in holders for node in cluster.holds[holder]}
        opened &= cluster.held
        cluster.held.difference_update(opened)
        self._undo.append(lambda: cluster.held.update(opened))

    def commit(self) -> None:
        """Keep every change (a nested statement hands them to its parent)."""
        if self.parent is not None:
            self.parent._undo.extend(self._undo)
        self._undo.clear()

    def discard(self) -> None:
        """Undo every change, newest first."""
        while self._undo:
            self._undo.pop()()
