"""One scheduling cycle: ``plan(snapshot, policy, now) -> Plan``.

The cycle is five numbered phases (docs/scheduler.md), each a function of the ``Cycle`` it
works on (``cycle_state.py``), registered in ``PHASES`` in order so a policy can drop or
reorder them (``policy.phases``):

    # 1 enqueue   set aside what cannot run this cycle: missing pods, victims still leaving,
                  a gang no capability on its path or the pool could ever hold
    # 2 allocate  queues in the policy's order (weighted DRF, or the heads' rank), inside a
                  queue by rank; quota, then capacity, then gang placement
    # 3 preempt   inside the queue: strictly lower priority, outside protected windows
    # 4 reclaim   across queues: from borrowers above deserved, never below it
    # 5 backfill  idle GPUs behind a hold, for work that can be evicted at any time

This file reads top to bottom: ``plan``, then each phase with the helpers only it uses, then
how a finished cycle becomes a ``Plan``. Where the victims of phases 3 and 4 come from is
``victims.py``; how a set of them is chosen is ``preemption.py``.

Every tentative change goes on a Statement and is committed only when the whole step
succeeds. A preemptor is not admitted in the cycle that evicts for it: the capacity its
victims free is reserved for it on the cluster state, and it is reported as
``waiting-for-preemption``.
"""

from __future__ import annotations

import heapq
from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from gpupool.scheduler.cycle_state import Assignment, Cycle, PendingWork, prefix_need
from gpupool.scheduler.explain import Verdict, explanation, quota_verdict
from gpupool.scheduler.preemption import find_victims
from gpupool.scheduler.statement import Statement
from gpupool.scheduler.types import (
    Admission,
    PendingExplanation,
    Plan,
    PodPlacement,
    PodRef,
    PolicyInfo,
    Snapshot,
)
from gpupool.scheduler.victims import (
    ReclaimSearch,
    fairer_after,
    preempt_candidates,
    search_orders,
    stays_at_deserved,
)


def plan(snapshot: Snapshot, policy: PolicyInfo, now: float) -> Plan:
    """Decide one cycle: what to admit where, what to evict, and why the rest waits."""
    return plan_of(run_cycle(snapshot, policy, now))


def run_cycle(snapshot: Snapshot, policy: PolicyInfo, now: float) -> Cycle:
    """Run the policy's phases in order and return the finished cycle."""
    cycle = Cycle(snapshot, policy, now)
    for name in policy.phases:
        PHASES[name](cycle)
    return cycle


# -- 1 enqueue ------------------------------------------------------------------------------------


def enqueue(cycle: Cycle) -> None:
    """# 1 Settle what keeps a workload out of this cycle: missing pods, quota, victims."""
    leaving = cycle.leaving
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
            work.victims = [victim.name for victim in leaving[info.name]]
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


# -- 2 allocate -----------------------------------------------------------------------------------


def allocate(cycle: Cycle) -> None:
    """# 2 Queues by DRF (or rank); inside a queue by rank; quota, then gang placement."""
    cycle.snapshot_start()
    # Promises first: a preemptor whose victims are still leaving keeps its place (what they
    # free is held for it); one whose victims are gone is served before anyone else.
    for name in sorted(cycle.leaving):
        cycle.keep_promise(cycle.pending[name])
    nominated = sorted(
        (w for w in cycle.pending.values() if w.info.nominated and w.schedulable),
        key=lambda w: w.rank,
    )
    for work in nominated:
        _attempt(cycle, work)
    order = QUEUE_ORDERS[cycle.policy.queue_order]
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
        # Keys only grow while allocate admits (shares rise, also through a sister queue's
        # admissions under a common ancestor): a stale key is refreshed and queued again.
        fresh = order.key(cycle, queue, served)
        if fresh != key:
            heapq.heappush(heap, (fresh, queue))
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
            result.reason in HOLDING_REASONS
            and cycle.contracts.starving(work.info)
            and work.name not in cycle.cluster.holds
        ):
            assignment = work.assignments[0]
            if cycle.quota.check(work.info.queue, cycle.minimum_need(work, assignment)) is None:
                nodes = cycle.hold_for(work, assignment, statement)
                if nodes is not None:
                    statement.commit()
                    facts = {**result.facts, "holding_capacity": True, "held_nodes": nodes}
                    work.verdict = Verdict(result.reason, facts)
        return False
    statement.commit()
    cycle.admit(work, *result)
    return True


# What a starving workload stopped by these is held capacity for (quota stops it otherwise).
HOLDING_REASONS = frozenset({"capacity", "fragmentation", "behind", "topology"})


