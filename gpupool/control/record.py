"""Step 4 of a cycle, record: the plan as rows to write, decided before anything is written.

``decide_record`` turns the core's plan into a ``CycleRecord`` of plain values;
``actions.do_record_cycle`` writes it in one transaction. What it holds:

- **admissions**: each admitted workload's pods with their pod-set rows, nodes, GPU indices and
  milli shares (the core's ``PodRef`` says which pod each placement is), and the usage it opens
  per flavor (GPUs; a shared flavor counts milli / 1000);
- **evictions**: each victim with its reason and preemptor, the GPUs it frees and the progress
  it loses (GPU-hours since its start, or since its last checkpoint); a drained node's running
  workloads too (reason ``admin``, no preemptor; not one a disruption budget refused within
  the refusal's back-off, ``eviction_refused_until``). A victim stays running, marked
  ``evicting_for`` its preemptor, until its pods are gone (``lifecycle.apply_plan`` with
  ``evictions_take_time``); the preemptor waits nominated;
- **nominations** that changed, and **explanations** (reason, sentence, facts) of pending
  workloads whose explanation changed since it was last written -- at once when its reason
  changed; when only its facts moved (free GPUs, quota available), once the last write is
  ``FACTS_REFRESH_S`` old, the oldest first and at most ``REFRESHED_PER_CYCLE`` a cycle. A
  move of the position alone writes nothing: readers count the position from ``queue_rank``
  and render the sentence with it (``workloads.queries.explain``);
- **ranks**: each queue's order as served, as ``Workload.queue_rank`` keys that are kept
  while the order around them holds (``queue_ranks``): when work ahead is admitted, nothing
  behind it is written; new work, and work the order moved past others, gets a key between
  its neighbours'. Thousands of positions move every cycle; a few hundred keys do. Work the
  core set aside as never fitting (``explain.never_fits``) is in no order and has no rank;
  a change of that, like a change of reason, rewrites its explanation at once. Nor has a
  gang that waits for pods its controller has not made (``_waits_for_cluster_pods``): the
  cycle does not serve it, so it is in no position and work behind it does not count it;
- **idle alerts**: running workloads idle past their alert timeout whose idle spell was not
  alerted about yet (``Workload.idle_alerted_since`` differs from the spell's start): once per
  spell, however many cycles it lasts;
- **growths**: running elastic gangs that add pods (``Plan.grow``): the added pods as an
  admission's are, and the GPUs the gang holds per flavor with them (its usage is opened
  again for all of them), with how many pods it ran, runs now and has.
"""

from __future__ import annotations

import json
import math
from bisect import bisect_left
from collections import defaultdict
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from decimal import Decimal
from itertools import pairwise

from gpupool.control.budgets import named
from gpupool.control.snapshot import DatabaseSnapshot, WorkloadRow
from gpupool.scheduler.explain import NEVER_FITS_FACT, never_fits
from gpupool.scheduler.types import (
    MILLI,
    SECONDS_PER_HOUR,
    Admission,
    PendingExplanation,
    Plan,
    Snapshot,
    WorkloadInfo,
)
from gpupool.workloads.choices import Origin
from gpupool.workloads.models import PODS_BEING_CREATED_FACT, pods_waited_for

# The fact of a ``gang`` explanation saying gpupool is creating the pods it waits for (work
# submitted through gpupool), not that a gang's members are missing (one name, the readers').
CREATING_PODS = PODS_BEING_CREATED_FACT

FACTS_REFRESH_S = 30.0
REFRESHED_PER_CYCLE = 500  # explanations whose facts alone moved, rewritten per cycle


@dataclass(frozen=True, slots=True)
class PodPlace:
    """One admitted pod: its pod set row, its index there, its node row, GPUs and share."""

    pod_set_id: int
    pod_index: int
    node_id: int
    gpu_indices: tuple[int, ...]
    milli: int | None


@dataclass(frozen=True, slots=True)
class AdmissionRecord:
    """An admission to write: the pods and the usage it opens."""

    workload_id: int
    name: str
    pods: tuple[PodPlace, ...]
    usage: tuple[tuple[int, Decimal], ...]  # (flavor id, GPUs)


@dataclass(frozen=True, slots=True)
class GrowthRecord:
    """A running elastic gang that adds pods (``Plan.grow``): the pods added, the GPUs it
    holds per flavor with them (all of them: its usage is closed and opened again), and why
    in words ("grew from 4 to 6 of 8 pods: ...")."""

    workload_id: int
    name: str
    pods: tuple[PodPlace, ...]
    usage: tuple[tuple[int, Decimal], ...]  # (flavor id, GPUs held now)
    ran: int  # pods it ran before
    runs: int  # pods it runs now
    reason: str


