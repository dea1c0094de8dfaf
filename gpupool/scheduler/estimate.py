"""Estimated starts and dry-runs, both answered by the same core as the cycle.

**Estimated start** (Slurm's ``squeue --start``): replay the future through ``plan``. Apply
each plan (``lifecycle.apply_plan``: admissions start, victims leave at once and are
requeued, each eviction is recorded for the contracts); when a plan changes nothing, finish
the running work that is due, else jump to the next instant at which the world changes by
itself (``lifecycle.next_change_at``: an expected end, a protected window ending, a back-off
or a starvation limit), and plan again. A workload's estimate is the first step that admits
it. Work without an expected runtime never ends in the replay, so what waits only on it gets
no estimate (``None``) rather than a made-up one.

**Dry-run**: would a hypothetical workload fit now? Three layers answer separately —
quota passes, capacity exists, a placement exists — and the first that fails is named.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

from gpupool.scheduler.cycle import never_runs, plan
from gpupool.scheduler.cycle_state import Cycle, PendingWork
from gpupool.scheduler.explain import Verdict, quota_verdict, sentence
from gpupool.scheduler.lifecycle import apply_plan, due, finish, next_change_at
from gpupool.scheduler.statement import Statement
from gpupool.scheduler.types import PolicyInfo, Snapshot, WorkloadInfo

MAX_REPLAY_STEPS = 200


def estimate_starts(
    snapshot: Snapshot, policy: PolicyInfo, now: float, max_steps: int = MAX_REPLAY_STEPS
) -> dict[str, float | None]:
    """Estimated start time of every pending workload (None when the replay cannot tell)."""
    estimates: dict[str, float | None] = {
        w.name: None for w in snapshot.workloads if w.state == "pending"
    }
    current, moment = snapshot, now
    for _ in range(max_steps):
        result = plan(current, policy, moment)
        for admission in result.admit:
            if admission.workload in estimates and estimates[admission.workload] is None:
                estimates[admission.workload] = moment
        current = apply_plan(current, result, moment)
        if all(value is not None for value in estimates.values()):
            break
        if result.admit or result.evict:
            continue  # plan again at the same moment: preemptors take what their victims freed
        ended = due(current, moment)
        if not ended:
            later = next_change_at(current, policy, moment)
            if later is None:
                break
            moment = later
            ended = due(current, moment)
        current = finish(current, ended)
    return estimates


@dataclass(frozen=True, slots=True)
class LayerAnswer:
    """One layer of a dry-run: does it pass, and if not, why."""

    layer: str
    passes: bool
    detail: str
    facts: Mapping[str, object]


@dataclass(frozen=True, slots=True)
class DryRun:
    """The three layers for a hypothetical workload and the first that fails."""

    workload: str
    layers: tuple[LayerAnswer, ...]
    first_failure: str | None
    # Why it could never run as the queues and pool are set up (enqueue's rule: it would be
    # set aside, with no place in line); "" when it could.
    never: str = ""


def dry_run(snapshot: Snapshot, policy: PolicyInfo, now: float, workload: WorkloadInfo) -> DryRun:
    """Answer quota -> capacity -> placement for a workload that is not submitted yet."""
    if any(w.name == workload.name for w in snapshot.workloads):
        raise ValueError(f"name: a workload named {workload.name!r} already exists")
    candidate = dataclasses.replace(workload, state="pending", placement=(), started_at=None)
    cycle = Cycle(
        dataclasses.replace(snapshot, workloads=(*snapshot.workloads, candidate)), policy, now
    )
    work: PendingWork = cycle.pending[candidate.name]
    assignment = work.assignments[0]
    layers: list[LayerAnswer] = []

    shortfall = cycle.quota.check(candidate.queue, assignment.need)
    if shortfall is None:
        layers.append(LayerAnswer("quota", True, "Quota passes.", {}))
    else:
        verdict = quota_verdict(shortfall)
        layers.append(
            LayerAnswer("quota", False, sentence(verdict, 0, cycle.units), dict(verdict.facts))
        )

    cycle.snapshot_start()
    capacity = cycle.capacity_verdict(work, assignment)
    if capacity is None:
        layers.append(LayerAnswer("capacity", True, "Capacity exists.", {}))
    else:
        verdict = Verdict("capacity", capacity.facts)
        layers.append(
            LayerAnswer("capacity", False, sentence(verdict, 0, cycle.units), dict(verdict.facts))
        )

    trial = Statement(cycle.cluster, cycle.quota)
    placed = cycle.placer.place(trial, assignment.pods, candidate.gang_minimum, candidate.topology)
    if placed is not None:
        trial.discard()
        nodes = sorted({pod.node for pod in placed})
        layers.append(
            LayerAnswer("placement", True, f"It would run on {', '.join(nodes)}.", {"nodes": nodes})
        )
    else:
        trial.discard()
        verdict = cycle.placement_verdict(work, assignment, Statement(cycle.cluster, cycle.quota))
        if verdict.reason == "behind":
            verdict = Verdict("fragmentation", {**verdict.facts, "largest_placeable": 0})
        layers.append(
            LayerAnswer("placement", False, sentence(verdict, 0, cycle.units), dict(verdict.facts))
        )
    first = next((layer.layer for layer in layers if not layer.passes), None)
    never = never_runs(cycle, candidate.queue, work.assignments, work.minimum, candidate.topology)
    return DryRun(
        candidate.name,
        tuple(layers),
        first,
        "" if never is None else sentence(never, 0, cycle.units),
    )