@dataclass(frozen=True, slots=True)
class QueueOrderStrategy:
    """``policy.queue_order``: how allocate picks the next queue, by a key of it and its head.

    ``by_head``: the key depends on the head, so it is recomputed for every new head (not
    only after an admission changed the queue's usage).
    """

    key: Callable[[Cycle, str, PendingWork], tuple[object, ...]]
    by_head: bool


def _dominant_share(cycle: Cycle, queue: str, head: PendingWork) -> tuple[object, ...]:
    """Hierarchical weighted dominant share: from the top of the tree down, the smallest
    share at each level (ties by name)."""
    return cycle.shares.path_key(queue)


def _head_rank(cycle: Cycle, queue: str, head: PendingWork) -> tuple[object, ...]:
    """Kueue's order without fair sharing: within deserved first, priority, submit time."""
    need = head.assignments[0].need if head.assignments else {}
    return (not cycle.quota.below_deserved(queue, need), *head.rank, queue)


QUEUE_ORDERS: Mapping[str, QueueOrderStrategy] = {
    "dominant-share": QueueOrderStrategy(_dominant_share, by_head=False),
    "head-rank": QueueOrderStrategy(_head_rank, by_head=True),
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


# -- 3 preempt ------------------------------------------------------------------------------------


def preempt(cycle: Cycle) -> None:
    """# 3 Inside a queue: evict strictly lower priority outside protected windows."""
    for queue in sorted(cycle.by_queue):
        attempts = 0
        for work in cycle.blocked_in_order(queue):
            if attempts >= cycle.policy.preemption_attempts_per_queue:
                break
            if not work.standing.may_preempt:
                continue
            backfilled = cycle.backfilled_on_hold(work)
            if backfilled:
                # What backfilled onto its hold goes first, whatever its queue.
                statement = _search_statement(cycle, work)
                victims = find_victims(statement, backfilled, cycle.fits(work))
                if victims is not None:
                    attempts += 1
                    if cycle.reserve(work, statement, victims):
                        cycle.evict(victims, "preempt", work.name)
                    continue
                statement.discard()
            candidates = preempt_candidates(cycle, queue, work)
            if not candidates:
                continue
            attempts += 1
            statement = _search_statement(cycle, work)
            search = search_orders(cycle, work, None)
            victims = find_victims(statement, candidates, cycle.fits(work), orders=search)
            if victims is None:
                continue
            if cycle.reserve(work, statement, victims):
                cycle.evict(victims, "preempt", work.name)


def _search_statement(cycle: Cycle, work: PendingWork) -> Statement:
    """A statement for a victim search on behalf of ``work``: the capacity held for it, if
    any, is open to it (its reservation, when committed, takes that hold's place)."""
    statement = Statement(cycle.cluster, cycle.quota)
    if work.name in cycle.cluster.holds:
        statement.open_holds([work.name])
    return statement


# -- 4 reclaim ------------------------------------------------------------------------------------


# Fair-share reclaim (a queue above deserved taking from one further above) is a refinement
# of the order, not an entitlement: its victim searches are bounded per cycle, lowest share
# first, so a pool with hundreds of borrowing queues keeps its cycle time (B1).
FAIR_RECLAIM_SEARCHES = 16


def reclaim(cycle: Cycle) -> None:
    """# 4 Across queues: take back lent capacity from borrowers above their deserved share.

    First every queue that stays within its deserved share, in name order. Then, with fair
    sharing on, queues already at or above theirs, lowest weighted share first: each may take
    borrowed capacity from a queue whose share of the contested flavor stays above its own
    after the move (``victims.fairer_after``), within ``FAIR_RECLAIM_SEARCHES`` searches a cycle.
    """
    search = ReclaimSearch(cycle)
    for queue in sorted(cycle.by_queue):
        _reclaim_in(cycle, search, queue, fair=False, budget=None)
    if not cycle.policy.fair_reclaim:
        return
    budget = FAIR_RECLAIM_SEARCHES
    for queue in sorted(cycle.by_queue, key=lambda q: (cycle.shares.share(q), q)):
        if budget <= 0:
            break
        budget -= _reclaim_in(cycle, search, queue, fair=True, budget=budget)


def _reclaim_in(
    cycle: Cycle, search: ReclaimSearch, queue: str, *, fair: bool, budget: int | None
) -> int:
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
        if not work.standing.may_reclaim:
            continue
        need = cycle.minimum_need(work)
        # Reclaim returns lent GPU quota; work that asks no GPU has none to reclaim.
        if not any(need.values()) or cycle.quota.below_deserved(queue, need) == fair:
            continue
        flavor = max(need, key=lambda f: (need[f], f))
        guard = stays_at_deserved(cycle, queue)
        among: Callable[[str], bool] | None = None
        if fair:
            found = fairer_after(cycle, queue, need, flavor, guard)
            if found is None:
                continue
            among, guard = found
        statement = _search_statement(cycle, work)
        attempts += 1
        victims = find_victims(
            statement,
            search.candidates(queue, flavor, among),
            cycle.fits(work),
            guard,
            orders=search_orders(cycle, work, queue),
        )
        if victims is None:
            continue
        if cycle.reserve(work, statement, victims):
            cycle.evict(victims, "reclaim", work.name)
    return attempts


# -- 5 backfill -----------------------------------------------------------------------------------


def backfill(cycle: Cycle) -> None:
    """# 5 Capacity held for a starving workload, lent to work that gives it back in time.

    Holder by holder (in rank order), its hold is opened to work kept off it (``behind``)
    that either is expected to end before the holder could start (Slurm's backfill rule) or
    has no protected window and is of a priority the holder may evict, whatever its queue:
    such an admission names the holder (``backfill_for``), which evicts it once that makes
    room for it (phase 3). Backfill evicts nobody, and quota applies as in allocate.
    """
    cluster = cycle.cluster
    holders = sorted(
        (cycle.pending[h] for h in cluster.holds if h not in cluster.promised),
        key=lambda w: w.rank,
    )
    if not holders:
        return
    candidates = [
        work
        for work in sorted(cycle.pending.values(), key=lambda w: w.rank)
        if work.schedulable
        and work.verdict is not None
        and work.verdict.reason == "behind"
        and "blocked_by" not in work.verdict.facts
        and work.name not in cycle.waiting
        and work.name not in cluster.holds
    ]
    for holder in holders:
        start = cycle.hold_start(holder)
        held = set(cluster.holds[holder.name])
        opened = Statement(cluster, cycle.quota)
        opened.open_holds([holder.name])
        for work in candidates:
            if work.name in cycle.admitted:
                continue
            evictable = _hold_may_evict(cycle, holder, work)
            runtime = work.info.expected_runtime_s
            in_time = start is not None and runtime is not None and cycle.now + runtime <= start
            if not (evictable or in_time):
                continue
            statement = Statement(cluster, cycle.quota)
            result = cycle.try_place(work, statement)
            if isinstance(result, Verdict):
                statement.discard()
                continue
            statement.commit()
            assignment, placed = result
            on_hold = evictable and any(pod.node in held for pod in placed)
            cycle.admit(work, assignment, placed, backfill_for=holder.name if on_hold else None)
        opened.discard()  # the hold closes again behind what backfill placed


def _hold_may_evict(cycle: Cycle, holder: PendingWork, work: PendingWork) -> bool:
    """Whether the holder could evict ``work`` later: it has no protected window, the
    holder may preempt, and ``work`` competes at no higher a priority."""
    return (
        holder.standing.may_preempt
        and work.standing.value <= holder.standing.value
        and cycle.contracts.protected_runtime(work.info) == 0
    )


Phase = Callable[[Cycle], None]

PHASES: Mapping[str, Phase] = {
    "enqueue": enqueue,
    "allocate": allocate,
    "preempt": preempt,
    "reclaim": reclaim,
    "backfill": backfill,
}


# -- the plan -------------------------------------------------------------------------------------


def plan_of(cycle: Cycle) -> Plan:
    """The plan a finished cycle produced."""
    admit = tuple(_admission(cycle, name) for name in sorted(cycle.admitted))
    evict = tuple(cycle.evicted[name] for name in sorted(cycle.evicted))
    return Plan(admit=admit, evict=evict, pending=tuple(pending_explanations(cycle)))


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


def _admission(cycle: Cycle, name: str) -> Admission:
    """Where each placed pod goes, which pod of the workload it is, and whose hold it uses."""
    placement: list[PodPlacement] = []
    pods = cycle.admitted[name]
    for pod in pods:
        shared = cycle.nodes[pod.node].flavor in cycle.shared_flavors
        placement.append(PodPlacement(pod.node, pod.gpus, pod.shape.milli if shared else None))
    refs = tuple(PodRef(pod.pod_set, pod.index) for pod in pods)
    return Admission(name, tuple(placement), refs, cycle.backfilled.get(name))


__all__ = ["PHASES", "plan", "plan_of", "run_cycle"]