def growth_words(ran: int, runs: int, of: int, queue: str) -> str:
    """Why an elastic gang grew, as its history says it."""
    return (
        f"grew from {ran} to {runs} of {of} pods: free capacity within queue {queue}'s "
        "deserved share"
    )


@dataclass(frozen=True, slots=True)
class EvictionRecord:
    """An eviction decided: the victim, why, for whom, and what it costs."""

    victim_id: int
    name: str
    reason: str
    preemptor_id: int | None
    gpus_freed: Decimal
    lost_gpu_hours: Decimal
    nodes: tuple[str, ...] = ()  # the nodes it runs on, by name (its drain's, for ``admin``)


def _refused_recently(info: WorkloadInfo | None, now: float) -> bool:
    """Whether a disruption budget refused the workload's eviction within the refusal's
    back-off: the snapshot's ``eviction_refused_until``, set by the loop from the refusal
    (``loop.REFUSAL_BACKOFF_S``), which the core's victim search honours too
    (``contracts.protected_until``). A drain asks again once it has passed."""
    refused = None if info is None else info.eviction_refused_until
    return refused is not None and refused > now


def _nodes_of(info: WorkloadInfo) -> tuple[str, ...]:
    """The names of the nodes a workload's placement holds, sorted."""
    return tuple(sorted({pod.node for pod in info.placement}))


@dataclass(frozen=True, slots=True)
class Explanation:
    """Why a pending workload waits, as written: the reason, the sentence as the cycle said it
    (the pod Event's words; pages render it again with the current position) and the facts."""

    reason: str
    detail: str
    facts: Mapping[str, object]


@dataclass(frozen=True, slots=True)
class IdleAlertRecord:
    """An idle spell to alert about: the workload, since when it is idle, when it is
    reclaimed if it stays idle (None: never)."""

    workload_id: int
    name: str
    idle_since: datetime
    reclaim_at: datetime | None


@dataclass
class CycleRecord:
    """Everything one cycle decided to write."""

    at: datetime
    admissions: list[AdmissionRecord] = field(default_factory=list)
    evictions: list[EvictionRecord] = field(default_factory=list)
    nominated: dict[int, bool] = field(default_factory=dict)
    explanations: dict[int, Explanation] = field(default_factory=dict)
    # Explanations whose reason is new (their pods get an Event): the rest moved facts only.
    new_reasons: set[int] = field(default_factory=set)
    # Queue ranks to write (None: cleared, no longer in a queue's order), and whether every
    # other pending workload's rank is to be cleared (the loop knew no ranks: it is new, or
    # another process recorded since).
    ranks: dict[int, float | None] = field(default_factory=dict)
    ranks_whole: bool = False
    # Every ranked pending workload's rank after this cycle (written or kept): an
    # explanation's row gets its rank in the same write.
    ranked: dict[int, float] = field(default_factory=dict)
    # The same ranks by queue, ascending (each queue's order): a position is counted in them.
    ranks_by_queue: dict[str, list[float]] = field(default_factory=dict)
    pending_by_reason: dict[str, int] = field(default_factory=dict)
    idle_alerts: list[IdleAlertRecord] = field(default_factory=list)
    growths: list[GrowthRecord] = field(default_factory=list)


def placed_gpus(workload: WorkloadInfo, flavor_of_node: Mapping[str, str]) -> dict[str, float]:
    """GPUs the workload holds per flavor (fractions of shared GPUs count milli / 1000)."""
    totals: dict[str, float] = defaultdict(float)
    for pod in workload.placement:
        flavor = flavor_of_node.get(pod.node, "")
        totals[flavor] += pod.milli / MILLI if pod.milli is not None else len(pod.gpus)
    return dict(totals)


def lost_gpu_hours(workload: WorkloadInfo, now: float) -> float:
    """Progress an eviction throws away: GPU-hours since its start or last checkpoint."""
    since = workload.last_checkpoint_at or workload.started_at or now
    gpus = sum(p.milli / MILLI if p.milli is not None else len(p.gpus) for p in workload.placement)
    return max(now - since, 0.0) / SECONDS_PER_HOUR * gpus


