"""One scheduling cycle: ``plan(snapshot, policy, now) -> Plan``.

The cycle is six numbered phases (docs/scheduler.md), after the idle filter, each a function
of the ``Cycle`` it works on (``cycle_state.py``), registered in ``PHASES`` in order so a
policy can drop or reorder them (``policy.phases``):

    # 0 idle      running work idle past its reclaim timeout, outside its protected window,
                  is evicted (reason ``idle``); work idle past its alert timeout is reported
    # 1 enqueue   set aside what cannot run this cycle: missing pods, victims still leaving,
                  a gang no capability on its path or the pool could ever hold
    # 2 allocate  queues in the policy's order (weighted DRF, or the heads' rank), inside a
                  queue by rank; quota, then capacity, then gang placement
    # 3 preempt   inside the queue: strictly lower priority, outside protected windows
    # 4 reclaim   across queues: from borrowers above deserved, never below it
    # 5 backfill  idle GPUs behind a hold, for work that can be evicted at any time
    # 6 grow      running elastic gangs add the pods they lack, within their queue's
                  deserved share, on capacity the cycle leaves free; nobody is evicted

This file reads top to bottom: ``plan``, then each phase with the helpers only it uses, then
how a finished cycle becomes a ``Plan``. Where the victims of phases 3 and 4 come from is
``victims.py``; how a set of them is chosen is ``preemption.py``.

Every tentative change goes on a Statement and is committed only when the whole step
succeeds. A preemptor is not admitted in the cycle that evicts for it: the capacity its
victims free is reserved for it on the cluster state, and it is reported as
``waiting-for-preemption``.
"""

from __future__ import annotations

