"""Victim selection for preempt (inside a queue) and reclaim (across queues).

Both follow one recipe on a Statement (Kueue's ``SimulateWorkloadRemoval``, Volcano's
``Statement``): remove candidates in preference order until the preemptor fits, then try to
put each chosen victim back, most valuable first, keeping it if the preemptor still fits —
so the set is minimal (no victim could be spared) and made of the cheapest ones. The
product's search (``VICTIM_SEARCHES["fewest"]``) adds two things: when one victim is enough,
the smallest that is enough goes, unless it would lose more progress than the preferred one
(or than its protected window covers) -- evicting an 8-GPU gang for a 1-GPU job frees seven
GPUs nobody asked for and sends a hard-to-place job back to the queue -- and otherwise a
biggest-first pass competes with the preference-order one, the smaller set winning.
Candidates arrive already filtered (``victims.py``: protected windows, strictly lower
priority, reclaimable queues above their deserved share); the guard re-checks conditions
that depend on earlier removals (a victim's queue stays at its deserved share).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from gpupool.scheduler.statement import PlacedPod, Statement
from gpupool.scheduler.types import MILLI, SECONDS_PER_HOUR, WorkloadInfo

MAX_VICTIMS = 128  # victims one preemptor may cost
MAX_CANDIDATES = 512  # candidates looked at, in preference order (bounds the search)
MAX_SINGLE_TRIES = 32  # lone victims tried (each a fit check) before building a set


class _Replay:
    """An iterable over a one-shot iterator that can be walked again from the start."""

    def __init__(self, source: Iterator[RunningWork]) -> None:
        self._source = source
        self._seen: list[RunningWork] = []

    def __iter__(self) -> Iterator[RunningWork]:
        index = 0
        while True:
            if index < len(self._seen):
                yield self._seen[index]
            else:
                item = next(self._source, None)
                if item is None:
                    return
                self._seen.append(item)
                yield item
            index += 1


@dataclass(slots=True, eq=False)
class RunningWork:
    """A running workload as the cycle sees it: where it runs and what it uses.

    Compared by identity: one object per workload per cycle.
    """

    name: str
    info: WorkloadInfo
    value: int
    pods: list[PlacedPod]
    need: dict[str, int]
    evictable: bool = False
    borrowed: bool = False
    order: tuple[float, float, float, str] = (0.0, 0.0, 0.0, "")


@dataclass(frozen=True, slots=True)
class SearchOrders:
    """How ``find_victims`` searches beyond the candidates' own order (None: pass skipped).

    ``single`` marks candidates that might be enough alone, none of which holds fewer than
    ``lone_floor`` milli-GPUs; ``smallest_first`` is (*tier, size) among them, ``allowance``
    the GPU-hours a victim's contract lets it lose; ``fewest_first`` orders the biggest-first
    pass; ``room`` is a cheap necessary condition on the candidates for any set to work.
    """

    single: Callable[[RunningWork], bool] | None = None
    fewest_first: Callable[[RunningWork], tuple[int, ...]] | None = None
    smallest_first: Callable[[RunningWork], tuple[int, ...]] | None = None
    allowance: Callable[[RunningWork], float] = lambda _: 0.0
    room: Callable[[Sequence[RunningWork]], bool] | None = None
    lone_floor: int = 0
    # Where candidates do not come in smallest_first's tier order: a victim's own tier.
    tier_of: Callable[[RunningWork], Iterable[RunningWork]] | None = None


GREEDY = SearchOrders()  # Kueue's: the preference-order pass alone


@dataclass(frozen=True, slots=True)
class VictimSearchStrategy:
    """``policy.victim_search``: whether sizes steer the search, and what "recent" counts from.

    ``by_size``: a lone victim if one is enough (the smallest such, ``_lone_victim``), else
    the smaller of a biggest-first and a preference-order set; without it, the
    preference-order pass alone (``GREEDY``). ``counts_checkpoints``: a victim's recency and
    progress count from its last checkpoint (``victim_preference``), else from its start.
    """

    by_size: bool
    counts_checkpoints: bool


VICTIM_SEARCHES: Mapping[str, VictimSearchStrategy] = {
    # The product's: fewest victims, smallest lone victim, checkpoint-aware preference.
    "fewest": VictimSearchStrategy(by_size=True, counts_checkpoints=True),
    # Kueue's: remove candidates in preference order until the preemptor fits, then put
    # back what is not needed; recency by start time (Kueue knows no checkpoints).
    "greedy": VictimSearchStrategy(by_size=False, counts_checkpoints=False),
}


def held(victim: RunningWork) -> int:
    """GPUs the victim holds (all flavors)."""
    return sum(victim.need.values())


def size_first(victim: RunningWork) -> tuple[int, ...]:
    """Order for the fewest-victims pass: biggest first."""
    return (-held(victim),)


def lowest_then_smallest(victim: RunningWork) -> tuple[int, ...]:
    """Order among lone victims inside a queue: lowest priority, then fewest GPUs held."""
    return (victim.value, held(victim))


def remove_workload(statement: Statement, victim: RunningWork) -> None:
    """Take a running workload off its nodes and out of its queue's usage."""
    for pod in victim.pods:
        statement.remove(pod.node, pod.shape, pod.gpus)
    statement.charge(victim.info.queue, victim.need, sign=-1)