def acted_on(snapshot: Snapshot, plan: Plan) -> Snapshot:
    """The snapshot with only the workloads ``plan`` admits, grows or evicts, and their
    preemptors: ``lifecycle.apply_plan`` moves each of those as it would in the whole
    snapshot (what becomes of a workload depends on the plan and itself, an eviction's
    preemptor's tenant on the preemptor's queue), the preemption history too. The loop reads
    back only the admitted and grown from the result (their placements, their budgets):
    applying the plan to the whole snapshot passed over tens of thousands of workloads at
    B1's size."""
    names = {admission.workload for admission in plan.admit}
    names.update(growth.workload for growth in plan.grow)
    for eviction in plan.evict:
        names.add(eviction.workload)
        if eviction.preemptor is not None:
            names.add(eviction.preemptor)
    return replace(snapshot, workloads=tuple(named(snapshot.workloads, names)))


def json_facts(facts: Mapping[str, object]) -> dict[str, object]:
    """Facts as the database's JSON gives them back (tuples become lists), so an unchanged
    explanation compares equal to the one written: ``json.loads(json.dumps(facts,
    default=str, sort_keys=True))``, converted directly where the facts are plain JSON
    values (text keys; text, numbers, flags, null, lists, tuples and objects): a steady
    cycle converts a thousand or more."""
    plain = _plain_json(facts)
    if plain is not _NOT_PLAIN:
        return plain  # type: ignore[return-value]
    result: dict[str, object] = json.loads(json.dumps(facts, default=str, sort_keys=True))
    return result


_NOT_PLAIN = object()
_SCALARS = (str, int, bool, type(None))


def _plain_json(value: object) -> object:
    """``value`` as its JSON round trip gives it back, or ``_NOT_PLAIN`` for anything else
    (a key that is no text, a float that is not finite, a type of its own)."""
    kind = type(value)
    if kind in _SCALARS:
        return value
    if kind is float:
        return value if math.isfinite(value) else _NOT_PLAIN  # type: ignore[arg-type]
    if kind is dict:
        if any(type(key) is not str for key in value):  # type: ignore[attr-defined]
            return _NOT_PLAIN
        result: dict[str, object] = {}
        for key in sorted(value):  # type: ignore[call-overload]
            item = _plain_json(value[key])  # type: ignore[index]
            if item is _NOT_PLAIN:
                return _NOT_PLAIN
            result[key] = item
        return result
    if kind is list or kind is tuple:
        items = []
        for entry in value:  # type: ignore[attr-defined]
            item = _plain_json(entry)
            if item is _NOT_PLAIN:
                return _NOT_PLAIN
            items.append(item)
        return items
    return _NOT_PLAIN


def queue_ranks(order: Sequence[int], before: Mapping[int, float]) -> dict[int, float]:
    """Rank keys for one queue's pending workloads in ``order`` (first served first), given
    the keys they had (``before``); returns only the keys to write.

    The keys of a longest run of ``order`` whose old keys increase are kept (patience
    sorting); every other workload gets a key between its kept neighbours' (after the last:
    the last plus 1, 2, ...). When floating point leaves no room between two neighbours,
    the whole queue is numbered 1, 2, ... again. So work admitted ahead writes nothing
    behind it, and a new workload writes its own key only."""
    keys: list[float | None] = [before.get(pk) for pk in order]
    if None not in keys and all(a < b for a, b in pairwise(keys)):  # type: ignore[operator]
        return {}  # every key kept, in order (most queues of a steady cycle)
    known = [(index, key) for index, key in enumerate(keys) if key is not None]
    if any(a[1] >= b[1] for a, b in pairwise(known)):
        # Not all in order (a steady cycle usually is): keep a longest increasing run.
        tails: list[float] = []  # the smallest last key of an increasing run of each length
        ends: list[int] = []  # ... and which entry of ``known`` it is
        links = [-1] * len(known)
        for entry, (_, key) in enumerate(known):
            length = bisect_left(tails, key)
            if length:
                links[entry] = ends[length - 1]
            if length == len(tails):
                tails.append(key)
                ends.append(entry)
            else:
                tails[length], ends[length] = key, entry
        keys = [None] * len(order)
        entry = ends[-1] if ends else -1
        while entry >= 0:
            index, kept = known[entry]
            keys[index] = kept
            entry = links[entry]
    if len(known) == len(order) and all(key is not None for key in keys):
        return {}  # every key kept
    written: dict[int, float] = {}
    index = 0
    while index < len(order):
        if keys[index] is not None:
            index += 1
            continue
        end = index
        while end < len(order) and keys[end] is None:
            end += 1
        low = keys[index - 1] if index else None
        high = keys[end] if end < len(order) else None
        count = end - index
        if low is None and high is None:
            fresh = [float(n) for n in range(1, count + 1)]
        elif high is None:
            assert low is not None
            fresh = [low + n for n in range(1, count + 1)]
        elif low is None:
            fresh = [high - count + n for n in range(count)]
        else:
            step = (high - low) / (count + 1)
            fresh = [low + step * (n + 1) for n in range(count)]
            if not all(a < b for a, b in zip([low, *fresh], [*fresh, high], strict=True)):
                return {  # no room left between two keys: number the queue again
                    pk: float(n)
                    for n, pk in enumerate(order, start=1)
                    if before.get(pk) != float(n)
                }
        for offset, key in enumerate(fresh):
            keys[index + offset] = key
            written[order[index + offset]] = key
        index = end
    return written


