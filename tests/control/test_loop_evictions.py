"""Evictions through the loop: preemption, refused budgets, drains, lost nodes, requeues."""

from __future__ import annotations

import time
from typing import Any

import pytest
from loop_builders import World, build_world

from gpupool.accounting.models import PreemptionEvent, UsageInterval
from gpupool.control import state as state_module
from gpupool.control.sync import moment
from gpupool.inventory.actions import do_drain_node, do_end_drain, do_set_node_cordoned
from gpupool.inventory.models import Node
from gpupool.quotas.models import PriorityClass
from gpupool.workloads.choices import unfinished
from gpupool.workloads.models import Workload

pytestmark = pytest.mark.django_db


@pytest.fixture
def world(db: None) -> World:
    """Two teams, one 8-GPU node, a loop."""
    return build_world(nodes=1)


def fill_with_low(world: World, name: str = "filler") -> None:
    """A low-priority workload of team-a that holds the whole node, running."""
    world.submit(name, gpus=8, priority_class=PriorityClass.objects.get(name="low"))
    world.cycle()
    world.cycle()
    world.cluster.run()
    world.cycle()
    assert world.workload(name).state == "running"


def test_a_preemptor_evicts_its_victim_and_runs_after_it_is_gone(world: World) -> None:
    fill_with_low(world)
    world.cluster.tick(3600)
    world.submit("urgent", gpus=8, priority_class=PriorityClass.objects.get(name="high"))
    world.cycle()  # its pods are created
    world.cycle()  # the victim is chosen and evicted; the preemptor waits, nominated
    urgent, filler = world.workload("urgent"), world.workload("filler")
    assert urgent.state == "pending" and urgent.nominated
    assert (filler.state, filler.eviction_reason, filler.evicting_for_id) == (
        "running",
        "preempt",
        urgent.pk,
    )
    event = PreemptionEvent.objects.get(victim=filler)
    assert (event.reason, event.preemptor_id, event.gpus_freed) == ("preempt", urgent.pk, 8)
    assert 7.9 < float(event.lost_gpu_hours) < 8.2  # an hour of eight GPUs
    assert world.cluster.pods_of("filler") == []  # evicted: gone from the cluster
    world.cycle()  # the victim is requeued (its pods will be made again), the preemptor runs
    filler, urgent = world.workload("filler"), world.workload("urgent")
    assert filler.state == "pending" and not filler.eviction_reason
    assert [t.to_state for t in filler.transitions.order_by("id")][-2:] == [
        "preempted",
        "pending",
    ]
    assert UsageInterval.objects.get(workload=filler).ended_at is not None
    assert urgent.state == "admitted"
    assert all(p.node_name for p in world.cluster.pods_of("urgent"))


def test_a_refused_eviction_leaves_the_victim_running_and_the_preemptor_pending(
    world: World,
) -> None:
    fill_with_low(world)
    world.cluster.tick(60)
    world.cluster.refuse.update(p.key for p in world.cluster.pods_of("filler"))
    world.submit("urgent", gpus=8, priority_class=PriorityClass.objects.get(name="high"))
    world.cycle()
    world.cycle()
    filler, urgent = world.workload("filler"), world.workload("urgent")
    assert filler.state == "running" and not filler.eviction_reason
    assert all(p.node_name for p in world.cluster.pods_of("filler"))
    assert urgent.state == "pending" and not urgent.nominated
    assert not PreemptionEvent.objects.filter(victim=filler).exists()
    world.cycle()  # not chosen again while the refusal is fresh
    assert world.cluster.calls["evict"] == 1
    assert world.workload("urgent").pending_reason in ("capacity", "quota", "behind")


