"""Gang placement that fights fragmentation.

Pods are placed one at a time on a Statement, in the order requested; a gang that cannot
reach its minimum is discarded whole, and an elastic one that stops short keeps its first
pods. Each placed pod carries its request's identity (pod set and index), so an admission
says which pod goes where whatever the order. For each pod the node is chosen by, in order:

1. the growth of the pool's expected fragmentation for its recent request sizes
   (``fragmentation.placement_cost``: FGD, Weng et al., USENIX ATC'23);
2. fewest NVLink domains spanned by the gang (a node in a domain the gang already uses wins);
3. best fit (least free milli-GPU left on the node);
4. the node's name.

Scores depend only on a node's canonical state, so they are computed once per distinct state
and flavor, not once per node. A ``domain`` gang is tried once per distinct domain signature
(the multiset of its nodes' states) and lands in the cheapest; ``preferred`` tries that first
and falls back to spanning domains.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from gpupool.scheduler.fragmentation import (
    NodeState,
    PodShape,
    ShapeDistribution,
    pick_gpus,
    placement_cost,
    take,
)
from gpupool.scheduler.statement import CanonKey, ClusterState, PlacedPod, Statement, canonical
from gpupool.scheduler.types import MILLI, Topology

NO_DISTRIBUTION = ShapeDistribution(())


@dataclass(frozen=True, slots=True)
class PodRequest:
    """One pod of a gang: its shape, the flavor it was assigned, and which pod it is (its pod
    set's index in the workload, its index in the pod set), carried to its ``PlacedPod``;
    ``allowed`` restricts it to those nodes (None: any node of the flavor)."""

    shape: PodShape
    flavor: str
    pod_set: int
    index: int
    allowed: frozenset[str] | None = None

    def may_use(self, node: str) -> bool:
        """Whether the pod may go to ``node`` (its pod set's allowed nodes)."""
        return self.allowed is None or node in self.allowed


Candidate = tuple[float, int, int, str]


class Placer:
    """Places gangs on a cluster; caches scores per (flavor, canonical state, pod shape)."""

    def __init__(
        self,
        cluster: ClusterState,
        distributions: Mapping[str, ShapeDistribution],
        mode: str = "gpupool",
    ) -> None:
        self.cluster = cluster
        self.distributions = dict(distributions)
        self.mode = mode
        self._costs: dict[tuple[str, int], tuple[PodShape, dict[CanonKey, float | None]]] = {}
        self._per_node: dict[tuple[CanonKey, int], tuple[PodShape, int]] = {}

    def costs(self, flavor: str, shape: PodShape) -> dict[CanonKey, float | None]:
        """The known costs of the pod on the flavor's canonical states (``cost`` fills it)."""
        # Keyed by the shape's identity (shapes are interned; hashing a dataclass is not
        # free), and the shape is kept with the table so a recycled id cannot alias. One
        # table per (flavor, shape) lets a scan over node states look each up directly.
        memo = (flavor, id(shape))
        known = self._costs.get(memo)
        if known is None or known[0] is not shape:
            known = self._costs[memo] = (shape, {})
        return known[1]

    def cost(self, flavor: str, key: CanonKey, shape: PodShape) -> float | None:
        """Cost of putting the pod on a node in canonical state ``key`` (None: no fit)."""
        table = self.costs(flavor, shape)
        if key in table:
            return table[key]
        state = self.cluster.canon_state.get(key) or NodeState(key[0], key[1], key[2])
        dist = NO_DISTRIBUTION if self.mode == "bestfit" else self.distributions.get(flavor)
        value = table[key] = placement_cost(state, shape, dist or NO_DISTRIBUTION)
        return value

    def pods_per_node(self, key: CanonKey, shape: PodShape) -> int:
        """How many pods of the shape a node in canonical state ``key`` could hold."""
        memo = (key, id(shape))
        hit = self._per_node.get(memo)
        if hit is not None and hit[0] is shape:
            return hit[1]
        limits = []
        if shape.cpu_milli:
            limits.append(key[1] // shape.cpu_milli)
        if shape.memory_mib:
            limits.append(key[2] // shape.memory_mib)
        if shape.gpus and shape.milli >= MILLI:
            limits.append(sum(1 for free in key[0] if free >= MILLI) // shape.gpus)
        elif shape.gpus:
            limits.append(sum(free // shape.milli for free in key[0]))
        count = min(limits) if limits else 1 << 30
        self._per_node[memo] = (shape, count)
        return count

    def may_fit(self, pods: Sequence[PodRequest], minimum: int) -> bool:
        """A cheap necessary condition: enough room, counted per node state, for the gang.

        (A single pod needs no pre-check: looking for its node is as cheap.)
        """
        if len(pods) <= 1:
            return True
        wanted: dict[tuple[str, int], tuple[PodShape, int]] = {}
        for pod in pods[: max(minimum, 1)]:
            memo = (pod.flavor, id(pod.shape))
            known = wanted.get(memo)
            wanted[memo] = (pod.shape, 1 if known is None else known[1] + 1)
        for (flavor, _), (shape, count) in wanted.items():
            room = 0
            for key, names in self.cluster.classes.get(flavor, {}).items():
                room += len(names) * self.pods_per_node(key, shape)
                if room >= count:
                    break
            if room < count:
                return False
        return True

    def pick(self, flavor: str, state: NodeState, shape: PodShape) -> tuple[int, ...] | None:
        """The GPUs the pod takes on a node, chosen with the same score as the node.

        Whole GPUs are interchangeable (the lowest free indices); only a fraction's GPU is
        chosen by score. Every caller chose the node by ``cost``, which is None when the pod
        does not fit, so whole GPUs are taken without checking the fit again (``take`` still
        validates the result); that check was a tenth of an admission.
        """
        if not shape.is_fraction:
            whole = [i for i, free in enumerate(state.gpu_free_milli) if free >= MILLI]
            return tuple(whole[: shape.gpus]) if len(whole) >= shape.gpus else None
        if self.mode == "bestfit":
            return pick_gpus(state, shape)
        return pick_gpus(state, shape, self.distributions.get(flavor))

    def place(
        self,
        statement: Statement,
        pods: Sequence[PodRequest],
        minimum: int,
        topology: Topology | None,
    ) -> list[PlacedPod] | None:
        """Place the gang on the statement (at least ``minimum`` pods) or return None."""
        if topology is not None:
            # ``domain``: at least the minimum inside one domain (an elastic gang takes as
            # many more as that domain holds); ``preferred``: the whole gang in one domain,
            # else spread.
            inside = minimum if topology == "domain" else len(pods)
            placed = self._place_in_one_domain(statement, pods, inside)
            if placed is not None or topology == "domain":
                return placed
        return self._place_spread(statement, pods, minimum)

    def place_one(
        self, statement: Statement, pod: PodRequest, domains: set[str]
    ) -> PlacedPod | None:
        """Place one more pod of a running gang on the statement, chosen as the spread
        placement chooses each pod (a node in one of ``domains``, those the gang uses, wins a
        tie on cost), or return None when no node may hold it."""
        choice = self._best_node(pod, domains)
        if choice is None:
            return None
        gpus = self.pick(pod.flavor, self.cluster.state[choice], pod.shape)
        if gpus is None:  # pragma: no cover - the canonical state said it fits
            return None
        statement.place(choice, pod.shape, gpus)
        return PlacedPod(choice, gpus, pod.shape, pod.pod_set, pod.index)

    def largest_placeable(self, statement: Statement, pods: Sequence[PodRequest]) -> int:
        """How many of the gang's pods fit now, ignoring topology (tried, then undone)."""
        trial = Statement(statement.cluster, statement.quota)
        placed = self._place_spread(trial, pods, 0, stop_at_first_failure=False)
        trial.discard()
        return 0 if placed is None else len(placed)

    # -- spread over the flavor's nodes ---------------------------------------------------

    def _place_spread(
        self,
        statement: Statement,
        pods: Sequence[PodRequest],
        minimum: int,
        stop_at_first_failure: bool = True,
    ) -> list[PlacedPod] | None:
        placed: list[PlacedPod] = []
        domains: set[str] = set()
        for pod in pods:
            choice = self._best_node(pod, domains)
            if choice is None:
                if stop_at_first_failure:
                    break
                continue
            gpus = self.pick(pod.flavor, self.cluster.state[choice], pod.shape)
            if gpus is None:  # pragma: no cover - the canonical state said it fits
                break
            statement.place(choice, pod.shape, gpus)
            placed.append(PlacedPod(choice, gpus, pod.shape, pod.pod_set, pod.index))
            domains.add(self.cluster.nodes[choice].domain)
        if len(placed) < max(minimum, 1 if pods else 0) and stop_at_first_failure:
            return None
        return placed

    def _best_node(self, pod: PodRequest, domains: set[str]) -> str | None:
        cluster = self.cluster
        best: Candidate | None = None
        held = cluster.held
        known = self.costs(pod.flavor, pod.shape)
        for key, names in cluster.classes.get(pod.flavor, {}).items():
            cost = known[key] if key in known else self.cost(pod.flavor, key, pod.shape)
            if cost is None:
                continue
            name = names[0]
            if (held and name in held) or not pod.may_use(name):
                free = [n for n in names if n not in held and pod.may_use(n)]
                if not free:
                    continue
                name = free[0]
            leftover = sum(key[0]) - pod.shape.gpu_milli_total
            spans = 0 if not domains or cluster.nodes[name].domain in domains else 1
            candidate = (cost, spans, leftover, name)
            if best is None or candidate < best:
                best = candidate
        if domains and best is not None and best[1] == 1:
            for domain in sorted(domains):
                for name in cluster.domain_nodes.get((pod.flavor, domain), ()):
                    if name in held or not pod.may_use(name):
                        continue
                    key = cluster.canon[name]
                    cost = self.cost(pod.flavor, key, pod.shape)
                    if cost is None:
                        continue
                    candidate = (cost, 0, sum(key[0]) - pod.shape.gpu_milli_total, name)
                    if candidate < best:
                        best = candidate
        return None if best is None else best[3]

    # -- inside one NVLink domain -----------------------------------------------------------

    def _place_in_one_domain(
        self, statement: Statement, pods: Sequence[PodRequest], minimum: int
    ) -> list[PlacedPod] | None:
        """At least ``minimum`` of the pods inside one NVLink domain: the domain that holds
        the most of them, then the cheapest; the pods it holds are the first ones."""
        if not pods:
            return []
        cluster = self.cluster
        flavor = pods[0].flavor
        need = sum(pod.shape.gpu_milli_total for pod in pods[:minimum] if pod.flavor == flavor)
        # Domains of one signature are interchangeable unless held or allowed nodes differ.
        alike = not cluster.held and all(pod.allowed is None for pod in pods)
        best: tuple[int, float, int, str, list[PlacedPod]] | None = None
        for signature, domains in cluster.domains(flavor).items():
            if sum(sum(key[0]) for key in signature) < need:
                continue
            for domain in domains:
                trial = self._trial_in_domain(domain, pods, minimum)
                if trial is None:
                    if alike:
                        break
                    continue
                cost, leftover, placed = trial
                candidate = (-len(placed), cost, leftover, domain, placed)
                if best is None or candidate[:4] < best[:4]:
                    best = candidate
                if not cluster.held:
                    break
        if best is None:
            return None
        for pod in best[4]:
            statement.place(pod.node, pod.shape, pod.gpus)
        return best[4]

    def _trial_in_domain(
        self, domain: str, pods: Sequence[PodRequest], minimum: int
    ) -> tuple[float, int, list[PlacedPod]] | None:
        cluster = self.cluster
        local: dict[str, NodeState] = {}
        placed: list[PlacedPod] = []
        total = 0.0
        for pod in pods:
            best: Candidate | None = None
            for name in cluster.domain_nodes.get((pod.flavor, domain), ()):
                if name in cluster.held or not pod.may_use(name):
                    continue
                state = local.get(name, cluster.state[name])
                key = canonical(state)
                cost = self.cost(pod.flavor, key, pod.shape)
                if cost is None:
                    continue
                candidate = (cost, 0, sum(key[0]) - pod.shape.gpu_milli_total, name)
                if best is None or candidate < best:
                    best = candidate
            if best is None:
                if len(placed) >= max(minimum, 1):
                    break  # an elastic gang keeps the first pods the domain holds
                return None
            name = best[3]
            state = local.get(name, cluster.state[name])
            gpus = self.pick(pod.flavor, state, pod.shape)
            if gpus is None:  # pragma: no cover - the canonical state said it fits
                return None
            local[name] = take(state, pod.shape, gpus)
            placed.append(PlacedPod(name, gpus, pod.shape, pod.pod_set, pod.index))
            total += best[0]
        leftover = sum(
            sum(local.get(name, cluster.state[name]).gpu_free_milli)
            for name in cluster.domain_nodes.get((pods[0].flavor, domain), ())
        )
        return total, leftover, placed


def count_placeable(
    classes: Mapping[CanonKey, int], shapes: Sequence[PodShape], placer_cost: Placer, flavor: str
) -> int:
    """How many of the pods fit on nodes with the given state counts (greedy, best fit)."""
    counts = dict(classes)
    placed = 0
    for shape in shapes:
        best: tuple[float, CanonKey] | None = None
        for key, count in counts.items():
            if count <= 0:
                continue
            cost = placer_cost.cost(flavor, key, shape)
            if cost is not None and (best is None or (cost, key) < best):
                best = (cost, key)
        if best is None:
            continue
        key = best[1]
        state = NodeState(key[0], key[1], key[2])
        gpus = placer_cost.pick(flavor, state, shape)
        if gpus is None:  # pragma: no cover - cost said it fits
            continue
        after = canonical(take(state, shape, gpus))
        counts[key] -= 1
        counts[after] = counts.get(after, 0) + 1
        placed += 1
    return placed