def _decimal(value: float, places: str) -> Decimal:
    return Decimal(str(value)).quantize(Decimal(places))


def _placed(
    database: DatabaseSnapshot, admission: Admission, flavor_of_node: Mapping[str, str]
) -> tuple[tuple[PodPlace, ...], defaultdict[str, float]]:
    """The pods an admission (or a growth: ``Plan.grow``) places, as rows to write (the
    core's ``PodRef`` says which pod each placement is), and the GPUs they take per flavor
    (a shared flavor's milli / 1000)."""
    pod_set_ids = database.pod_set_ids[admission.workload]
    node_ids = database.node_ids
    usage: defaultdict[str, float] = defaultdict(float)
    pods: list[PodPlace] = []
    for ref, pod in zip(admission.pod_refs, admission.placement, strict=True):
        pods.append(
            PodPlace(pod_set_ids[ref.pod_set], ref.index, node_ids[pod.node], pod.gpus, pod.milli)
        )
        gpus = pod.milli / MILLI if pod.milli is not None else len(pod.gpus)
        usage[flavor_of_node[pod.node]] += gpus
    return tuple(pods), usage


def _usage_rows(
    usage: Mapping[str, float], flavor_ids: Mapping[str, int]
) -> tuple[tuple[int, Decimal], ...]:
    """GPUs per flavor as the usage intervals hold them: (flavor id, GPUs), by flavor."""
    return tuple(
        (flavor_ids[flavor], _decimal(gpus, "0.001")) for flavor, gpus in sorted(usage.items())
    )


