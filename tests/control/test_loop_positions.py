"""Positions are counted when read, from the queue ranks the loop keeps (``record.queue_ranks``):
a cycle in which only others moved writes nothing of a waiting workload, and yet every reader
shows its current position; its pods' Event changes only with its reason."""

from __future__ import annotations

from datetime import UTC, datetime
from types import SimpleNamespace

import pytest
from loop_builders import World, build_world
from two_teams import MIG_BEHIND, MIG_BEHIND_SAYS, MIG_FLAVOR

from gpupool.control.loop import ControlLoop
from gpupool.control.record import CycleRecord, Explanation
from gpupool.inventory.units import FlavorUnits
from gpupool.scheduler.explain import MIG_UNIT, Verdict, explanation
from gpupool.workloads.models import Workload
from gpupool.workloads.queries import AS_WRITTEN, explain, queue_positions

pytestmark = pytest.mark.django_db


@pytest.fixture
def world(db: None) -> World:
    """Two teams, two 8-GPU nodes, a loop."""
    return build_world()


def test_a_position_shown_after_a_cycle_in_which_only_others_moved_is_right(
    world: World,
) -> None:
    running = {name: world.cluster.add_pod(f"{name}-0", workload=name, gpus=8) for name in "xy"}
    world.cycle()  # both admitted: the pool is full
    world.cluster.run()
    waiting = {}
    for name in ("w1", "w2", "w3"):
        world.cluster.tick(10)
        waiting[name] = world.cluster.add_pod(f"{name}-0", workload=name, gpus=8)
    world.cycle()
    before = {w.name: w for w in Workload.objects.filter(name__in=waiting)}
    assert {name: w.queue_position for name, w in before.items()} == {"w1": 1, "w2": 2, "w3": 3}
    events = {name: list(world.cluster.events_on(key)) for name, key in waiting.items()}
    assert all(len(found) == 1 and found[0][0] == "Waiting" for found in events.values())

    world.cluster.finish(running["x"])  # x ends: w1 takes its node, w2 and w3 move up
    world.cycle()
    after = {w.name: w for w in Workload.objects.filter(name__in=waiting)}
    assert after["w1"].state == "admitted"
    for name in ("w2", "w3"):
        # Same reason, same facts: the cycle wrote nothing of them ...
        assert after[name].pending_reason == before[name].pending_reason
        assert after[name].pending_facts == before[name].pending_facts
        assert after[name].pending_detail == before[name].pending_detail
        assert after[name].queue_rank == before[name].queue_rank
        # ... and no Event was sent again for a position that moved.
        assert world.cluster.events_on(waiting[name]) == events[name]
    # Every reader counts the position as it is now.
    assert (after["w2"].queue_position, after["w3"].queue_position) == (1, 2)
    listed = queue_positions(
        (w.pk, w.queue_id, w.queue_rank) for w in after.values() if w.state == "pending"
    )
    assert listed == {after["w2"].pk: 1, after["w3"].pk: 2}
    summary = explain(after["w3"], seen=AS_WRITTEN, units=FlavorUnits()).summary
    assert "Position 2 in queue team-a." in summary, summary


def test_a_new_reason_is_sent_as_an_event_and_new_work_is_ranked_behind(world: World) -> None:
    world.cluster.add_pod("x-0", workload="x", gpus=8)
    world.cluster.add_pod("y-0", workload="y", gpus=8)
    world.cycle()
    world.cluster.run()
    first = world.cluster.add_pod("w1-0", workload="w1", gpus=8)
    world.cycle()
    world.cluster.tick(10)
    world.cluster.add_pod("w2-0", workload="w2", gpus=8)
    world.cycle()
    w1, w2 = world.workload("w1"), world.workload("w2")
    assert (w1.queue_position, w2.queue_position) == (1, 2)
    assert w1.queue_rank is not None and w2.queue_rank is not None
    assert w1.queue_rank < w2.queue_rank
    assert len(world.cluster.events_on(first)) == 1  # w1's reason did not change


def test_a_loop_rewrites_every_rank_after_another_process_recorded_a_cycle(world: World) -> None:
    for name in "xy":
        world.cluster.add_pod(f"{name}-0", workload=name, gpus=8)
    world.cycle()
    world.cluster.run()
    for name in ("w1", "w2"):
        world.cluster.tick(10)
        world.cluster.add_pod(f"{name}-0", workload=name, gpus=8)
    world.cycle()
    assert world.loop.ranks is not None and len(world.loop.ranks) == 2
    other = ControlLoop(world.cluster)  # a second worker's loop takes a cycle
    # ... on its own view of the cluster: the fake's changes since the first loop's last sync
    # are the whole cluster to it (else its nodes are gone, and w3 below could never fit).
    world.cluster._seen_nodes, world.cluster._seen_pods = {}, {}
    assert other.run_cycle().status == "succeeded"
    # What the first loop remembers may no longer be what the database holds.
    assert world.loop._known_ranks() is None
    world.cluster.tick(10)
    world.cluster.add_pod("w3-0", workload="w3", gpus=8)
    world.cycle()
    pending = list(Workload.objects.filter(state="pending").order_by("submitted_at"))
    assert pending and pending[-1].name == "w3"
    # Ranked afresh, every position is right (same class: first come, first served).
    assert [w.queue_position for w in pending] == list(range(1, len(pending) + 1))
    assert world.loop.ranks is not None and set(world.loop.ranks) == {w.pk for w in pending}


def test_a_waiting_mig_workload_s_event_counts_mig_instances(world: World) -> None:
    """The Waiting Event of work whose sentence says its position is rendered again with the
    position the API says (``ControlLoop._told``), each flavor's quantities in its unit, as
    the core wrote them: a MIG flavor's in MIG instances, not GPUs."""
    record = CycleRecord(at=datetime.now(UTC))
    written = explanation("", Verdict("behind", MIG_BEHIND), 3, {MIG_FLAVOR: MIG_UNIT}).detail
    record.explanations[7] = Explanation("behind", written, MIG_BEHIND)
    record.ranked[7] = 2.0
    record.ranks_by_queue["nlp"] = [1.0, 2.0]  # second in its queue now
    told = world.loop._told(record, {MIG_FLAVOR: MIG_UNIT})
    row = SimpleNamespace(id=7, info=SimpleNamespace(name="nlp/mig-work", queue="nlp"))
    said = told(row, written)  # type: ignore[arg-type]
    assert all(part in said for part in MIG_BEHIND_SAYS), said
    assert said != written and "GPU" not in said, said