import bisect
import dataclasses
import heapq
import itertools
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from gpupool.scheduler.cycle_state import Assignment, Cycle, PendingWork, pod_shape, prefix_need
from gpupool.scheduler.explain import (
    LENT_FLAVOR_FACT,
    Verdict,
    across_flavors,
    explanation,
    quota_verdict,
    waiting_verdict,
    with_scaled_guarantee,
)
from gpupool.scheduler.fairshare import CPU, MEMORY, gpu_resource
from gpupool.scheduler.placement import PodRequest
from gpupool.scheduler.preemption import RunningWork, SearchOrders, find_victims
from gpupool.scheduler.statement import PlacedPod, Statement
from gpupool.scheduler.types import (
    MILLI,
    Admission,
    Eviction,
    IdleAlert,
    PendingExplanation,
    Plan,
    PodPlacement,
    PodRef,
    PodSetInfo,
    PolicyInfo,
    Snapshot,
    WorkloadInfo,
)
from gpupool.scheduler.victims import (
    ReclaimSearch,
    above_deserved,
    fairer_after,
    preempt_candidates,
    room_without,
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


# -- 0 idle ---------------------------------------------------------------------------------------


def idle(cycle: Cycle) -> None:
    """# 0 Evict running work idle past its reclaim timeout, outside its protected window
    (reason ``idle``, no preemptor); report work idle past its alert timeout.

    Like every eviction its GPUs stay taken until its pods are gone, so nothing is admitted
    on them in this cycle; an idle-reclaimed workload ends (the control loop does not requeue
    it). Nothing to do unless some class or queue sets an idle policy.
    """
    contracts = cycle.contracts
    if not contracts.idle_policy_set:
        return
    alerts: list[IdleAlert] = []
    idle_now = [r.info for r in cycle.running.values() if r.info.idle_since is not None]
    for info in sorted(idle_now, key=lambda w: w.name):
        name, since = info.name, info.idle_since
        if since is None or info.leaving or info.evicting_for is not None:
            continue
        if contracts.idle_reclaimable(info):
            cycle.evicted[name] = Eviction(name, "idle", None)
            continue
        alert_after = contracts.idle_timeouts(info)[0]
        if alert_after is not None and cycle.now - since >= alert_after:
            alerts.append(IdleAlert(name, since, contracts.idle_reclaim_at(info)))
    cycle.idle_alerts = alerts


# -- 1 enqueue ------------------------------------------------------------------------------------


def enqueue(cycle: Cycle) -> None:
    """# 1 Settle what keeps a workload out of this cycle: missing pods, quota, victims."""
    leaving = cycle.leaving
    never: dict[tuple[str, int, int, str | None], Verdict | None] = {}
    for work in cycle.pending.values():
        info = work.info
        # Never fitting first: the pods a gang lacks could only make it larger, and work that
        # can never run is not worth its pods (gpupool made them for work submitted through
        # it, at once: 100,000 pods for a request no capability allows).
        memo = (info.queue, id(work.assignments), work.minimum, info.topology)
        if memo not in never:
            never[memo] = never_runs(
                cycle, info.queue, work.assignments, work.minimum, info.topology
            )
        verdict = never[memo]
        if verdict is None and info.missing_pods > 0:
            work.schedulable = False
            work.verdict = Verdict("gang", {"missing_pods": info.missing_pods})
            continue
        if verdict is None and info.name in leaving:
            work.schedulable = False
            cycle.waiting.add(info.name)
            work.victims = [victim.name for victim in leaving[info.name]]
            work.verdict = waiting_verdict({v.name: v.info.queue for v in leaving[info.name]})
            continue
        if verdict is not None:
            work.schedulable = False
            work.verdict = verdict


def never_runs(
    cycle: Cycle,
    queue: str,
    assignments: list[Assignment],
    minimum: int,
    topology: str | None = None,
) -> Verdict | None:
    """Quota (a capability on the path), capacity (a node, the pool) or, for a gang bound to
    one NVLink domain, topology (the largest domain) that can never hold the gang."""
    needs = [prefix_need(a.pods, minimum) for a in assignments]
    shortfalls = [cycle.quota.never_fits(queue, need) for need in needs]
    if shortfalls and all(s is not None for s in shortfalls) and shortfalls[0] is not None:
        return quota_verdict(shortfalls[0])
    too_big = [
        cycle.larger_than_any_node(assignment, minimum)
        or cycle.larger_than_pool(need)
        or cycle.larger_than_any_domain(need, topology)
        for need, assignment in zip(needs, assignments, strict=True)
    ]
    if too_big and all(v is not None for v in too_big):
        # Every flavor choice named where they all stop it alike ("no h100 or gb200 node").
        return across_flavors([v for v in too_big if v is not None])
    return None


# -- 2 allocate -----------------------------------------------------------------------------------


def allocate(cycle: Cycle) -> None:
    """# 2 Queues by DRF (or rank); inside a queue by rank; quota, then gang placement."""
    cycle.snapshot_start()
    # Promises first: a preemptor whose victims are still leaving keeps its place (what they
    # free is held for it); one whose victims are gone is served before anyone else.
    for name in sorted(cycle.leaving):
        cycle.keep_promise(cycle.pending[name])
    cycle.remember_quota_room()
    nominated = sorted(
        (w for w in cycle.pending.values() if w.info.nominated and w.schedulable),
        key=lambda w: w.rank,
    )
    for work in nominated:
        if not cycle.budget_covers(work):
            cycle.demote(work)
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

    # Heap entries: (key, queue, the usage stamp of the queue's path when the key was made).
    # A key reads the usage of the queue's path below the root -- and the root's own, where
    # the root has a quota (then every admission counts).
    heap: list[tuple[tuple[object, ...], str, tuple[int, ...]]] = []
    shares = cycle.shares
    root = cycle.quota.root
    root_quota = root is not None and bool(cycle.queues[root].quota)

    def stamp_of(queue: str) -> tuple[int, ...]:
        stamp = shares.stamp(queue)
        return (*stamp, len(cycle.admitted)) if root_quota else stamp

    for queue in sorted(cycle.by_queue):
        first = head(queue)
        if first is not None:
            heap.append((order.key(cycle, queue, first), queue, stamp_of(queue)))
    heapq.heapify(heap)
    while heap:
        key, queue, stamp = heapq.heappop(heap)
        served = head(queue)
        if served is None:
            continue
        # Keys only grow while allocate admits (shares rise, also through a sister queue's
        # admissions under a common ancestor): a stale key is refreshed and queued again.
        if not cycle.budget_covers(served):
            # Others admitted before it spent its budget: it competes at the default class
            # from now on, in the place that gives it in its queue.
            cycle.demote(served)
            works = cycle.by_queue[queue]
            works.pop(cursor[queue])
            bisect.insort(works, served, lo=cursor[queue], key=lambda w: w.rank)
            served = head(queue)
            if served is None:
                continue
            stamp = ()  # a new head: its key must be made again
        now_stamp = stamp_of(queue)
        if stamp != now_stamp:
            fresh = order.key(cycle, queue, served)
            if fresh != key:
                heapq.heappush(heap, (fresh, queue, now_stamp))
                continue
        cursor[queue] += 1
        admitted = _attempt(cycle, served)
        if not admitted and not keep_serving(cycle, queue, served):
            continue
        after = head(queue)
        if after is not None:
            heapq.heappush(heap, (order.key(cycle, queue, after), queue, stamp_of(queue)))


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
    """``policy.queue_order``: how allocate picks the next queue, by a key of it and its head
    (recomputed for each new head; a key that went stale while others were served is
    refreshed when it comes up). Both strategies first serve work by how far up the tree it
    must borrow (``QuotaTree.borrow_level``): within its queue's deserved share, then within
    each ancestor's in turn, then from the pool -- a queue's deserved share is not lent in a
    cycle in which its own work could use it, and a team borrows its sister teams' idle
    share before its org borrows another org's."""

    key: Callable[[Cycle, str, PendingWork], tuple[object, ...]]


def _dominant_share(cycle: Cycle, queue: str, head: PendingWork) -> tuple[object, ...]:
    """Nearest borrowing first, then hierarchical weighted dominant share: from the top of the
    tree down, the smallest share at each level (ties by name)."""
    return (cycle.quota.borrow_level(queue, cycle.minimum_need(head)), cycle.shares.path_key(queue))


def _head_rank(cycle: Cycle, queue: str, head: PendingWork) -> tuple[object, ...]:
    """Kueue's order without fair sharing: nearest borrowing first (Kueue's lowest subtree
    that fits), then priority, submit time."""
    level = cycle.quota.borrow_level(queue, cycle.minimum_need(head))
    return (level, *head.rank, queue)


QUEUE_ORDERS: Mapping[str, QueueOrderStrategy] = {
    "dominant-share": QueueOrderStrategy(_dominant_share),
    "head-rank": QueueOrderStrategy(_head_rank),
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
    """# 3 Inside a queue: evict strictly lower priority outside protected windows.

    A workload whose queue is below its deserved share is left to reclaim (phase 4) when that
    phase runs: it takes back what its queue lent before it evicts its own queue's work.
    """
    reclaim_runs = "reclaim" in cycle.policy.phases
    for queue in sorted(cycle.by_queue):
        attempts = 0
        for work in cycle.blocked_in_order(queue):
            if attempts >= cycle.policy.preemption_attempts_per_queue:
                break
            if not cycle.budget_covers(work):
                cycle.demote(work)
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
            if reclaim_runs and _reclaims_first(cycle, queue, work):
                continue
            candidates = preempt_candidates(cycle, queue, work)
            if not candidates:
                continue
            attempts += 1
            if _evict_for(cycle, work, candidates, search_orders(cycle, work, None)):
                continue


def _reclaims_first(cycle: Cycle, queue: str, work: PendingWork) -> bool:
    """Whether reclaim serves the work before its own queue's lower-priority work is touched:
    its queue stays within a deserved share it may take back (``QuotaTree.entitled_level``)."""
    need = cycle.minimum_need(work)
    return (
        work.standing.may_reclaim
        and any(need.values())
        and cycle.quota.entitled_level(queue, need) is not None
    )


def _evict_for(
    cycle: Cycle,
    work: PendingWork,
    candidates: Iterable[RunningWork],
    orders: SearchOrders,
    guard: Callable[[RunningWork], bool] | None = None,
    fits: Callable[[Statement], bool] | None = None,
) -> bool:
    """One victim search for ``work``; on success its place is reserved on what the victims
    free and they are evicted -- ``preempt`` for its own queue's, ``reclaim`` for others'."""
    statement = _search_statement(cycle, work)
    victims = find_victims(
        statement,
        candidates,
        fits or cycle.fits(work),
        guard or (lambda _: True),
        orders=orders,
    )
    if victims is None:
        statement.discard()
        return False
    if not cycle.reserve(work, statement, victims):  # pragma: no cover - fits() said it would
        return False
    own = [victim for victim in victims if victim.info.queue == work.info.queue]
    lent = [victim for victim in victims if victim.info.queue != work.info.queue]
    cycle.evict(own, "preempt", work.name)
    cycle.evict(lent, "reclaim", work.name)
    return True


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

    First every queue whose blocked work stays within a deserved share it may take back, in
    name order (``_take_back``). Then, with fair sharing on, queues already at or above
    theirs, lowest weighted share first: each may take borrowed capacity from a queue whose
    share of the contested flavor stays at least its own after the move
    (``victims.fairer_after``), within ``FAIR_RECLAIM_SEARCHES`` searches a cycle.
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
    """Reclaim attempts for one queue's blocked work; returns the attempts made.

    ``fair`` False: work within a deserved share its queue may take back -- or that would be,
    once its own lower-priority work left (then only a set combining both kinds can help);
    True: the rest (fair-share reclaim), at most ``budget`` attempts.
    """
    attempts = 0
    limit = cycle.policy.preemption_attempts_per_queue
    if budget is not None:
        limit = min(limit, budget)
    # The queue's own candidates depend only on a workload's priority and flavors (and on
    # what was evicted meanwhile): one list per kind of blocked work, not one per workload.
    owns: dict[tuple[int, int, frozenset[str]], tuple[list[RunningWork], dict[str, int]]] = {}
    for work in cycle.blocked_in_order(queue):
        if attempts >= limit:
            break
        if not cycle.budget_covers(work):
            cycle.demote(work)
        if not work.standing.may_reclaim:
            continue
        need = cycle.minimum_need(work)
        # Reclaim returns lent GPU quota; work that asks no GPU has none to reclaim.
        if not any(need.values()):
            continue
        own: list[RunningWork] = []
        held: dict[str, int] = {}
        if work.standing.may_preempt:
            flavors = frozenset(f for a in work.assignments for f in a.need)
            kind = (work.standing.value, len(cycle.evicted), flavors)
            known = owns.get(kind)
            if known is None:
                found_own = preempt_candidates(cycle, queue, work)
                known = owns[kind] = (found_own, _held_by(found_own))
            own, held = known
        level = cycle.quota.entitled_level(queue, need)
        after_own: int | None = None  # within a share once its own lower-priority work left
        if level is None and own:
            after_own = cycle.quota.entitled_level(queue, need, held)
        if fair:
            if level is not None or after_own is not None:
                continue
            flavor = max(need, key=lambda f: (need[f], f))
            fairer = fairer_after(cycle, queue, need, flavor, stays_at_deserved(cycle, queue))
            if fairer is None:
                continue
            among, guard = fairer
            attempts += 1
            _evict_for(
                cycle,
                work,
                search.candidates(queue, flavor, among),
                _reclaim_orders(cycle, search, work, flavor),
                guard,
            )
            continue
        if level is None and after_own is None:
            continue
        attempts += 1
        _take_back(cycle, search, work, need, level, after_own, own)
    return attempts


def _held_by(victims: list[RunningWork]) -> dict[str, int]:
    """Milli-GPU per flavor the workloads hold together."""
    held: dict[str, int] = defaultdict(int)
    for victim in victims:
        for flavor, amount in victim.need.items():
            held[flavor] += amount
    return held


def _take_back(
    cycle: Cycle,
    search: ReclaimSearch,
    work: PendingWork,
    need: dict[str, int],
    level: int | None,
    after_own: int | None,
    own: list[RunningWork],
) -> bool:
    """Room for work within a deserved share its queue may take back, in DESIGN's order:
    what the queue lent, keeping each victim's queue at its deserved share; failing that,
    the last victim from a queue may take it below; then the queue's own lower-priority work
    (the preempt rules); then both kinds in one set, lent first, each victim under its own
    kind's rules, the reclaimer within its share at the end (Kueue searches both kinds in
    one candidate list the same way)."""
    queue = work.info.queue
    flavor = max(need, key=lambda f: (need[f], f))
    orders = _reclaim_orders(cycle, search, work, flavor)
    if level is not None:
        start = level + 1
        strict = _Watched(stays_at_deserved(cycle, queue))
        if _evict_for(cycle, work, search.candidates(queue, flavor, None, start), orders, strict):
            return True
        loose = above_deserved(cycle, queue)
        if strict.refused and _evict_for(
            cycle, work, search.candidates(queue, flavor, None, start), orders, loose
        ):
            return True
        if own and _evict_for(cycle, work, own, search_orders(cycle, work, None)):
            return True
    else:
        start = (after_own or 0) + 1
    if not own:
        return False
    lent = list(itertools.islice(search.candidates(queue, flavor, None, start), COMBINED_LENT))
    if not lent:
        return False
    own = own[:COMBINED_OWN]
    # Where the queue is within its share only once some of its own work left, that work
    # must be in the set whatever else is: it goes first, the fewest in preference order.
    first: list[RunningWork] = []
    if level is None:
        while own and cycle.quota.entitled_level(queue, need, _held_by(first)) is None:
            first.append(own.pop(0))
    loose = above_deserved(cycle, queue)
    fits = cycle.fits(work)

    def within(statement: Statement) -> bool:
        return fits(statement) and cycle.quota.entitled_level(queue, need) is not None

    def either(victim: RunningWork) -> bool:
        return victim.info.queue == queue or loose(victim)

    both = SearchOrders(room=room_without(cycle, work))
    return _evict_for(cycle, work, [*first, *lent, *own], both, either, within)


# A combined set (a lender's own work and what it lent) is the last resort of a reclaim: its
# search looks at the first candidates of each kind only.
COMBINED_LENT = 32
COMBINED_OWN = 32


def _reclaim_orders(
    cycle: Cycle, search: ReclaimSearch, work: PendingWork, flavor: str
) -> SearchOrders:
    """The policy's victim search for a reclaim of ``flavor``, a smaller lone victim looked
    for in the preferred one's queue."""
    orders = search_orders(cycle, work, work.info.queue)
    return dataclasses.replace(orders, tier_of=search.queue_order(flavor))


class _Watched:
    """A victim guard that remembers whether it refused any candidate."""

    def __init__(self, guard: Callable[[RunningWork], bool]) -> None:
        self.guard = guard
        self.refused = False

    def __call__(self, victim: RunningWork) -> bool:
        allowed = self.guard(victim)
        if not allowed:
            self.refused = True
        return allowed


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
    for work in candidates:
        if not cycle.budget_covers(work):
            cycle.demote(work)
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


# -- 6 grow ---------------------------------------------------------------------------------------


def grow(cycle: Cycle) -> None:
    """# 6 Running elastic gangs add the pods they lack, within their queue's deserved share,
    on capacity the cycle leaves free.

    After every other phase: pending work is served first. Candidates run fewer pods than
    they have (``min_member`` set), are not leaving or being evicted, not backfilled onto a
    hold, not idle-alerted. They are served in allocate's queue order, then by effective
    priority, start, name; each adds its next pods in pod-set order, one at a time, until one
    does not fit: its queue (and every queue above it) would pass its deserved share, or the
    placer finds no node. Held nodes (a starving workload's, a nominated preemptor's
    promise) and nodes this cycle's evictions free for their preemptors are off limits;
    nobody is evicted. The core evicts whole workloads, so a gang grown by borrowing would
    become a reclaim target whole, losing pods it ran within its share.
    """
    alerted = {alert.workload for alert in cycle.idle_alerts}
    by_queue: dict[str, list[RunningWork]] = defaultdict(list)
    for running in cycle.running.values():
        info = running.info
        if (
            info.min_member is not None
            and len(info.placement) < info.pod_count
            and not info.leaving
            and info.evicting_for is None
            and info.backfilled_for is None
            and running.name not in cycle.evicted
            and running.name not in alerted
        ):
            by_queue[info.queue].append(running)
    if not by_queue:
        return
    for works in by_queue.values():
        works.sort(key=_growth_rank)
    # What this cycle's evictions free is on its way to their preemptors (placed there as
    # reservations); an idle eviction's GPUs stay taken on the cluster state anyway.
    fence = Statement(cycle.cluster, cycle.quota)
    fence.fence(
        sorted(
            {
                pod.node
                for name, eviction in cycle.evicted.items()
                if eviction.preemptor is not None and name in cycle.running
                for pod in cycle.running[name].pods
            }
        )
    )
    order = GROW_ORDERS[cycle.policy.queue_order]
    shares = cycle.shares
    cursor: dict[str, int] = defaultdict(int)
    heap: list[tuple[tuple[object, ...], str, tuple[int, ...]]] = [
        (order(cycle, queue, works[0]), queue, shares.stamp(queue))
        for queue, works in sorted(by_queue.items())
    ]
    heapq.heapify(heap)
    while heap:
        key, queue, stamp = heapq.heappop(heap)
        works = by_queue[queue]
        head = works[cursor[queue]]
        now_stamp = shares.stamp(queue)
        if stamp != now_stamp:
            fresh = order(cycle, queue, head)
            if fresh != key:
                heapq.heappush(heap, (fresh, queue, now_stamp))
                continue
        cursor[queue] += 1
        _grow_gang(cycle, head)
        if cursor[queue] < len(works):
            after = works[cursor[queue]]
            heapq.heappush(heap, (order(cycle, queue, after), queue, shares.stamp(queue)))
    fence.discard()


def _growth_rank(running: RunningWork) -> tuple[int, float, str]:
    """Within a queue: higher effective priority, then earlier start, then name."""
    return (-running.value, running.info.started_at or 0.0, running.name)


def _grow_by_share(cycle: Cycle, queue: str, head: RunningWork) -> tuple[object, ...]:
    """``dominant-share``: the queue with the smallest hierarchical weighted dominant share
    (allocate's order, ``_dominant_share``), then its best-ranked gang."""
    return (cycle.shares.path_key(queue), _growth_rank(head))


def _grow_by_rank(cycle: Cycle, queue: str, head: RunningWork) -> tuple[object, ...]:
    """``head-rank``: the best-ranked gang of all queues (allocate's ``_head_rank``)."""
    return (*_growth_rank(head), queue)


# policy.queue_order -> the key of a queue and its best-ranked gang for the grow phase
GROW_ORDERS: Mapping[str, Callable[[Cycle, str, RunningWork], tuple[object, ...]]] = {
    "dominant-share": _grow_by_share,
    "head-rank": _grow_by_rank,
}


def _grow_gang(cycle: Cycle, running: RunningWork) -> None:
    """Add the gang's next pods in pod-set order, one at a time, until one does not fit."""
    info = running.info
    flavor_of: dict[int, str] = {}
    for pod in running.pods:
        flavor_of.setdefault(pod.pod_set, cycle.nodes[pod.node].flavor)
    domains = {cycle.nodes[pod.node].domain for pod in running.pods}
    added: list[PlacedPod] = []
    first = len(info.placement)
    for set_index, pod_set in enumerate(info.pod_sets):
        if first >= pod_set.count:  # a pod set whose pods all run adds none
            first -= pod_set.count
            continue
        known = flavor_of.get(set_index)
        choices = (known,) if known is not None else pod_set.flavors or cycle.any_node_flavors
        for index in range(first, pod_set.count):
            placed: PlacedPod | None = None
            for flavor in choices:
                placed = _grow_pod(cycle, info, pod_set, set_index, index, flavor, domains)
                if placed is not None:
                    choices = (flavor,)
                    break
            if placed is None:
                break
            added.append(placed)
            domains.add(cycle.nodes[placed.node].domain)
        else:
            first = 0
            continue
        break
    if not added:
        return
    cycle.grown[running.name] = added
    vector: dict[str, int] = defaultdict(int)
    for pod in added:
        flavor = cycle.nodes[pod.node].flavor
        running.need[flavor] = running.need.get(flavor, 0) + pod.shape.gpu_milli_total
        vector[gpu_resource(flavor)] += pod.shape.gpu_milli_total
        vector[CPU] += pod.shape.cpu_milli
        vector[MEMORY] += pod.shape.memory_mib
    running.pods.extend(added)
    cycle.shares.add(info.queue, vector)


def _grow_pod(
    cycle: Cycle,
    info: WorkloadInfo,
    pod_set: PodSetInfo,
    set_index: int,
    index: int,
    flavor: str,
    domains: set[str],
) -> PlacedPod | None:
    """One more pod of a running gang, on ``flavor``, committed with its quota charge: only
    while its queue's path stays within its deserved share (never borrowing); a ``domain``
    gang only inside the domain it runs in, a ``preferred`` one there first."""
    shape = pod_shape(pod_set, flavor in cycle.shared_flavors)
    need = {flavor: shape.gpu_milli_total} if shape.gpu_milli_total else {}
    quota = cycle.quota
    if not quota.within_deserved(info.queue, need) or quota.check(info.queue, need) is not None:
        return None
    allowed = pod_set.allowed_nodes
    tries: list[frozenset[str] | None] = []
    if info.topology is not None and domains:
        inside = frozenset(
            name
            for domain in sorted(domains)
            for name in cycle.cluster.domain_nodes.get((flavor, domain), ())
        )
        tries.append(inside if allowed is None else inside & allowed)
    if info.topology != "domain":
        tries.append(allowed)
    for nodes in tries:
        statement = Statement(cycle.cluster, quota)
        placed = cycle.placer.place_one(
            statement, PodRequest(shape, flavor, set_index, index, nodes), domains
        )
        if placed is not None:
            statement.charge(info.queue, need)
            statement.commit()
            return placed
        statement.discard()
    return None


Phase = Callable[[Cycle], None]

PHASES: Mapping[str, Phase] = {
    "idle": idle,
    "enqueue": enqueue,
    "allocate": allocate,
    "preempt": preempt,
    "reclaim": reclaim,
    "backfill": backfill,
    "grow": grow,
}


# -- the plan -------------------------------------------------------------------------------------


def plan_of(cycle: Cycle) -> Plan:
    """The plan a finished cycle produced."""
    admit = tuple(_admission(cycle, name) for name in sorted(cycle.admitted))
    evict = tuple(cycle.evicted[name] for name in sorted(cycle.evicted))
    grown = tuple(
        Admission(name, _placements(cycle, cycle.grown[name]), _pod_refs(cycle.grown[name]))
        for name in sorted(cycle.grown)
    )
    return Plan(
        admit=admit,
        evict=evict,
        pending=tuple(pending_explanations(cycle)),
        idle_alerts=tuple(cycle.idle_alerts),
        grow=grown,
    )


def pending_explanations(cycle: Cycle) -> list[PendingExplanation]:
    """One explanation per workload left pending, with its position in its queue."""
    out: list[PendingExplanation] = []
    for works in cycle.by_queue.values():
        position = 0
        ahead = _AdmittedAhead(cycle)  # its queue's work admitted ahead of it
        for work in works:
            if work.name in cycle.admitted:
                ahead.names.append(work.name)
                continue
            position += 1
            verdict = work.verdict or Verdict("behind", {"queue": work.info.queue})
            if verdict.reason == "quota":
                verdict = _quota_or_behind(cycle, work, verdict, ahead)
            lent = lent_facts(cycle, work, verdict)
            if lent:
                verdict = Verdict(verdict.reason, {**verdict.facts, **lent})
            if work.standing.backed_off:
                backoff = cycle.contracts.backoff_facts(work.info)
                if backoff is not None:
                    verdict = Verdict(verdict.reason, {**verdict.facts, "backoff": backoff})
            if work.standing.budget_demoted and verdict.reason != "waiting-for-preemption":
                verdict = _budget_verdict(cycle, work, verdict)
            if cycle.quota.scaled:
                verdict = _scaled_guarantee_verdict(cycle, work, verdict)
            out.append(explanation(work.name, verdict, position, cycle.units))
    return sorted(out, key=lambda e: e.workload)


class _AdmittedAhead:
    """A queue's work admitted ahead of the workload explained, in the queue's final order,
    and the GPUs it took per flavor (summed when first asked, then as the queue's list goes
    on). A nominated preemptor is admitted before allocate's order: one ranked behind the
    workload is not counted (rare: a preemptor outranks the work it evicts)."""

    __slots__ = ("cycle", "names", "summed", "taken")

    def __init__(self, cycle: Cycle) -> None:
        self.cycle = cycle
        self.names: list[str] = []
        self.summed = 0
        self.taken: dict[str, int] = defaultdict(int)

    def gpus(self) -> dict[str, int]:
        cycle = self.cycle
        for name in self.names[self.summed :]:
            for pod in cycle.admitted[name]:
                self.taken[cycle.nodes[pod.node].flavor] += pod.shape.gpu_milli_total
        self.summed = len(self.names)
        return self.taken


def _quota_or_behind(
    cycle: Cycle, work: PendingWork, verdict: Verdict, ahead: _AdmittedAhead
) -> Verdict:
    """``quota`` as the cycle found it, not as its turn found it: a workload whose queue had
    quota room for its minimum once the promises were kept, before any admission, less what
    its own queue's work admitted ahead of it took, was stopped by work of other queues served
    first (that borrowed the room it could use, or used their own share of it): ``behind``,
    with capacity-``behind``'s facts (``resource: "quota"``, ``free`` the room left at its
    turn). Presentation only: ``work.verdict``, which backfill and the holds read, stays
    ``quota``; its queue's own use of its room is its quota's business, and stays ``quota``.
    """
    start = cycle.start_room
    if start is None or verdict.facts.get("never_fits"):
        return verdict
    room = start.get(work.info.queue)
    need = cycle.minimum_need(work)
    if not room or not any(need.values()):
        return verdict
    taken = ahead.gpus()
    for flavor, amount in need.items():
        if amount > 0 and room.get(flavor, 0) - taken.get(flavor, 0) < amount:
            return verdict
    flavor = str(verdict.facts.get("flavor", ""))
    facts: dict[str, object] = {
        "queue": work.info.queue,
        "flavor": flavor,
        "resource": "quota",
        "asked": need.get(flavor, 0) / MILLI,
        "free": verdict.facts.get("available_gpus", 0),
    }
    return Verdict("behind", facts)


def lent_facts(cycle: Cycle, work: PendingWork, verdict: Verdict) -> dict[str, object]:
    """For work stopped while its queue lends part of a deserved share it could take back
    (quota or capacity it would have, were that share free): how much is lent, to whom, and
    why it cannot be taken back now -- its class never evicts (``never``), the borrowers'
    queues are not reclaimable (``not-reclaimable``), their work is still protected
    (``protected``, with ``reclaimable_at``), or taking back what may be taken would not
    make room for it (``no-room``). Empty when nothing of its share is lent."""
    if verdict.reason not in ("quota", "capacity", "fragmentation", "behind"):
        return {}
    if verdict.facts.get("never_fits") or work.name in cycle.waiting:
        return {}
    queue = work.info.queue
    need = cycle.minimum_need(work)
    where = (queue, id(need))  # equal gangs of a queue share their need (assignments cached)
    found = cycle.share_of.get(where)
    if found is None:
        level = cycle.quota.entitled_level(queue, need) if any(need.values()) else None
        found = cycle.share_of[where] = (
            ("", "")
            if level is None
            else (cycle.quota.path[queue][level], max(need, key=lambda f: (need[f], f)))
        )
    owner, flavor = found
    if not owner:
        return {}
    memo = (owner, flavor)
    lent = cycle.lent_memo.get(memo)
    if lent is None:
        lent = cycle.lent_memo[memo] = _lent_share(cycle, owner, flavor)
    if not lent or work.standing.may_reclaim:
        return lent
    return {**lent, "cannot_reclaim": "never"}


LENT_TO_NAMED = 5  # borrowing queues an explanation names (the furthest above their share)


def _lent_share(cycle: Cycle, owner: str, flavor: str) -> dict[str, object]:
    """What of ``owner``'s deserved share of ``flavor`` is lent, to whom, and why a workload
    that may reclaim cannot take it back now (the same for every such workload under it)."""
    quota = cycle.quota.quota(owner, flavor)
    if quota is None:
        return {}
    lent = quota.deserved - cycle.quota.usage[owner][flavor]
    ordered = cycle.over_share.get(flavor)  # every leaf above its share, furthest first
    if ordered is None:
        excess = {
            leaf: cycle.quota.over_deserved_by(leaf, flavor)
            for leaf in cycle.leaves_under[cycle.quota.path[owner][-1]]  # the whole tree
        }
        ordered = cycle.over_share[flavor] = sorted(
            (leaf for leaf, over in excess.items() if over > 0),
            key=lambda leaf: (-excess[leaf], leaf),
        )
    inside = set(cycle.leaves_under[owner])
    borrowers = [leaf for leaf in ordered if leaf not in inside]
    if lent <= 0 or not borrowers:
        return {}
    facts: dict[str, object] = {
        "lent_gpus": lent / MILLI,
        LENT_FLAVOR_FACT: flavor,  # what the amount counts: a MIG flavor's MIG instances
        "lent_to": borrowers[:LENT_TO_NAMED],  # the queues furthest above their share
        "borrowers": len(borrowers),
    }
    reclaimable = [leaf for leaf in borrowers if cycle.queues[leaf].reclaimable]
    if not reclaimable:
        facts["cannot_reclaim"] = "not-reclaimable"
        return facts
    protected = [_protected_until(cycle, leaf, flavor) for leaf in reclaimable]
    if all(until is not None for until in protected) and any(protected):
        facts["cannot_reclaim"] = "protected"
        facts["reclaimable_at"] = min(until for until in protected if until)
        return facts
    facts["cannot_reclaim"] = "no-room"
    return facts


def _protected_until(cycle: Cycle, queue: str, flavor: str) -> float | None:
    """When the first of a queue's running work holding ``flavor`` leaves its protected
    window: 0.0 when it runs none, None when some may be evicted now (memoised)."""
    memo = (queue, flavor)
    if memo not in cycle.protected_memo:
        until: float | None = 0.0
        for running in cycle.all_running_by_queue.get(queue, ()):
            if flavor not in running.need or running.name in cycle.evicted:
                continue
            if running.info.evicting_for is not None:
                continue
            if running.evictable:
                until = None
                break
            ends = cycle.contracts.protected_until(running.info)
            until = ends if not until else min(until, ends)
        cycle.protected_memo[memo] = until
    return cycle.protected_memo[memo]


def _budget_verdict(cycle: Cycle, work: PendingWork, then: Verdict) -> Verdict:
    """``budget``: the budget's real remaining hours, what other work reserved from it in
    this cycle (and who), what this one needed, and the layer that then stopped it."""
    standing = work.standing
    key = cycle.contracts.budget_key(work.info)
    spent = cycle.budget_spent.get(key, [])
    facts: dict[str, object] = {
        "tenant": cycle.contracts.tenant(work.info),
        "priority_class": standing.declared.name,
        "remaining_gpu_hours": round(cycle.contracts.budget.get(key, 0.0), 3),
        "reservation_gpu_hours": round(standing.budget_reservation, 3),
        "then": then.reason,
        "then_facts": dict(then.facts),
    }
    if spent:
        facts["reserved_by"] = [name for name, _ in spent]
        facts["reserved_gpu_hours"] = round(sum(hours for _, hours in spent), 3)
    return Verdict("budget", facts)


def _scaled_guarantee_verdict(cycle: Cycle, work: PendingWork, verdict: Verdict) -> Verdict:
    """Say so when a guarantee on the workload's path, of a flavor it asks, is scaled down to
    what the pool's healthy GPUs can back (``quota.scale_guarantees``)."""
    if verdict.reason in ("gang", "waiting-for-preemption"):
        return verdict
    flavors = {flavor for a in work.assignments for flavor, amount in a.need.items() if amount}
    scaled = cycle.quota.scaled_on_path(work.info.queue, sorted(flavors))
    return verdict if scaled is None else with_scaled_guarantee(verdict, scaled)


def _admission(cycle: Cycle, name: str) -> Admission:
    """Where each placed pod goes, which pod of the workload it is, whose hold it uses, and
    what it reserved of its budget."""
    pods = cycle.admitted[name]
    return Admission(
        name,
        _placements(cycle, pods),
        _pod_refs(pods),
        cycle.backfilled.get(name),
        cycle.budget_reserved.get(name, 0.0),
    )


def _placements(cycle: Cycle, pods: list[PlacedPod]) -> tuple[PodPlacement, ...]:
    """Where each placed pod goes (its milli-GPU on a shared flavor)."""
    placement: list[PodPlacement] = []
    for pod in pods:
        shared = cycle.nodes[pod.node].flavor in cycle.shared_flavors
        placement.append(PodPlacement(pod.node, pod.gpus, pod.shape.milli if shared else None))
    return tuple(placement)


def _pod_refs(pods: list[PlacedPod]) -> tuple[PodRef, ...]:
    """Which pod of the workload each placed pod is."""
    return tuple(PodRef(pod.pod_set, pod.index) for pod in pods)


__all__ = ["PHASES", "plan", "plan_of", "run_cycle"]
