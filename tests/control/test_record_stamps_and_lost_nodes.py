"""What the record stamps: no admission before its workload's submission (B2), and the nodes
of work lost without an eviction (B3).

B2: a cycle reads its clock before it reads the pending work, and a submission may be
stamped after the moment of the cycle that admits it (one landing between the clock's read
and the work's, or a submitter's clock ahead of the loop's: the demo's generator, on a
cluster an hour a minute). It was admitted at the cycle's moment, before it was submitted:
its timeline ran backwards. B3: a node failure's preemption events had no nodes.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from loop_builders import World, build_world

from gpupool.accounting.models import PreemptionEvent
from gpupool.control.models import SchedulingCycle
from gpupool.workloads.actions import PodSetSpec, do_submit_workload
from gpupool.workloads.models import Workload

pytestmark = pytest.mark.django_db


@pytest.fixture
def world(db: None) -> World:
    """Two teams, two 8-GPU nodes, a loop."""
    return build_world(nodes=2)


def submit_mid_cycle(world: World, name: str, ahead_s: float) -> list[datetime]:
    """Have the next cycle's read of the database find ``name`` submitted after the cycle
    read its clock, stamped ``ahead_s`` after the cycle's moment; returns that moment."""
    state, original = world.loop.state, world.loop.state.refresh
    moments: list[datetime] = []

    def refresh(now: datetime) -> None:
        if not moments:
            moments.append(now)
            do_submit_workload(
                name,
                queue=world.queues["team-a"],
                pod_sets=[PodSetSpec(1, gpus=1, flavor=world.h100)],
                at=now + timedelta(seconds=ahead_s),
            )
        original(now)

    state.refresh = refresh  # type: ignore[method-assign]
    return moments


def test_work_submitted_after_the_cycles_moment_is_admitted_at_its_submission_not_before(
    world: World,
) -> None:
    world.cycle()  # the loop's first cycle: its state read whole
    moments = submit_mid_cycle(world, "late", ahead_s=46)
    world.cycle()  # its pods are made
    world.cycle()  # admitted, by a cycle whose moment is still before its submission
    late = world.workload("late")
    assert moments and late.submitted_at > moments[0]  # landed after the cycle's moment
    assert late.state == "admitted"
    cycle_at = SchedulingCycle.objects.order_by("-id").values_list("cluster_at", flat=True)[0]
    assert cycle_at is not None and cycle_at < late.submitted_at
    assert late.admitted_at is not None and late.admitted_at >= late.submitted_at
    assert late.admitted_at == late.submitted_at  # at its submission, nothing later made up
    timeline = [(t.to_state, t.at) for t in late.transitions.order_by("at", "id")]
    assert [state for state, _ in timeline] == ["pending", "admitted"]
    assert timeline[1][1] == late.admitted_at
    # Work the cycle had before its moment keeps the cycle's moment.
    world.submit("early", gpus=1)
    world.cycle()
    world.cycle()
    early = world.workload("early")
    assert early.admitted_at is not None and early.admitted_at >= early.submitted_at


def test_a_late_admission_runs_and_ends_after_it_with_its_timeline_in_order(
    world: World,
) -> None:
    world.cycle()
    submit_mid_cycle(world, "late", ahead_s=46)
    world.cycle()
    world.cycle()
    world.cluster.run()
    world.cycle()
    late = world.workload("late")
    assert late.state == "running"
    assert late.submitted_at <= late.admitted_at <= late.started_at  # type: ignore[operator]
    moments = list(late.transitions.order_by("id").values_list("at", flat=True))
    assert moments == sorted(moments)


def run_one(world: World, name: str, gpus: int) -> Workload:
    """A workload of team-a, admitted, its pods made and running."""
    world.submit(name, gpus=gpus)
    world.cycle()
    world.cycle()
    world.cluster.run()
    world.cycle()
    workload = world.workload(name)
    assert workload.state == "running"
    return workload


def test_work_lost_with_its_failed_node_records_the_node_in_its_preemption_event(
    world: World,
) -> None:
    train = run_one(world, "train", gpus=8)
    node = train.placements.get().node.name
    world.cluster.change_node(node, ready=False)
    for pod in world.cluster.pods_of("train"):
        world.cluster.remove(pod.key)
    world.cycle()
    event = PreemptionEvent.objects.get(victim=train)
    assert (event.reason, event.nodes, event.gpus_freed) == ("node-failure", [node], 8)
    # Requeued, and placed again on the node left (its placements were read before release).
    assert {p.node.name for p in world.workload("train").placements.all()} <= {"n1", "n2"} - {node}


def test_work_evicted_outside_gpupool_records_the_nodes_it_ran_on(world: World) -> None:
    train = run_one(world, "train", gpus=1)
    node = train.placements.get().node.name
    for pod in world.cluster.pods_of("train"):
        world.cluster.remove(pod.key)
    world.cycle()
    event = PreemptionEvent.objects.get(victim=train)
    assert (event.reason, event.nodes) == ("admin", [node])