def restore_workload(statement: Statement, victim: RunningWork) -> None:
    """Put a removed workload back exactly where it was."""
    for pod in victim.pods:
        statement.put_back(pod.node, pod.shape, pod.gpus)
    statement.charge(victim.info.queue, victim.need)


def victim_preference(
    value: int,
    started: float,
    gpu_milli: int,
    name: str,
    now: float,
    last_checkpoint: float | None = None,
) -> tuple[float, float, float, str]:
    """Preference among victims: lowest priority, most recently started, least progress lost.

    What an eviction throws away is the progress since the start, or since the last
    checkpoint when the workload reports one; so "started" counts from that checkpoint, and
    progress is the GPU-hours run since then.
    """
    since = started if last_checkpoint is None else max(started, last_checkpoint)
    progress = gpu_milli / MILLI * max(0.0, now - since) / SECONDS_PER_HOUR
    return (value, -since, progress, name)


def find_victims(
    statement: Statement,
    candidates: Iterable[RunningWork],
    fits: Callable[[Statement], bool],
    guard: Callable[[RunningWork], bool] = lambda _: True,
    orders: SearchOrders = GREEDY,
) -> list[RunningWork] | None:
    """A minimal set of victims after which ``fits`` holds, removed on ``statement``.

    ``candidates`` come in preference order. ``orders.single`` marks the ones that might be
    enough alone (cheap to tell, e.g. they hold as much as is missing); the first
    ``MAX_SINGLE_TRIES`` of them are tried one by one first (``_lone_victim``; the
    ``smallest_first`` order must keep the caller's leading criteria, e.g. priority, in
    front of size). Otherwise a greedy pass runs in ``fewest_first`` order (e.g. biggest
    first) and one in preference order; the smaller set wins, the preferred one on a tie:
    "fewest" comes before "cheapest". On success the victims stay removed on the statement
    (the caller commits); on failure the statement is left as it was. ``orders.room`` is a
    cheap necessary condition on the candidates (could the preemptor fit if every one of
    them left?), checked before the greedy passes: a search it rules out would fail anyway.
    """
    candidates = _Replay(itertools.islice(candidates, MAX_CANDIDATES))
    if orders.single is not None:
        chosen = _lone_victim(statement, candidates, fits, guard, orders)
        if chosen is not None:
            remove_workload(statement, chosen)
            return [chosen]
    if orders.room is not None and not orders.room(list(candidates)):
        return None
    biggest = None
    if orders.fewest_first is not None:
        trial = statement.child()
        biggest = _greedy(
            trial, sorted(candidates, key=orders.fewest_first), fits, guard, MAX_VICTIMS
        )
        trial.discard()
    # The preference-order pass may only win with fewer victims; a prefix far longer than
    # the fewest-first set will not prune below it, so it is not pursued.
    limit = MAX_VICTIMS if biggest is None else min(MAX_VICTIMS, 4 * len(biggest))
    trial = statement.child()
    preferred = _greedy(trial, candidates, fits, guard, limit)
    trial.discard()
    options = [found for found in (preferred, biggest) if found is not None]
    if not options:
        return None
    best = min(options, key=len)  # min keeps the first (preferred) on a tie
    for victim in best:
        remove_workload(statement, victim)
    return best


def progress_at_stake(victim: RunningWork) -> float:
    """GPU-hours an eviction would throw away (see ``victim_preference``)."""
    return victim.order[2]


