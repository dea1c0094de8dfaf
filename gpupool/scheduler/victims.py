"""Where preempt and reclaim look for victims, in what order, and the checks around the search.

``preemption.find_victims`` removes candidates on a Statement until the preemptor fits; this
module gives it its inputs for one blocked workload of a ``Cycle``:

- **candidates** -- for preempt, the evictable workloads of the preemptor's own queue with a
  strictly lower effective priority (``preempt_candidates``); for reclaim, the evictable
  workloads of reclaimable queues above their deserved share, nearest in the queue tree first,
  borrowed work first, then the cheapest (``ReclaimSearch.candidates``);
- **orders** -- the policy's victim search (``preemption.VICTIM_SEARCHES``): the preference
  order alone, or also a lone victim smallest first and a biggest-first pass
  (``search_orders``), with the cheap tests that skip hopeless work: can one victim be
  enough (``might_suffice``), could every candidate together make room (``room_without``);
- **guards** -- conditions that depend on earlier removals: a reclaim victim's queue stays at
  its deserved share up to the common ancestor (``stays_at_deserved``), and fair-share
  reclaim takes only from queues that stay fairer off than the reclaimer (``fairer_after``).
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence

from gpupool.scheduler.cycle_state import Assignment, Cycle, PendingWork
from gpupool.scheduler.preemption import (
    GREEDY,
    VICTIM_SEARCHES,
    RunningWork,
    SearchOrders,
    held,
    lowest_then_smallest,
    mark_borrowed,
    size_first,
)
from gpupool.scheduler.types import MILLI, SECONDS_PER_HOUR

VictimKey = Callable[[RunningWork], tuple[int, ...]]


def preempt_candidates(cycle: Cycle, queue: str, work: PendingWork) -> list[RunningWork]:
    """Victims a preemption may take for ``work``: its queue's evictable workloads of strictly
    lower effective priority, not already evicted, holding a flavor it may use."""
    flavors = {f for a in work.assignments for f in a.need}
    value = work.standing.value
    return [
        victim
        for victim in cycle.running_by_queue.get(queue, ())
        if victim.evictable
        and victim.value < value
        and victim.name not in cycle.evicted
        and (not flavors or not victim.need or victim.need.keys() & flavors)
    ]


def search_orders(cycle: Cycle, work: PendingWork, reclaimer: str | None) -> SearchOrders:
    """How ``find_victims`` searches for ``work`` under the policy's victim search.

    "fewest" (the product's): a lone victim if one is enough, the smallest such within the
    candidates' leading criteria, else the fewest; ``reclaimer`` (None for preempt) puts tree
    distance in front of size. "greedy" (Kueue's): the preference-order pass alone.
    """
    if not VICTIM_SEARCHES[cycle.policy.victim_search].by_size:
        return GREEDY
    single, floor = might_suffice(cycle, work)
    room = room_without(cycle, work)
    allowance = allowance_of(cycle)
    if reclaimer is None:
        return SearchOrders(
            single, size_first, lowest_then_smallest, allowance, room, lone_floor=floor
        )
    biggest, smallest = reclaim_orders(cycle, reclaimer)
    return SearchOrders(single, biggest, smallest, allowance, room, lone_floor=floor)


def might_suffice(cycle: Cycle, work: PendingWork) -> tuple[Callable[[RunningWork], bool], int]:
    """Whether one victim frees as many GPUs of each flavor as the preemptor lacks, and the
    fewest milli-GPUs such a victim can hold."""
    need = cycle.minimum_need(work)
    missing = {
        flavor: max(
            amount - cycle.cluster.free_gpu[flavor],
            amount - cycle.quota.available(work.info.queue, flavor),
        )
        for flavor, amount in need.items()
    }

    def check(victim: RunningWork) -> bool:
        return all(victim.need.get(flavor, 0) >= amount for flavor, amount in missing.items())

    return check, sum(max(amount, 0) for amount in missing.values())


def room_without(cycle: Cycle, work: PendingWork) -> Callable[[Sequence[RunningWork]], bool]:
    """A cheap necessary condition for a victim search: with every candidate gone, would some
    assignment's whole-GPU pods find enough whole GPUs, node by node? CPU, memory, GPU
    models, domains, holds and GPU health are left out, and a candidate's GPUs count as freed
    whole, so it only ever says no when placement must fail. Pods sharing GPUs (fractions) or
    asking none are not checked."""

    def check(candidates: Sequence[RunningWork]) -> bool:
        return not work.assignments or any(
            _whole_gpu_room(cycle, assignment, work.minimum, candidates)
            for assignment in work.assignments
        )

    return check


def _whole_gpu_room(
    cycle: Cycle, assignment: Assignment, minimum: int, candidates: Sequence[RunningWork]
) -> bool:
    wanted: Counter[tuple[str, int]] = Counter()
    for pod in assignment.pods[: max(minimum, 1)]:
        if pod.shape.gpus == 0 or pod.shape.milli < MILLI:
            return True
        wanted[(pod.flavor, pod.shape.gpus)] += 1
    cluster = cycle.cluster
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
                node = cycle.nodes[name]
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


def allowance_of(cycle: Cycle) -> Callable[[RunningWork], float]:
    """GPU-hours of a victim's work its protected window covers: what its contract expects an
    eviction may throw away (a window is meant to reach a first checkpoint)."""

    def allowance(victim: RunningWork) -> float:
        seconds = cycle.contracts.protected_runtime(victim.info)
        return sum(victim.need.values()) / MILLI * seconds / SECONDS_PER_HOUR

    return allowance


def tree_distance(cycle: Cycle, reclaimer: str) -> Callable[[RunningWork], int]:
    """How far up the reclaimer's path a victim's queue meets it (0: same queue)."""
    path = cycle.quota.path[reclaimer]
    distances: dict[str, int] = {}  # per victim queue: the same for all its workloads

    def distance(victim: RunningWork) -> int:
        queue = victim.info.queue
        found = distances.get(queue)
        if found is None:
            shared = set(cycle.quota.path[queue])
            found = next(i for i, node in enumerate(path) if node in shared)
            distances[queue] = found
        return found

    return distance


def reclaim_orders(cycle: Cycle, reclaimer: str) -> tuple[VictimKey, VictimKey]:
    """Reclaim's two size orders, on one tree-distance memo: for the fewest-victims pass,
    nearest in the tree then biggest; among lone victims, the candidates' own criteria
    (nearest, the same queue, borrowed first, lowest priority) then fewest GPUs held -- a
    smaller lone victim comes from the queue the preferred one comes from."""
    distance = tree_distance(cycle, reclaimer)
    ordinal = cycle.queue_ordinal

    def nearest_then_biggest(victim: RunningWork) -> tuple[int, ...]:
        return (distance(victim), *size_first(victim))

    def nearest_then_smallest(victim: RunningWork) -> tuple[int, ...]:
        queue = ordinal[victim.info.queue]
        return (distance(victim), queue, not victim.borrowed, victim.value, held(victim))

    return nearest_then_biggest, nearest_then_smallest


class ReclaimSearch:
    """Reclaim's candidate lists for one cycle, kept between its victim searches (the lenders
    under each ancestor and each queue's victims are fixed within a cycle)."""

    def __init__(self, cycle: Cycle) -> None:
        self.cycle = cycle
        self._queue_victims: dict[tuple[str, str], list[RunningWork]] = {}
        self._lenders_memo: dict[tuple[str, str], list[str]] = {}
        self._borrow_marked: set[str] = set()

    def candidates(
        self,
        reclaimer: str,
        flavor: str,
        among: Callable[[str], bool] | None = None,
        start: int = 1,
    ) -> Iterator[RunningWork]:
        """Victims holding ``flavor`` for a reclaim: nearest in the tree first; among queues
        equally near, the one furthest above its deserved share, recomputed after each pick;
        inside a queue borrowed work first, then the cheapest.

        Walks the reclaimer's ancestors from ``path[start]`` (1: its parent; a leaf that
        reclaims for an ancestor's share starts above that ancestor); each contributes the
        evictable workloads of reclaimable queues in its subtree not already offered by a
        nearer one, from queues above their deserved share only (and, if given, only queues
        ``among`` accepts). "Furthest above" is the queue's usage of the contested flavor
        beyond its deserved share, over its weight (Kueue's fair-sharing preemption takes its
        next target the same way, by dominant resource share); each pick lowers its queue's
        by what the victim holds, so the order is what picking one by one would give.
        """
        cycle = self.cycle
        path = cycle.quota.path[reclaimer]
        over_deserved_by = cycle.quota.over_deserved_by
        evicted = cycle.evicted
        for depth in range(max(start, 1), len(path)):
            # Per lending queue: (-its excess over its weight, name, index into its victims)
            heap: list[tuple[float, str, int]] = []
            for leaf in self._lenders(path[depth], path[depth - 1]):
                excess = over_deserved_by(leaf, flavor)
                if excess > 0 and (among is None or among(leaf)) and self._victims_of(leaf, flavor):
                    heap.append((-excess / cycle.queues[leaf].weight, leaf, 0))
            heapq.heapify(heap)
            while heap:
                neg, leaf, index = heapq.heappop(heap)
                queue_victims = self._victims_of(leaf, flavor)
                while index < len(queue_victims) and queue_victims[index].name in evicted:
                    index += 1
                if index >= len(queue_victims):
                    continue
                victim = queue_victims[index]
                if index + 1 < len(queue_victims):
                    taken = victim.need.get(flavor, 0) / cycle.queues[leaf].weight
                    heapq.heappush(heap, (neg + taken, leaf, index + 1))
                yield victim

    def queue_order(self, flavor: str) -> Callable[[RunningWork], Iterable[RunningWork]]:
        """A victim's own queue's candidates for ``flavor``, in order: reclaim's candidates
        interleave queues (furthest above its share first), so a smaller lone victim from the
        preferred one's queue is looked for there (``SearchOrders.tier_of``)."""

        def tier_of(victim: RunningWork) -> Iterable[RunningWork]:
            return [
                running
                for running in self._victims_of(victim.info.queue, flavor)
                if running.name not in self.cycle.evicted
            ]

        return tier_of

    def _lenders(self, ancestor: str, nearer: str) -> list[str]:
        """Reclaimable leaves under ``ancestor`` but not under ``nearer`` (fixed in a cycle)."""
        memo = (ancestor, nearer)
        leaves = self._lenders_memo.get(memo)
        if leaves is None:
            cycle = self.cycle
            leaves = self._lenders_memo[memo] = [
                leaf
                for leaf in cycle.leaves_under[ancestor]
                if nearer not in cycle.quota.path[leaf] and cycle.queues[leaf].reclaimable
            ]
        return leaves

    def _victims_of(self, queue: str, flavor: str) -> list[RunningWork]:
        """A queue's evictable workloads holding ``flavor``: borrowers first, then cheapest."""
        memo = (queue, flavor)
        victims = self._queue_victims.get(memo)
        if victims is None:
            cycle = self.cycle
            if queue not in self._borrow_marked:
                self._borrow_marked.add(queue)
                deserved = {f: q.deserved for f, q in cycle.queues[queue].quota.items()}
                mark_borrowed(cycle.all_running_by_queue.get(queue, []), deserved)
            victims = sorted(
                (v for v in cycle.running_by_queue.get(queue, ()) if flavor in v.need),
                key=_reclaim_key,
            )
            self._queue_victims[memo] = victims
        return victims


def _reclaim_key(victim: RunningWork) -> tuple[bool, tuple[float, float, float, str]]:
    """Reclaim preference inside a queue: borrowed workloads first, then the cheapest."""
    return (not victim.borrowed, victim.order)


def stays_at_deserved(cycle: Cycle, reclaimer: str) -> Callable[[RunningWork], bool]:
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


def above_deserved(cycle: Cycle, reclaimer: str) -> Callable[[RunningWork], bool]:
    """Guard, when no victim set keeps every queue at its deserved share: each queue up to
    the common ancestor is above its deserved share before the eviction (so the last victim
    taken from it may take it below, as Kueue, KAI and Volcano allow)."""
    reclaimer_path = set(cycle.quota.path[reclaimer])

    def guard(victim: RunningWork) -> bool:
        for node in cycle.quota.path[victim.info.queue]:
            if node in reclaimer_path:
                break
            for flavor, amount in victim.need.items():
                quota = cycle.quota.quota(node, flavor)
                if (
                    amount
                    and quota is not None
                    and cycle.quota.usage[node][flavor] <= quota.deserved
                ):
                    return False
        return True

    return guard


def fairer_after(
    cycle: Cycle,
    reclaimer: str,
    need: Mapping[str, int],
    flavor: str,
    guard: Callable[[RunningWork], bool],
) -> tuple[Callable[[str], bool], Callable[[RunningWork], bool]] | None:
    """Fair-share reclaim by a queue above deserved: victims only from queues that stay fairer off.

    A queue's share here is its usage of the contested flavor over its weight (the pool's
    capacity is common to both sides). The reclaimer's share counts the workload it admits; a
    victim's queue must be above that share before the eviction and at least at it after
    (Kueue's fair-sharing preemption, LessThanOrEqualToFinalShare: 3:1 becomes 2:2). The
    reverse move would need the victim's queue, after readmitting, to be at most the
    reclaimer's share after losing it -- the opposite inequality -- so two queues cannot
    trade the same GPUs back and forth. The victim queue also stays at its deserved share.

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
        return guard(victim) and after / queues[queue].weight >= mine

    return above, fairer


__all__ = [
    "ReclaimSearch",
    "fairer_after",
    "preempt_candidates",
    "search_orders",
    "stays_at_deserved",
]