def test_a_crash_between_record_and_apply_leaves_no_double_binding(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    world.submit("train", gpus=4, count=2)
    world.cycle()
    from gpupool.control import loop as loop_module

    def crash(*args: object, **kwargs: object) -> None:
        raise RuntimeError("the worker died")

    monkeypatch.setattr(loop_module, "run_apply", crash)
    crashed = world.loop.run_cycle()
    assert crashed.status == "failed" and "the worker died" in crashed.error
    assert world.workload("train").state == "admitted"  # recorded, not applied
    assert not any(p.node_name for p in world.cluster.pods_of("train"))
    monkeypatch.undo()
    world.cycle()
    world.cycle()
    pods = world.cluster.pods_of("train")
    assert all(p.node_name for p in pods)
    assert all(world.cluster.bound[p.key] == 1 for p in pods)
    assert world.workload("train").placements.count() == 2


def test_a_drained_node_has_its_workloads_evicted_as_admin(world: World) -> None:
    fill_with_low(world)
    do_drain_node(Node.objects.get(name="n1"), acting_user=None, reason="maintenance")
    world.cycle()
    event = PreemptionEvent.objects.get(victim=world.workload("filler"))
    assert (event.reason, event.preemptor_id) == ("admin", None)
    world.cycle()
    filler = world.workload("filler")
    assert filler.state == "pending"
    world.cycle()
    assert world.workload("filler").state == "pending"  # nowhere to go: n1 is cordoned


def test_an_uncordoned_node_is_no_longer_drained_and_takes_work_again(world: World) -> None:
    fill_with_low(world)
    node = Node.objects.get(name="n1")
    world.cluster.refuse.update(p.key for p in world.cluster.pods_of("filler"))
    do_drain_node(node, acting_user=None, reason="maintenance")
    world.cycle()  # the eviction is refused: the workload still runs on the draining node
    assert world.workload("filler").state == "running"
    do_set_node_cordoned(node, cordoned=False, acting_user=None, reason="repaired")
    assert Node.objects.get(name="n1").drain_requested_at is None
    world.cluster.refuse.clear()
    world.cycle()
    world.cycle()
    assert world.workload("filler").state == "running"
    assert not PreemptionEvent.objects.filter(victim=world.workload("filler")).exists()


def test_an_ended_drain_lets_evicted_work_come_back_to_the_node(world: World) -> None:
    fill_with_low(world)
    node = Node.objects.get(name="n1")
    do_drain_node(node, acting_user=None, reason="maintenance")
    world.cycle()
    world.cycle()
    assert world.workload("filler").state == "pending"
    do_end_drain(node, acting_user=None, reason="repaired")
    world.cycle()
    world.cycle()
    world.cluster.run()
    world.cycle()
    assert world.workload("filler").state == "running"


def test_a_jobs_evicted_pod_comes_back_as_the_same_workload(world: World) -> None:
    pod = world.cluster.add_pod("job-abcde", workload="job", gpus=8, owner="Job")
    world.cycle()
    world.cluster.run()
    world.cycle()
    job = world.workload("job")
    assert (job.origin, job.state) == ("controller", "running")
    world.cluster.remove(pod)  # evicted by someone else; the Job makes a new pod
    world.cluster.add_pod("job-fghij", workload="job", gpus=8, owner="Job")
    world.cycle()
    job = world.workload("job")
    assert job.state in ("pending", "admitted")
    states = [t.to_state for t in job.transitions.order_by("id")]
    assert states[states.index("running") + 1 :][:2] == ["preempted", "pending"]
    assert PreemptionEvent.objects.get(victim=job).reason == "admin"


def test_a_bare_pod_lost_with_its_node_ends_as_preempted(world: World) -> None:
    pod = world.cluster.add_pod("solo", gpus=1)
    world.cycle()
    world.cluster.run()
    world.cycle()
    world.cluster.change_node("n1", ready=False)
    world.cluster.remove(pod)
    world.cycle()
    solo = world.workload("solo")
    assert solo.state == "preempted"
    assert PreemptionEvent.objects.get(victim=solo).reason == "node-failure"
    # It ended there (nothing makes a bare pod again): finished, so it no longer holds its
    # namespace, queue or flavor as unfinished work does (it read unfinished for ever).
    last = solo.transitions.order_by("-id").first()
    assert last is not None and solo.finished_at == last.at
    assert not Workload.objects.filter(unfinished(), pk=solo.pk).exists()


def test_a_not_ready_node_takes_no_new_placements(world: World) -> None:
    world.cluster.change_node("n1", ready=False)
    pod = world.cluster.add_pod("waits")
    world.cycle()
    assert Node.objects.get(name="n1").cluster_exclusion == "not Ready"
    assert world.workload("waits").state == "pending"
    assert not world.cluster.pods[pod].node_name
    world.cluster.change_node("n1", ready=True)
    world.cycle()
    assert world.workload("waits").state == "admitted"


def test_cancelling_removes_the_pods_running_work_included(world: World) -> None:
    from gpupool.workloads.actions import do_cancel_workload

    world.submit("oops", gpus=1)
    world.cycle()
    world.cycle()
    world.cluster.run()
    world.cycle()
    assert world.workload("oops").state == "running"
    do_cancel_workload(world.workload("oops"), acting_user=None, reason="not needed")
    world.cycle()
    assert world.cluster.pods_of("oops") == []
    assert UsageInterval.objects.get(workload=world.workload("oops")).ended_at is not None


def test_an_eviction_counts_once_in_the_history_the_contracts_read(world: World) -> None:
    fill_with_low(world)
    world.cluster.tick(3600)
    world.submit("urgent", gpus=8, priority_class=PriorityClass.objects.get(name="high"))
    for _ in range(4):
        world.cycle()
    victims = [e.victim for e in world.loop.state.history]
    assert victims == ["team-a/filler"]


def test_a_nomination_is_held_quiet_and_not_looked_at_again_by_the_next_cycle(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The record nominates the preemptor; the next refresh holds that version quiet (the
    sync and apply have nothing to do for a nomination), while the victim's eviction, whose
    pods are to go, still counts as changed. (The version before the nomination must be
    behind the refresh's horizon, a margin behind the clock -- 2 s on PostgreSQL, 5 s on
    SQLite, 0.5 s here: else it might be one no cycle looked at yet, and the nomination
    counts as changed after all.)"""
    monkeypatch.setattr(state_module, "CLOCK_MARGIN_S", 0.5)
    monkeypatch.setattr(state_module, "SQLITE_MARGIN_S", 0.5)
    fill_with_low(world)
    world.cluster.tick(3600)
    world.submit("urgent", gpus=8, priority_class=PriorityClass.objects.get(name="high"))
    world.cycle()  # its pods are created
    time.sleep(1.0)  # the submission's version falls behind the next horizon
    world.cycle()  # the victim is evicted; the preemptor waits, nominated
    urgent, filler = world.workload("urgent"), world.workload("filler")
    assert urgent.nominated
    state = world.loop.state
    assert state.held.get(urgent.pk) == urgent.updated_at
    assert state.quiet.get(urgent.pk) == urgent.updated_at
    assert state.rows["team-a/urgent"].info.nominated
    state.begin_cycle()
    state.refresh(moment(world.cluster.now()))
    assert "team-a/urgent" not in state.changed
    assert "team-a/filler" in state.changed
    assert filler.evicting_for_id == urgent.pk


def test_the_apply_is_prepared_while_the_record_is_written_and_binds_after_its_commit(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The apply's work is worked out while the server writes the admissions (the loop as it
    was: the workload still pending in its state), and the gang is bound only once the record
    that admitted it has returned, committed."""
    from gpupool.control import loop as loop_module

    world.submit("train", gpus=4, count=2)
    world.cycle()  # its pods are created
    order: list[str] = []
    record_cycle = loop_module.do_record_cycle
    work = loop_module.ControlLoop._work
    bind_many = world.cluster.bind_many

    def recorded(*args: Any, **kwargs: Any) -> Any:
        order.append("record")
        cycle = record_cycle(*args, **kwargs)
        order.append("committed")
        return cycle

    def prepared(loop: Any, *args: Any, **kwargs: Any) -> Any:
        order.append(f"prepared while {loop.state.rows['team-a/train'].state}")
        return work(loop, *args, **kwargs)

    def bound(gangs: Any) -> Any:
        order.append(f"bind {sorted(gangs)}")
        return bind_many(gangs)

    monkeypatch.setattr(loop_module, "do_record_cycle", recorded)
    monkeypatch.setattr(loop_module.ControlLoop, "_work", prepared)
    monkeypatch.setattr(world.cluster, "bind_many", bound)
    result = world.cycle()
    assert result.admitted == ["team-a/train"]
    assert order == ["record", "prepared while pending", "committed", "bind ['team-a/train']"]
    assert world.workload("train").state == "admitted"
    assert all(p.node_name for p in world.cluster.pods_of("train"))
    assert world.loop.state.rows["team-a/train"].state == "admitted"
    assert "team-a/train" in world.loop.outstanding  # bound: confirmed by a later sync


def test_a_record_failing_after_the_apply_was_prepared_leaves_cluster_and_loop_as_they_were(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The record fails after its admissions were written and the apply prepared: it rolls
    back, nothing reaches the cluster, and what the loop keeps between cycles is unchanged;
    the next cycle admits and binds the gang once."""
    from gpupool.control import actions
    from gpupool.control import loop as loop_module

    world.submit("train", gpus=4, count=2)
    world.submit("waits", gpus=8, queue="team-b", priority_class=None)
    world.cycle()  # their pods are created
    world.cluster.run()
    loop = world.loop
    kept = (
        set(loop.outstanding),
        dict(loop.explain_queue),
        dict(loop.evictions_sent),
        dict(loop.written),
    )
    applied = ("create_pods", "bind", "evict", "delete_pods")
    calls = [world.cluster.calls[what] for what in applied]
    events = len(world.cluster.events)
    work = loop_module.ControlLoop._work
    prepared: list[Any] = []

    def preparing(self: Any, *args: Any, **kwargs: Any) -> Any:
        prepared.append(work(self, *args, **kwargs))
        return prepared[-1]

    def fail(*args: object, **kwargs: object) -> None:
        raise RuntimeError("the database went away")

    monkeypatch.setattr(loop_module.ControlLoop, "_work", preparing)
    monkeypatch.setattr(actions, "do_record_budget_moves", fail)
    failed = loop.run_cycle()
    assert failed.status == "failed" and "the database went away" in failed.error
    assert len(prepared) == 1 and "team-a/train" in prepared[0].work.bind  # prepared, not sent
    assert world.workload("train").state == "pending"  # rolled back
    assert not any(p.node_name for p in world.cluster.pods_of("train"))
    assert [world.cluster.calls[what] for what in applied] == calls
    assert prepared[0].work.events  # the explanation of "waits", not sent
    assert not [e for e in world.cluster.events[events:] if e[1] == "Waiting"]
    assert kept == (
        loop.outstanding,
        loop.explain_queue,
        loop.evictions_sent,
        loop.written,
    )
    monkeypatch.undo()
    world.cycle()
    assert world.workload("train").state == "admitted"
    pods = world.cluster.pods_of("train")
    assert all(p.node_name for p in pods)
    assert all(world.cluster.bound[p.key] == 1 for p in pods)


def test_a_preparation_failing_while_the_record_is_written_is_prepared_again_after_its_commit(
    db: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fault of the apply's preparation does not undo the record (as a fault of the apply
    could not before the preparation moved into it): the record commits, the apply is
    prepared again after it, and the gang binds in the same cycle; a fault that stays fails
    the cycle in its apply, with the record kept, as before."""
    from gpupool.control import loop as loop_module

    world = build_world(nodes=2)
    world.submit("train", gpus=4, count=2)
    world.cycle()  # its pods are created
    work = loop_module.ControlLoop._work
    calls: list[bool] = []

    def fails_once(self: Any, *args: Any, **kwargs: Any) -> Any:
        calls.append(True)
        if len(calls) == 1:
            raise RuntimeError("a bug in the apply's preparation")
        return work(self, *args, **kwargs)

    monkeypatch.setattr(loop_module.ControlLoop, "_work", fails_once)
    world.cycle()
    assert len(calls) == 2
    assert world.workload("train").state == "admitted"
    assert all(p.node_name for p in world.cluster.pods_of("train"))

    world.submit("later", gpus=4, queue="team-b")  # in its own quota, in the room left
    world.cycle()  # its pods are created

    def always_fails(self: Any, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("a bug in the apply's preparation")

    monkeypatch.setattr(loop_module.ControlLoop, "_work", always_fails)
    failed = world.loop.run_cycle()
    assert failed.status == "failed" and "a bug in the apply's preparation" in failed.error
    assert world.workload("later", "team-b").state == "admitted"  # the record stands
    assert not any(p.node_name for p in world.cluster.pods_of("later"))
    monkeypatch.undo()
    world.cycle()  # the next cycle completes the apply
    assert all(p.node_name for p in world.cluster.pods_of("later"))
