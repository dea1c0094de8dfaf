"""Step 4 of a cycle, record: the plan as rows to write, decided before anything is written.

``decide_record`` turns the core's plan into a ``CycleRecord`` of plain values;
``actions.do_record_cycle`` writes it in one transaction. What it holds:

- **admissions**: each admitted workload's pods with their pod-set rows, nodes, GPU indices and
  milli shares (the core's ``PodRef`` says which pod each placement is), and the usage it opens
  per flavor (GPUs; a shared flavor counts milli / 1000);
- **evictions**: each victim with its reason and preemptor, the GPUs it frees and the progress
  it loses (GPU-hours since its start, or since its last checkpoint); a drained node's running
  workloads too (reason ``admin``, no preemptor). A victim stays running, marked
  ``evicting_for`` its preemptor, until its pods are gone (``lifecycle.apply_plan`` with
  ``evictions_take_time``); the preemptor waits nominated;
- **nominations** that changed, and **explanations** (reason, sentence, facts, position) of
  pending workloads whose explanation changed since it was last written -- at once when its
  reason changed; when only its numbers moved (position, facts, the sentence that says them),
  once the last write is ``POSITION_REFRESH_S`` old, the oldest first and at most
  ``REFRESHED_PER_CYCLE`` a cycle (thousands move every cycle; writing them all was most of a
  steady cycle's record);
- **idle alerts**: running workloads idle past their alert timeout whose idle spell was not
  alerted about yet (``Workload.idle_alerted_since`` differs from the spell's start): once per
  spell, however many cycles it lasts.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal

from gpupool.control.snapshot import DatabaseSnapshot, WorkloadRow
from gpupool.scheduler.types import (
    MILLI,
    SECONDS_PER_HOUR,
    PendingExplanation,
    Plan,
    Snapshot,
    WorkloadInfo,
)

POSITION_REFRESH_S = 30.0
REFRESHED_PER_CYCLE = 500  # explanations whose numbers alone moved, rewritten per cycle


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
class EvictionRecord:
    """An eviction decided: the victim, why, for whom, and what it costs."""

    victim_id: int
    name: str
    reason: str
    preemptor_id: int | None
    gpus_freed: Decimal
    lost_gpu_hours: Decimal


@dataclass(frozen=True, slots=True)
class Explanation:
    """Why a pending workload waits, as the pages and the pod Events show it."""

    reason: str
    detail: str
    facts: Mapping[str, object]
    position: int | None


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
    pending_by_reason: dict[str, int] = field(default_factory=dict)
    idle_alerts: list[IdleAlertRecord] = field(default_factory=list)


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


def json_facts(facts: Mapping[str, object]) -> dict[str, object]:
    """Facts as the database's JSON gives them back (tuples become lists), so an unchanged
    explanation compares equal to the one written."""
    result: dict[str, object] = json.loads(json.dumps(facts, default=str, sort_keys=True))
    return result


def _decimal(value: float, places: str) -> Decimal:
    return Decimal(str(value)).quantize(Decimal(places))


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
) -> CycleRecord:
    """The rows the plan asks for.

    ``written`` holds the explanations as last written and ``written_at`` when (a monotonic
    wall clock: explanations are read by people, whatever the cluster's clock): one whose
    reason is unchanged but whose numbers moved is written again only when it was written
    before ``refresh_before``, the oldest first, ``REFRESHED_PER_CYCLE`` a cycle at most.
    ``learned``: workloads whose expected runtime was learned, which their facts say.
    ``facts_cache``: the core's facts of each pending workload as last seen and their JSON
    form (kept by the caller between cycles: most facts repeat, and their JSON round trip
    was a tenth of a steady record).
    """
    written_at = written_at or {}
    snapshot: Snapshot = database.snapshot
    now = database.now
    record = CycleRecord(at=at)
    by_name = {w.name: w for w in snapshot.workloads}
    flavor_of_node = {node.name: node.flavor for node in snapshot.nodes}
    flavor_ids = database.flavor_ids
    node_ids = database.node_ids
    for admission in plan.admit:
        workload_id = database.workload_ids[admission.workload]
        pod_set_ids = database.pod_set_ids[admission.workload]
        usage: dict[str, float] = defaultdict(float)
        pods: list[PodPlace] = []
        for ref, pod in zip(admission.pod_refs, admission.placement, strict=True):
            pods.append(
                PodPlace(
                    pod_set_ids[ref.pod_set], ref.index, node_ids[pod.node], pod.gpus, pod.milli
                )
            )
            usage[flavor_of_node[pod.node]] += (
                pod.milli / MILLI if pod.milli is not None else len(pod.gpus)
            )
        record.admissions.append(
            AdmissionRecord(
                workload_id,
                admission.workload,
                tuple(pods),
                tuple(
                    (flavor_ids[flavor], _decimal(gpus, "0.001"))
                    for flavor, gpus in sorted(usage.items())
                ),
            )
        )
        if by_name[admission.workload].nominated:
            record.nominated[workload_id] = False
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
            ):
                record.evictions.append(
                    EvictionRecord(
                        row.id,
                        name,
                        "admin",
                        None,
                        _decimal(sum(placed_gpus(info, flavor_of_node).values()), "0.001"),
                        _decimal(lost_gpu_hours(info, now), "0.0001"),
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
        return Explanation(pending.reason, pending.detail, facts, pending.position or None)

    refreshed: list[tuple[float, int, PendingExplanation]] = []
    for pending in plan.pending:
        workload_id = database.workload_ids[pending.workload]
        record.pending_by_reason[pending.reason] = (
            record.pending_by_reason.get(pending.reason, 0) + 1
        )
        waiting = pending.reason == "waiting-for-preemption"
        if waiting and not by_name[pending.workload].nominated:
            record.nominated[workload_id] = True
        before = written.get(workload_id)
        if before is not None and before.reason == pending.reason:
            # At most its numbers moved (position, free GPUs, usage): looked at again when
            # the last write is older than ``refresh_before``, the oldest first, at most
            # ``REFRESHED_PER_CYCLE`` a cycle (its JSON form only then).
            when = written_at.get(workload_id, 0.0)
            if when <= refresh_before:
                refreshed.append((when, workload_id, pending))
            continue
        record.explanations[workload_id] = explained(pending, workload_id)
    refreshed.sort(key=lambda entry: (entry[0], entry[1]))
    taken = 0
    for _, workload_id, pending in refreshed:
        if taken >= REFRESHED_PER_CYCLE:
            break
        explanation = explained(pending, workload_id)
        if explanation != written.get(workload_id):
            record.explanations[workload_id] = explanation
            taken += 1
    return record
