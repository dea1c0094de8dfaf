"""The loop's state takes its own writes as it makes them, and equals the database all along.

A seeded walk drives a loop on the fake cluster (submissions through gpupool and by kubectl,
pods that start, succeed, fail or vanish, cancellations, checkpoints, high-priority work that
preempts, time passing) one cycle per step. After each cycle:

- every workload the state would not read again (``LoopState.held`` still the row's
  ``updated_at``) equals, field for field, what ``read_workloads`` reads from the database;
- a copy of the state, refreshed, holds exactly the rows ``read_workloads`` reads and
  assembles the snapshot ``build_snapshot`` builds from scratch.

And the walk must have skipped rows (the loop's own admissions, evictions, nominations, starts
and requeues), or it would prove nothing.
"""

from __future__ import annotations

import copy
import random

import pytest
from loop_builders import World, build_world

from gpupool.control.cluster import holds_node
from gpupool.control.snapshot import build_snapshot, read_workloads
from gpupool.control.state import LoopState
from gpupool.control.sync import moment
from gpupool.quotas.models import PriorityClass
from gpupool.workloads.actions import do_cancel_workload
from gpupool.workloads.models import Workload

pytestmark = pytest.mark.django_db

CHECKPOINT = "gpupool.io/last-checkpoint"


def _step(world: World, rng: random.Random, step: int) -> str:
    """One random change of the cluster or the database; says what it did."""
    cluster = world.cluster
    kinds = ["submit", "submit", "kubectl", "run", "run", "finish", "vanish", "cancel", "tick"]
    kind = rng.choice([*kinds, "checkpoint", "urgent"])
    bound = [k for k, p in cluster.pods.items() if p.node_name is not None]
    running = [k for k in bound if cluster.pods[k].phase == "Running"]
    if kind == "submit":
        world.submit(
            f"s{step}",
            queue=rng.choice(["team-a", "team-b"]),
            gpus=rng.choice([1, 1, 2, 4]),
            count=rng.choice([1, 1, 2]),
            expected_runtime_s=rng.choice([None, 3600]),
        )
    elif kind == "kubectl":
        for index in range(rng.choice([1, 2])):
            cluster.add_pod(f"k{step}-{index}", workload=f"k{step}", gpus=rng.choice([1, 2]))
    elif kind == "run":
        cluster.run()
    elif kind == "finish" and running:
        cluster.finish(rng.choice(running), rng.choice(["Succeeded", "Succeeded", "Failed"]))
    elif kind == "vanish" and bound:
        cluster.remove(rng.choice(bound))
    elif kind == "cancel":
        live = list(Workload.objects.filter(state__in=["pending", "admitted", "running"]))
        if live:
            at = moment(cluster.now())  # the cluster's clock, ahead of the wall's
            do_cancel_workload(rng.choice(live), acting_user=None, reason="walk", at=at)
    elif kind == "tick":
        cluster.tick(rng.choice([60.0, 600.0]))
    elif kind == "checkpoint" and running:
        key = rng.choice(running)
        cluster.annotate(key, **{CHECKPOINT: f"{cluster.clock - rng.uniform(0, 30):.3f}"})
    elif kind == "urgent":
        world.submit(
            f"u{step}",
            queue=rng.choice(["team-a", "team-b"]),
            gpus=8,
            priority_class=PriorityClass.objects.get(name="high"),
        )
    return kind


def _held_rows_equal_the_database(state: LoopState, world: World, after: str) -> None:
    now = moment(world.cluster.now())
    stamps = dict(Workload.objects.values_list("id", "updated_at"))
    database = read_workloads(now)
    for workload_id, stamp in state.held.items():
        name = state.names.get(workload_id)
        if name is None or stamps.get(workload_id) != stamp:
            continue  # not held any more, or written by another: read again
        assert state.rows[name] == database.get(name), f"{name} after {after}"


def _refreshed_equals_a_full_read(state: LoopState, world: World, after: str) -> None:
    now = moment(world.cluster.now())
    refreshed = copy.deepcopy(state)  # the loop's own state moves on undisturbed
    refreshed.refresh(now)
    assert refreshed.rows == read_workloads(now), after
    full = build_snapshot(now=now, policy=state.policy)
    assert refreshed.snapshot(now).snapshot == full.snapshot, after


@pytest.mark.parametrize("seed", [1, 2])
def test_the_loops_state_holds_its_own_writes_as_the_database_reads_them(seed: int) -> None:
    rng = random.Random(seed)
    world = build_world()
    world.cycle()
    held = reported = 0
    for step in range(20):
        did = _step(world, rng, step)
        held += world.cycle().counts["rows_held"]
        after = f"step {step} ({did})"
        _held_rows_equal_the_database(world.loop.state, world, after)
        _refreshed_equals_a_full_read(world.loop.state, world, after)
        mirror = world.loop.mirror
        holding = {
            str(k): k for k, pods in mirror.pods.items() if any(map(holds_node, pods.values()))
        }
        assert mirror.holders == holding, after
        reporting = {
            k
            for k, pods in mirror.pods.items()
            if any(CHECKPOINT in p.annotations for p in pods.values())
        }
        assert mirror.checkpointed == reporting, after
        reported += len(reporting)
    assert held > 0, "no write of the loop was taken without a read"
    assert reported > 0, "no pod reported a checkpoint"


def test_a_row_someone_else_wrote_while_the_loop_held_it_is_read_again() -> None:
    """The loop admits a workload; a person then changes its row (here: its expected runtime);
    the next refresh reads it again instead of trusting the loop's own version."""
    world = build_world()
    world.submit("train", gpus=2)
    world.cycle()  # makes its pods
    world.cycle()  # admits it: the loop's own write, held
    state = world.loop.state
    train = Workload.objects.get(name="train")
    assert train.state == "admitted" and state.held.get(train.pk) == train.updated_at
    train.expected_runtime_s = 7200
    train.save(update_fields=["expected_runtime_s", "updated_at"])
    state.begin_cycle()
    state.refresh(moment(world.cluster.now()))
    assert state.rows["team-a/train"].info.expected_runtime_s == 7200


def test_the_syncs_own_start_is_not_looked_at_again_by_the_next_cycle() -> None:
    """The sync writes a start (its pods run); this cycle's apply looks at it, and the next
    cycle's refresh holds that version quiet: nothing for the next sync or apply to look at
    (its pods did not change since)."""
    world = build_world()
    world.submit("train", gpus=2)
    world.cycle()  # makes its pods
    world.cycle()  # admits and binds it
    world.cluster.run()
    world.cycle()  # the sync writes admitted -> running
    train = world.workload("train")
    state = world.loop.state
    assert train.state == "running" and state.held.get(train.pk) == train.updated_at
    assert state.quiet.get(train.pk) == train.updated_at
    state.begin_cycle()
    state.refresh(moment(world.cluster.now()))
    assert "team-a/train" not in state.changed
    assert state.rows["team-a/train"].info.state == "running"