def decide_record(
    database: DatabaseSnapshot,
    plan: Plan,
    rows: Mapping[str, WorkloadRow],
    at: datetime,
    *,
    written: Mapping[int, Explanation],
    written_at: Mapping[int, float] | None = None,
    refresh_before: float = 0.0,
    draining: Collection[str] = (),
    learned: Collection[str] = (),
    facts_cache: dict[int, tuple[Mapping[str, object], dict[str, object]]] | None = None,
    ranks: Mapping[int, float] | None = None,
    too_large: Mapping[int, str] | None = None,
    malformed: Mapping[int, str] | None = None,
) -> CycleRecord:
    """The rows the plan asks for.

    ``written`` holds the explanations as last written and ``written_at`` when (a monotonic
    wall clock: explanations are read by people, whatever the cluster's clock): one whose
    reason is unchanged but whose facts moved is written again only when it was written
    before ``refresh_before``, the oldest first, ``REFRESHED_PER_CYCLE`` a cycle at most; one
    whose position alone moved is not written.
    ``ranks``: the queue ranks as the database holds them (``queue_ranks``); None when the
    caller does not know them, and then every pending workload's is written and every other
    one's cleared (``CycleRecord.ranks_whole``).
    ``learned``: workloads whose expected runtime was learned, which their facts say.
    ``facts_cache``: the core's facts of each pending workload as last seen and their JSON
    form (kept by the caller between cycles: most facts repeat, and their JSON round trip
    was a tenth of a steady record).
    ``too_large``: workloads left out of the snapshot because their pods ask what no node
    could hold (workload id -> what is wrong, ``sync._refused``), explained so (``capacity``,
    never fits) when not written so already.
    ``malformed``: workloads left out because their pods' gpupool.io labels or annotations
    cannot be used (workload id -> what is wrong), explained so, with no reason of the core's.
    A workload submitted through gpupool that waits for its pods (``gang``) is told that its
    pods are being created, not that its gang lacks them (``CREATING_PODS``).
    """
    written_at = written_at or {}
    snapshot: Snapshot = database.snapshot
    now = database.now
    record = CycleRecord(at=at)
    by_name = database.by_name
    flavor_of_node = {node.name: node.flavor for node in snapshot.nodes}
    flavor_ids = database.flavor_ids
    for admission in plan.admit:
        workload_id = database.workload_ids[admission.workload]
        pods, usage = _placed(database, admission, flavor_of_node)
        record.admissions.append(
            AdmissionRecord(workload_id, admission.workload, pods, _usage_rows(usage, flavor_ids))
        )
        if by_name[admission.workload].nominated:
            record.nominated[workload_id] = False
    for growth in plan.grow:
        grown = by_name[growth.workload]
        pods, usage = _placed(database, growth, flavor_of_node)
        for flavor, gpus in placed_gpus(grown, flavor_of_node).items():
            usage[flavor] += gpus  # what it ran already: its usage opens again for all
        ran = len(grown.placement)
        runs = ran + len(pods)
        record.growths.append(
            GrowthRecord(
                database.workload_ids[growth.workload],
                growth.workload,
                pods,
                _usage_rows(usage, flavor_ids),
                ran,
                runs,
                growth_words(ran, runs, grown.pod_count, grown.queue),
            )
        )
    evicted: set[str] = set()
    for eviction in plan.evict:
        victim = by_name[eviction.workload]
        evicted.add(victim.name)
        record.evictions.append(
            EvictionRecord(
                database.workload_ids[victim.name],
                victim.name,
                eviction.reason,
                None if eviction.preemptor is None else database.workload_ids[eviction.preemptor],
                _decimal(sum(placed_gpus(victim, flavor_of_node).values()), "0.001"),
                _decimal(lost_gpu_hours(victim, now), "0.0001"),
                _nodes_of(victim),
            )
        )
    if draining:
        for name, row in rows.items():
            info = row.info
            if (
                info.state == "running"
                and not row.eviction_reason
                and name not in evicted
                and any(pod.node in draining for pod in info.placement)
                and not _refused_recently(by_name.get(name), now)
            ):
                record.evictions.append(
                    EvictionRecord(
                        row.id,
                        name,
                        "admin",
                        None,
                        _decimal(sum(placed_gpus(info, flavor_of_node).values()), "0.001"),
                        _decimal(lost_gpu_hours(info, now), "0.0001"),
                        _nodes_of(info),
                    )
                )
    for alert in plan.idle_alerts:
        alerted = rows.get(alert.workload)
        if alerted is None or alerted.idle_alerted_since == alert.idle_since:
            continue  # this spell was alerted about already
        record.idle_alerts.append(
            IdleAlertRecord(
                alerted.id,
                alert.workload,
                datetime.fromtimestamp(alert.idle_since, tz=UTC),
                None
                if alert.reclaim_at is None
                else datetime.fromtimestamp(alert.reclaim_at, tz=UTC),
            )
        )

    def explained(pending: PendingExplanation, workload_id: int) -> Explanation:
        """The pending workload's explanation, its facts in their JSON form (cached)."""
        cached = facts_cache.get(workload_id) if facts_cache is not None else None
        if cached is not None and cached[0] == pending.facts:
            facts = dict(cached[1])
        else:
            facts = json_facts(pending.facts)
            if facts_cache is not None:
                facts_cache[workload_id] = (pending.facts, dict(facts))
        if pending.workload in learned:
            facts["expected_runtime_s"] = by_name[pending.workload].expected_runtime_s
            facts["expected_runtime_learned"] = True
        detail = pending.detail
        if pending.reason == "gang" and _makes_its_pods(rows, pending.workload):
            facts[CREATING_PODS] = True  # gpupool makes its pods
            detail = (
                f"Its pods are being created: gpupool makes the {facts.get('missing_pods')} "
                "it lacks now, and schedules it once they exist (the next cycle)."
            )
        return Explanation(pending.reason, detail, facts)

    # The refresh's candidates by when they were last written (a cycle writes all of its
    # explanations at one moment, so there are few such moments): the oldest moments first,
    # by id within one, without sorting thousands of (when, id, explanation) triples.
    refreshed: dict[float, list[tuple[int, PendingExplanation]]] = {}
    queues: dict[str, list[tuple[int, int]]] = defaultdict(list)  # queue -> (position, id)
    workload_ids, by_reason = database.workload_ids, record.pending_by_reason
    nominated, explanations, new_reasons = record.nominated, record.explanations, record.new_reasons
    for pending in plan.pending:
        name, reason = pending.workload, pending.reason
        workload_id = workload_ids[name]
        workload = by_name[name]
        never = never_fits(pending.facts)
        # Set aside at enqueue, as is a gang that waits for the cluster's pods: in no queue's
        # order (the cycle serves neither), so work behind does not count them.
        if not never and not (reason == "gang" and _waits_for_cluster_pods(pending, rows)):
            queues[workload.queue].append((pending.position, workload_id))
        by_reason[reason] = by_reason.get(reason, 0) + 1
        if reason == "waiting-for-preemption" and not workload.nominated:
            nominated[workload_id] = True
        before = written.get(workload_id)
        if (
            before is not None
            and before.reason == reason
            and never_fits(before.facts) == never  # readers show it at once
        ):
            # At most its facts moved (free GPUs, quota available; its position is counted
            # when read): looked at again when the last write is older than
            # ``refresh_before``, the oldest first, at most ``REFRESHED_PER_CYCLE`` a cycle
            # (its JSON form only then).
            when = written_at.get(workload_id, 0.0)
            if when <= refresh_before:
                group = refreshed.get(when)
                if group is None:
                    refreshed[when] = group = []
                group.append((workload_id, pending))
            continue
        explanations[workload_id] = explained(pending, workload_id)
        new_reasons.add(workload_id)
    taken = 0
    for when in sorted(refreshed):
        if taken >= REFRESHED_PER_CYCLE:
            break
        group = refreshed[when]
        group.sort()  # by id (ids differ: the explanations are not compared)
        for workload_id, pending in group:
            if taken >= REFRESHED_PER_CYCLE:
                break
            explanation = explained(pending, workload_id)
            if explanation.facts != written[workload_id].facts:
                explanations[workload_id] = explanation
                taken += 1
    for workload_id, why in (too_large or {}).items():
        refused = Explanation(
            "capacity",
            f"It can never run as asked, so gpupool does not schedule it: {why}.",
            {NEVER_FITS_FACT: True, "refused": why},
        )
        if written.get(workload_id) != refused:
            record.explanations[workload_id] = refused
    for workload_id, why in (malformed or {}).items():
        # No reason of the core's: it never saw the workload.
        unreadable = Explanation(
            "",
            "gpupool does not schedule it: its pods' gpupool.io labels or annotations cannot "
            f"be used ({why}). Fix them and it is looked at again.",
            {"refused": why},
        )
        if written.get(workload_id) != unreadable:
            record.explanations[workload_id] = unreadable
    _decide_ranks(record, queues, ranks)
    return record


