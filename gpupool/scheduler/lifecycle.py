"""What happens between two cycles: applying a plan, work finishing, and when to plan again.

``plan`` decides; this module moves a snapshot forward so that everything that replays or runs
cycles -- the estimated starts (``estimate.py``), the queueing replay, the control loop --
applies a plan the same way and agrees on when the next cycle could decide differently:

- ``apply_plan(snapshot, plan, now)``: admitted workloads run from ``now`` where the plan put
  them; grown ones run their added pods too (their start kept); evicted ones go back to
  pending with their submit time (or, with ``evictions_take_time``, keep running marked
  ``evicting_for`` their preemptor until ``requeue`` says they have left); each eviction is
  recorded in the preemption history with the preemptor's tenant; a workload waiting for its
  victims becomes ``nominated``. An idle-reclaimed workload (reason ``idle``) ends instead of
  going back to pending.
- ``finish`` removes finished work, ``due`` names running work whose expected end has come,
  ``forget_history`` drops preemption events no contract looks back to.
- ``next_change_at(snapshot, policy, now)``: the earliest instant after ``now`` at which
  ``plan`` could decide differently with no new arrival -- an expected completion, a protected
  window ending, a back-off or a victim's extra protection lapsing, a starvation limit crossed
  (the contracts' own timers, ``contracts.py``).

Budgets are not charged here: what a workload spends depends on how long it really ran, which
whoever keeps the clock accounts for.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection

from gpupool.scheduler.contracts import Contracts, history_horizon
from gpupool.scheduler.types import (
    Admission,
    Plan,
    PodPlacement,
    PodRef,
    PolicyInfo,
    PreemptionEventInfo,
    Snapshot,
    WorkloadInfo,
)


def apply_plan(
    snapshot: Snapshot, plan: Plan, now: float, *, evictions_take_time: bool = False
) -> Snapshot:
    """The snapshot once ``plan``, decided at ``now``, is carried out.

    Admitted workloads run from ``now`` on the admission's placement (in pod-set order), not
    nominated, with no checkpoint yet, ``backfilled_for`` the workload whose held capacity
    backfill gave them (a workload admitted now leaves nothing held for it), and, at a class
    that costs budget, ``window_reserved`` when the admission reserved their window. Grown
    workloads (``plan.grow``) keep running, their start and everything else kept, their
    placement extended by the added pods (the next ones in pod-set order). Evicted
    workloads are pending again, keeping their submit time, with no placement, start or
    checkpoint (idle-reclaimed ones end: they leave the snapshot) -- or, with
    ``evictions_take_time`` (the control loop, whose evictions take a
    while), still running with ``evicting_for`` set to their preemptor (``leaving`` when it
    has none) until ``requeue`` is told they are gone. Either way each eviction
    is appended to the preemption history at ``now``. Workloads the plan leaves
    ``waiting-for-preemption`` become ``nominated``. A plan that names a workload the
    snapshot does not hold in the right state is refused (``ValueError``).
    """
    admitted = {admission.workload: admission for admission in plan.admit}
    evicted = {eviction.workload: eviction for eviction in plan.evict}
    grown = {admission.workload: admission for admission in plan.grow}
    both = sorted(grown.keys() & (admitted.keys() | evicted.keys()))
    if both:
        raise ValueError(f"the plan grows workloads it also admits or evicts: {both}")
    budgeted = {c.name for c in snapshot.priority_classes if c.budget_rate > 0}
    waiting = {p.workload for p in plan.pending if p.reason == "waiting-for-preemption"}
    found: set[str] = set()
    workloads: list[WorkloadInfo] = []
    for workload in snapshot.workloads:
        name = workload.name
        admission = admitted.get(name)
        eviction = evicted.get(name)
        growth = grown.get(name)
        if growth is not None:
            found.add(name)
            _require(workload, "running", "grow")
            workloads.append(_grown(workload, growth))
        elif admission is not None:
            found.add(name)
            _require(workload, "pending", "admit")
            workloads.append(
                _started(workload, admission, now, workload.priority_class in budgeted)
            )
        elif eviction is not None:
            found.add(name)
            _require(workload, "running", "evict")
            if evictions_take_time:
                workloads.append(
                    dataclasses.replace(
                        workload,
                        evicting_for=eviction.preemptor,
                        leaving=eviction.preemptor is None,
                    )
                )
            elif eviction.reason not in ENDING_REASONS:
                workloads.append(_requeued(workload))
        elif name in waiting:
            workloads.append(dataclasses.replace(workload, nominated=True))
        elif workload.backfilled_for in admitted:
            # its holder runs now: nothing is held for it any more
            workloads.append(dataclasses.replace(workload, backfilled_for=None))
        else:
            workloads.append(workload)
    missing = sorted((admitted.keys() | evicted.keys() | grown.keys()) - found)
    if missing:
        raise ValueError(f"the plan names workloads the snapshot does not hold: {missing}")
    tenants = {queue.name: queue.tenant for queue in snapshot.queues}
    queue_of = {workload.name: workload.queue for workload in snapshot.workloads}
    events = tuple(
        PreemptionEventInfo(
            at=now,
            victim=eviction.workload,
            preemptor=eviction.preemptor,
            preemptor_tenant=(
                tenants.get(queue_of.get(eviction.preemptor, ""))
                if eviction.preemptor is not None
                else None
            ),
        )
        for eviction in plan.evict
    )
    return dataclasses.replace(
        snapshot,
        workloads=tuple(workloads),
        preemption_history=snapshot.preemption_history + events,
    )


# Evictions after which the workload ends instead of being requeued: an idle-reclaimed
# workload would only sit idle again.
ENDING_REASONS = frozenset({"idle"})


def _require(workload: WorkloadInfo, state: str, action: str) -> None:
    if workload.state != state:
        raise ValueError(f"cannot {action} {workload.name!r}: it is {workload.state}")


def _started(
    workload: WorkloadInfo, admission: Admission, now: float, budgeted: bool
) -> WorkloadInfo:
    """The workload running on its admission, its pods stored in pod-set order; at a class
    that costs budget (``budgeted``), whether the admission reserved its window."""
    by_pod, pods = _placed_pods(workload, admission, "admission")
    # A running workload's placement lists its pods in pod-set order; an elastic gang that
    # runs with fewer pods runs its first ones (as the placer admits them).
    if set(by_pod) != set(pods[: len(by_pod)]):
        raise ValueError(
            f"admission of {workload.name!r}: its pods must be the first ones in pod-set order"
        )
    return dataclasses.replace(
        workload,
        state="running",
        started_at=now,
        placement=tuple(by_pod[ref] for ref in pods[: len(by_pod)]),
        nominated=False,
        last_checkpoint_at=None,
        evicting_for=None,
        backfilled_for=admission.backfill_for,
        idle_since=None,
        leaving=False,
        window_reserved=admission.budget_reservation > 0 if budgeted else None,
        eviction_refused_until=None,
    )


def _placed_pods(
    workload: WorkloadInfo, admission: Admission, what: str
) -> tuple[dict[PodRef, PodPlacement], list[PodRef]]:
    """Where each pod ``admission`` (an admission or a growth: ``what``) places goes, by pod,
    checked one reference per placement; and every pod of the workload in pod-set order."""
    refs = admission.pod_refs
    if len(refs) != len(admission.placement) or len(set(refs)) != len(refs):
        raise ValueError(f"{what} of {workload.name!r}: one pod reference per placed pod")
    pods = [
        PodRef(pod_set, index)
        for pod_set, spec in enumerate(workload.pod_sets)
        for index in range(spec.count)
    ]
    return dict(zip(refs, admission.placement, strict=True)), pods


def _grown(workload: WorkloadInfo, growth: Admission) -> WorkloadInfo:
    """The running workload with the pods ``growth`` adds: the next ones in pod-set order
    after those it runs, appended to its placement (which stays in pod-set order)."""
    by_pod, pods = _placed_pods(workload, growth, "growth")
    running = len(workload.placement)
    added = pods[running : running + len(by_pod)]
    if not by_pod or len(added) != len(by_pod) or set(by_pod) != set(added):
        raise ValueError(
            f"growth of {workload.name!r}: its added pods must be the next ones in pod-set order"
        )
    return dataclasses.replace(
        workload, placement=workload.placement + tuple(by_pod[ref] for ref in added)
    )


def _requeued(workload: WorkloadInfo) -> WorkloadInfo:
    """The workload pending again after an eviction, keeping its submit time."""
    return dataclasses.replace(
        workload,
        state="pending",
        started_at=None,
        placement=(),
        last_checkpoint_at=None,
        evicting_for=None,
        nominated=False,
        backfilled_for=None,
        idle_since=None,
        leaving=False,
        window_reserved=None,
        eviction_refused_until=None,
    )


def requeue(snapshot: Snapshot, names: Collection[str]) -> Snapshot:
    """The named running workloads, evicted and gone, pending again (their submit time kept)."""
    workloads = tuple(
        _requeued(w) if w.name in names and w.state == "running" else w for w in snapshot.workloads
    )
    return dataclasses.replace(snapshot, workloads=workloads)


def finish(snapshot: Snapshot, names: Collection[str]) -> Snapshot:
    """The snapshot without the named workloads: they finished and their capacity is free."""
    workloads = tuple(w for w in snapshot.workloads if w.name not in names)
    return dataclasses.replace(snapshot, workloads=workloads)


def expected_end(workload: WorkloadInfo) -> float | None:
    """When a running workload is expected to finish (None: not running, or no runtime)."""
    if workload.state != "running" or workload.expected_runtime_s is None:
        return None
    if workload.started_at is None:
        return None
    return workload.started_at + workload.expected_runtime_s


def due(snapshot: Snapshot, now: float) -> tuple[str, ...]:
    """Running workloads whose expected end is ``now`` or past, by name."""
    ended: list[str] = []
    for workload in snapshot.workloads:
        end = expected_end(workload)
        if end is not None and end <= now:
            ended.append(workload.name)
    return tuple(sorted(ended))


def forget_history(snapshot: Snapshot, policy: PolicyInfo, now: float) -> Snapshot:
    """The snapshot without preemption events older than any contract looks back
    (``contracts.history_horizon``)."""
    oldest = now - history_horizon(policy)
    history = tuple(e for e in snapshot.preemption_history if e.at >= oldest)
    if len(history) == len(snapshot.preemption_history):
        return snapshot
    return dataclasses.replace(snapshot, preemption_history=history)


def next_change_at(snapshot: Snapshot, policy: PolicyInfo, now: float) -> float | None:
    """The earliest instant after ``now`` at which ``plan`` could decide differently with no
    new arrival (None: nothing will change by itself).

    Running work is expected to complete at its start plus its expected runtime. While work
    is pending, the contracts' timers count as well: a running workload's protected window
    ends (it becomes a possible victim), a pending workload's back-off ends, a workload's
    extra protection as a repeated victim lapses, a pending workload starts to starve. An
    idle running workload becomes reclaimable (if it stays idle) whether work is pending or
    not. At an
    instant returned here ``plan`` may still decide as before (the change may not matter);
    before it, nothing that ``plan`` reads has changed.
    """
    moments: list[float | None] = [expected_end(w) for w in snapshot.workloads]
    pending = [w for w in snapshot.workloads if w.state == "pending"]
    idle = [w for w in snapshot.workloads if w.idle_since is not None and w.state == "running"]
    if idle and "idle" in policy.phases:
        contracts = Contracts(snapshot, policy, now)
        moments.extend(contracts.idle_reclaim_at(w) for w in idle)
    if pending:
        contracts = Contracts(snapshot, policy, now)
        for workload in snapshot.workloads:
            if workload.state == "running" and workload.evicting_for is None:
                moments.append(contracts.protected_until(workload))
            moments.append(contracts.victim_protection_ends_at(workload))
        for workload in pending:
            moments.append(contracts.backoff_ends_at(workload))
            moments.append(contracts.starves_at(workload))
    return min((m for m in moments if m is not None and m > now), default=None)


__all__ = [
    "apply_plan",
    "due",
    "expected_end",
    "finish",
    "forget_history",
    "next_change_at",
    "requeue",
]
