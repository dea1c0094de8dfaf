"""``record.acted_on``: the plan applied to what it acts on equals the whole snapshot applied."""

from __future__ import annotations

import dataclasses
import random

import pytest

from gpupool.control.record import acted_on
from gpupool.scheduler.cycle import plan
from gpupool.scheduler.lifecycle import apply_plan
from gpupool.scheduler.types import Eviction, PendingExplanation, Plan
from gpupool.simulation.scale_pool import synthetic_snapshot


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_the_plan_applied_to_what_it_acts_on_equals_the_whole_snapshot_applied(
    seed: int,
) -> None:
    """Random plans on a small B1 pool (admissions the core made, evictions of running work
    for pending preemptors or for none, nominations, backfill holders admitted): applied to
    ``acted_on``'s snapshot, each workload there comes out as it does from the whole snapshot,
    and the preemption history the same -- in name order (the loop's) or not."""
    snapshot, policy, now = synthetic_snapshot(60, seed)
    decided = plan(snapshot, policy, now)
    assert decided.admit
    rng = random.Random(seed)
    running = [w.name for w in snapshot.workloads if w.state == "running"]
    pending = [w.name for w in snapshot.workloads if w.state == "pending"]
    admitted = {a.workload for a in decided.admit}
    for trial in range(6):
        admit = tuple(a for a in decided.admit if rng.random() < 0.7)
        waiting = [n for n in pending if n not in admitted and rng.random() < 0.1]
        evict = tuple(
            Eviction(name, rng.choice(["preempt", "idle", "admin"]), rng.choice([*waiting, None]))
            for name in sorted(rng.sample(running, min(len(running), trial * 3)))
        )
        random_plan = Plan(
            admit,
            evict,
            tuple(PendingExplanation(n, "waiting-for-preemption", "", 1, {}) for n in waiting),
        )
        ordered = dataclasses.replace(
            snapshot, workloads=tuple(sorted(snapshot.workloads, key=lambda w: w.name))
        )
        for whole in (snapshot, ordered):
            for take_time in (False, True):
                everything = apply_plan(whole, random_plan, now, evictions_take_time=take_time)
                part = acted_on(whole, random_plan)
                acted = {a.workload for a in admit} | {e.workload for e in evict}
                preemptors = {e.preemptor for e in evict} - {None}
                assert {w.name for w in part.workloads} == acted | preemptors
                applied = apply_plan(part, random_plan, now, evictions_take_time=take_time)
                names = {w.name for w in applied.workloads}
                assert applied.workloads == tuple(
                    w for w in everything.workloads if w.name in names
                )
                assert names == acted | preemptors if take_time else names <= acted | preemptors
                assert applied.preemption_history == everything.preemption_history
                assert applied.budgets == everything.budgets