def _makes_its_pods(rows: Mapping[str, WorkloadRow], name: str) -> bool:
    """Whether gpupool makes the workload's pods itself, at once (submitted through it)."""
    row = rows.get(name)
    return row is not None and row.origin == Origin.GPUPOOL


def _waits_for_cluster_pods(pending: PendingExplanation, rows: Mapping[str, WorkloadRow]) -> bool:
    """Whether a pending gang waits for pods its controller has not made (the readers' rule,
    ``workloads.models.pods_waited_for``): the core does not serve it until they exist
    (DESIGN 3, enqueue), and nothing here can promise when, so it has no queue rank -- no
    position, and work behind it does not count it ahead. A gang of gpupool's own is in
    line as usual: the loop makes its pods at once."""
    return pods_waited_for(pending.reason, pending.facts) > 0 and not _makes_its_pods(
        rows, pending.workload
    )


def _decide_ranks(
    record: CycleRecord,
    queues: Mapping[str, list[tuple[int, int]]],
    ranks: Mapping[int, float] | None,
) -> None:
    """The queue ranks to write: each queue's order by the plan's positions, kept where it
    holds; the ranks of workloads that left the order (not admitted: the admission clears
    its own) cleared."""
    before: Mapping[int, float] = {} if ranks is None else ranks
    record.ranks_whole = ranks is None
    ranked, by_queue = record.ranked, record.ranks_by_queue
    for queue, entries in queues.items():
        entries.sort()
        order = [pk for _, pk in entries]
        written = queue_ranks(order, before)
        record.ranks.update(written)
        if written:
            keys = [written[pk] if pk in written else before[pk] for pk in order]
        else:  # every key kept (most queues of a steady cycle)
            keys = list(map(before.__getitem__, order))
        ranked.update(zip(order, keys, strict=True))
        by_queue[queue] = keys  # ascending: ``queue_ranks`` keeps the order's keys increasing
    admitted = {admission.workload_id for admission in record.admissions}
    record.ranks.update(dict.fromkeys(sorted(before.keys() - ranked.keys() - admitted)))
