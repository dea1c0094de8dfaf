"""The pipeline: a cycle's bindings go on while the next cycle syncs and plans
(``ControlLoop.run_cycle(pipeline=True)``, ``docs/control-loop.md`` "The pipeline")."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping, Sequence

import pytest
from django.db import connection
from loop_builders import World, build_world

from gpupool.clusters.base import BindOutcome, PodBinding
from gpupool.control import loop as loop_module
from gpupool.control.lock import cycle_lock
from gpupool.control.runner import run_forever

pytestmark = pytest.mark.django_db


@pytest.fixture
def world(db: None) -> Iterator[World]:
    """Two teams, two 8-GPU nodes, a loop on a cluster that lets apply run beside sync."""
    built = build_world()
    built.cluster.concurrent_apply = True
    yield built
    built.loop.finish_apply()


class Gate:
    """Holds the cluster's bindings back until the loop waits for them (``_join_apply``), so
    the next cycle's sync, snapshot and plan surely run while they are in flight."""

    def __init__(self, world: World, monkeypatch: pytest.MonkeyPatch) -> None:
        self.open = threading.Event()
        self.joins = 0
        self.bound_at_join: list[bool] = []
        cluster, loop = world.cluster, world.loop
        bind_many = cluster.bind_many
        join = loop._join_apply

        def held_bind_many(gangs: Mapping[str, Sequence[PodBinding]]) -> dict[str, BindOutcome]:
            if gangs:
                assert self.open.wait(30.0), "the loop never waited for its bindings"
            return bind_many(gangs)

        def joining() -> tuple[loop_module.ApplyOutcome, bool]:
            self.joins += 1
            self.bound_at_join.append(any(p.node_name for p in cluster.pods.values()))
            self.open.set()
            return join()

        monkeypatch.setattr(cluster, "bind_many", held_bind_many)
        monkeypatch.setattr(loop, "_join_apply", joining)


def lock_free_elsewhere() -> bool:
    """Whether another thread (another database connection) could take the cycle lock now."""
    answer: list[bool] = []

    def probe() -> None:
        try:
            with cycle_lock() as acquired:
                answer.append(acquired)
        finally:
            connection.close()

    thread = threading.Thread(target=probe)
    thread.start()
    thread.join(30.0)
    return answer[0]


def test_a_cycle_hands_its_bindings_on_and_the_next_one_records_them(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    gate = Gate(world, monkeypatch)
    world.submit("train", gpus=4, count=2)
    world.cycle(pipeline=True)  # creates the pods: nothing to bind, nothing handed on
    assert world.loop.handed_on is None
    result = world.cycle(pipeline=True)  # admits; the binding goes on after the cycle
    assert result.counts["handed_on"] == 1
    assert world.loop.handed_on is not None
    assert world.workload("train").state == "admitted"
    assert not lock_free_elsewhere()  # the lock stays held while the apply runs
    following = world.cycle(pipeline=True)
    assert gate.bound_at_join == [False]  # it synced and planned before the binding was made
    assert "apply_wait" in following.timings
    assert following.counts["bound"] == 2
    assert all(p.node_name for p in world.cluster.pods_of("train"))
    assert world.loop.handed_on is None
    assert lock_free_elsewhere()


def test_gpus_being_bound_are_promised_to_the_next_plan_never_twice(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    gate = Gate(world, monkeypatch)
    world.submit("first", gpus=8, count=1)
    world.cycle(pipeline=True)
    world.cycle(pipeline=True)  # admits "first" on one node; its binding is held back
    world.submit("wide", queue="team-b", gpus=8, count=2)  # both nodes: one is promised
    world.cycle(pipeline=True)  # creates wide's pods
    world.cycle(pipeline=True)
    assert gate.joins >= 1 and gate.bound_at_join[0] is False
    world.loop.finish_apply()
    assert world.workload("first").state == "admitted"
    assert world.workload("wide", namespace="team-b").state == "pending"
    assert not any(p.node_name for p in world.cluster.pods_of("wide"))
    nodes = [p.node_name for p in world.cluster.pods.values() if p.node_name]
    assert len(nodes) == len(set(nodes)) == 1


def test_a_gang_whose_handed_on_binding_fails_goes_back_to_pending_and_the_cycle_plans_again(
    world: World,
) -> None:
    world.submit("gang", gpus=4, count=2)
    world.cycle(pipeline=True)
    pods = world.cluster.pods_of("gang")
    world.cluster.fail_binding.add(pods[1].key)
    world.cycle(pipeline=True)  # admits and hands the gang's binding on
    assert world.loop.handed_on is not None
    world.loop.handed_on.outcome.result(30.0)
    world.cycle(pipeline=False)  # records the failure, plans again, binds (and fails) itself
    gang = world.workload("gang")
    reasons = [t.reason for t in gang.transitions.order_by("id")]
    assert any(r.startswith("binding failed") for r in reasons)
    assert not any(p.node_name for p in world.cluster.pods_of("gang"))
    assert gang.state == "pending"
    world.cluster.fail_binding.clear()
    for _ in range(3):
        world.cycle(pipeline=True)
    world.loop.finish_apply()
    assert world.workload("gang").state == "admitted"
    assert all(p.node_name for p in world.cluster.pods_of("gang"))


def test_an_apply_that_raised_in_its_thread_fails_the_next_cycle_which_starts_over(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    world.submit("gang", gpus=4, count=2)
    world.cycle(pipeline=True)

    def crash(*args: object, **kwargs: object) -> None:
        raise RuntimeError("the apply died in its thread")

    monkeypatch.setattr(loop_module, "run_apply", crash)
    world.cycle(pipeline=True)  # hands on an apply that raises
    failed = world.loop.run_cycle(pipeline=True)
    assert failed.status == "failed" and "apply (handed on)" in failed.error
    assert world.workload("gang").state == "admitted"
    assert lock_free_elsewhere()  # the failed cycle handed nothing on and let the lock go
    monkeypatch.undo()
    world.cycle(pipeline=True)
    world.loop.finish_apply()
    gang = world.workload("gang")
    assert gang.state == "admitted"
    bound = sorted(p.node_name or "" for p in world.cluster.pods_of("gang"))
    assert bound == sorted(p.node.name for p in gang.placements.all())


def test_a_backend_that_cannot_apply_beside_sync_is_never_handed_on(world: World) -> None:
    world.cluster.concurrent_apply = False
    world.submit("train", gpus=4, count=2)
    world.cycle(pipeline=True)
    result = world.cycle(pipeline=True)
    assert world.loop.handed_on is None and "handed_on" not in result.counts
    assert result.counts["bound"] == 2


def test_the_in_process_loop_waits_for_its_last_bindings_when_it_stops(world: World) -> None:
    world.submit("train", gpus=4, count=2)
    stop = threading.Event()
    seen: list[int] = []

    def on_cycle(result: loop_module.CycleResult) -> None:
        seen.append(result.counts.get("handed_on", 0))
        if sum(seen) and world.loop.handed_on is not None:
            stop.set()  # stop right after a cycle that handed its bindings on

    run_forever(world.loop, stop, interval_s=0.0, on_cycle=on_cycle, on_change=False, pipeline=True)
    assert sum(seen) == 1
    assert world.loop.handed_on is None
    assert all(p.node_name for p in world.cluster.pods_of("train"))
    assert lock_free_elsewhere()