def _lone_victim(
    statement: Statement,
    candidates: Iterable[RunningWork],
    fits: Callable[[Statement], bool],
    guard: Callable[[RunningWork], bool],
    orders: SearchOrders,
) -> RunningWork | None:
    """One victim that is enough alone, among the first ``MAX_SINGLE_TRIES`` that
    ``orders.single`` and ``guard`` accept: the first in preference order -- or, with
    ``orders.smallest_first``, a smaller one that is also enough and would lose no more
    progress than that one, or no more than its own ``orders.allowance`` (the GPU-hours its
    protected window covers: the work its contract expects it may lose). Fewer GPUs freed
    that nobody asked for, and no long uncheckpointed run thrown away to spare a new one.

    ``smallest_first`` is (*tier, size), and candidates come in tier order (priority), so
    the scan stops at the first candidate of a later tier than the preferred victim's, or at
    once when the preferred victim is as small as a lone victim can be (``lone_floor``).
    Where candidates interleave tiers (reclaim's, queue by queue furthest above its share),
    ``orders.tier_of`` gives the candidates after the preferred one in its own tier, in order.
    """
    single, smallest_first, allowance = orders.single, orders.smallest_first, orders.allowance
    if single is None:
        return None

    def enough(victim: RunningWork) -> bool:
        trial = statement.child()
        remove_workload(trial, victim)
        ok = fits(trial)
        trial.discard()
        return ok

    preferred: RunningWork | None = None
    bound: tuple[int, ...] = ()  # the preferred victim's smallest_first key
    tried = 0
    for victim in candidates:
        if tried >= MAX_SINGLE_TRIES:
            break
        if not (single(victim) and guard(victim)):
            continue
        tried += 1
        if enough(victim):
            preferred = victim
            break
    if preferred is None or smallest_first is None or held(preferred) <= orders.lone_floor:
        return preferred
    bound = smallest_first(preferred)
    rest: Iterable[RunningWork] = candidates
    if orders.tier_of is not None:
        rest = orders.tier_of(preferred)
    smaller: list[RunningWork] = []
    seen = False
    for victim in rest:
        if not seen:  # the candidates up to the preferred one were tried above
            seen = victim is preferred
            continue
        if tried >= MAX_SINGLE_TRIES:
            break
        key = smallest_first(victim)
        if key[:-1] > bound[:-1]:
            break  # a later tier: nothing from here on can be chosen
        if single(victim) and guard(victim):
            tried += 1
            if key < bound:
                smaller.append(victim)
    if not smaller:
        return preferred
    stake = progress_at_stake(preferred)
    for victim in sorted(smaller, key=smallest_first):
        at_stake = progress_at_stake(victim)
        if (at_stake <= stake or at_stake <= allowance(victim)) and enough(victim):
            return victim
    return preferred


def _greedy(
    statement: Statement,
    candidates: Iterable[RunningWork],
    fits: Callable[[Statement], bool],
    guard: Callable[[RunningWork], bool],
    limit: int,
) -> list[RunningWork] | None:
    """Remove candidates in order until the preemptor fits, then spare what is not needed."""
    chosen: list[RunningWork] = []
    enough = False
    for victim in candidates:
        if len(chosen) >= limit:
            break
        if not guard(victim):
            continue
        remove_workload(statement, victim)
        chosen.append(victim)
        # Check at 1, 2, 4, 8 ... victims: a handful of checks brackets the shortest prefix.
        if len(chosen) & (len(chosen) - 1) == 0 and fits(statement):
            enough = True
            break
    if not enough and (not chosen or not fits(statement)):
        return None
    # Put victims back, newest (most valuable) first, and leave them running when the
    # preemptor still fits without them: the set left is minimal.
    spared: set[int] = set()
    for victim in reversed(chosen):
        restore_workload(statement, victim)
        if fits(statement):
            spared.add(id(victim))
            continue
        remove_workload(statement, victim)
    return [victim for victim in chosen if id(victim) not in spared]


def mark_borrowed(works: Sequence[RunningWork], deserved: Mapping[str, int]) -> None:
    """Mark what one queue runs beyond its deserved share: its most recently started work."""
    used: dict[str, int] = {}
    for work in sorted(works, key=lambda w: (w.info.started_at or 0.0, w.name)):
        for flavor, amount in work.need.items():
            used[flavor] = used.get(flavor, 0) + amount
            if amount and used[flavor] > deserved.get(flavor, 0):
                work.borrowed = True
