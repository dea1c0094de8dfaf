"""A borrowing workload outrun by another queue's work keeps one reason from cycle to cycle.

Quota is judged as the cycle found it (docs/scheduler.md, "Explanations"): a workload whose
queue had quota room for it when the cycle began reads ``behind`` whether the work of other
queues served first took that room (``resource: "quota"``) or only the free capacity. Judged
at its turn it would read ``quota`` one cycle and ``behind`` the next, though nothing about it
or the pool as the cycles found them changed: a reason rewritten, and an Event sent, each time.
"""

from __future__ import annotations

import dataclasses
from decimal import Decimal

import pytest
from loop_builders import World, build_world

from gpupool.workloads.actions import PodSetSpec, do_submit_workload
from gpupool.workloads.models import Workload

pytestmark = pytest.mark.django_db


@pytest.fixture
def world(db: None) -> World:
    """Two teams deserving 8 H100 GPUs each, capable of 16; three 8-GPU nodes."""
    return build_world(nodes=3)


def submit(world: World, name: str, queue: str, count: int, gpus: int, cpu: int = 0) -> Workload:
    """A workload of ``count`` pods of ``gpus`` GPUs and ``cpu`` cores each."""
    spec = PodSetSpec(count, gpus=gpus, flavor=world.h100, cpu=Decimal(cpu))
    return do_submit_workload(name, queue=world.queues[queue], pod_sets=[spec])


def test_a_borrower_outrun_by_other_queues_keeps_one_reason_and_gets_one_event(
    world: World,
) -> None:
    submit(world, "a-run", "team-a", 1, 8)
    world.cycle()  # its pod is made
    world.cycle()  # admitted: team-a uses its deserved 8 GPUs
    world.cluster.run()
    # w (team-a) can borrow the 8 GPUs team-b does not use; b1 (team-b) asks for 16.
    submit(world, "w", "team-a", 1, 8, cpu=100)
    submit(world, "b1", "team-b", 2, 8)
    world.cycle()  # their pods are made
    world.cluster.tick(10)

    # Cycle 1: team-b, the smaller share, is served first; b1 borrows the room w could use
    # (and takes the GPUs).
    world.cycle()
    w = world.workload("w")
    assert world.workload("b1", "team-b").state == "admitted"
    assert w.state == "pending"
    assert w.pending_reason == "behind"
    assert w.pending_facts["resource"] == "quota"
    assert w.pending_facts["free"] == 0
    (pod_of_w,) = [key for key in world.cluster.pods if key[1].startswith("w-")]
    assert len(world.cluster.events_on(pod_of_w)) == 1
    first = (w.pending_reason, w.pending_detail)

    # Cycle 2: b1 is done, so team-a has its room again; b2 and b3 (team-b, within its share,
    # served first) take the CPU of the two free nodes and leave w no node to run on.
    world.cluster.run()
    for key in [key for key in world.cluster.pods if key[1].startswith("b1-")]:
        world.cluster.finish(key)
    for name in ("b2", "b3"):
        key = world.cluster.add_pod(f"{name}-0", "team-b", queue="team-b", gpus=1, workload=name)
        pod = world.cluster.pods[key]
        cpu = dataclasses.replace(pod.requests, cpu_milli=190_000)
        world.cluster.pods[key] = dataclasses.replace(pod, requests=cpu)
    world.cycle()
    w = world.workload("w")
    assert {world.workload(name, "team-b").state for name in ("b2", "b3")} == {"admitted"}
    assert w.state == "pending"
    # Judged at its turn, w would now read behind on capacity after quota last cycle: a flip.
    # Judged as the cycle found it, it read behind both times: nothing rewritten, one Event.
    assert (w.pending_reason, w.pending_detail) == first
    assert len(world.cluster.events_on(pod_of_w)) == 1
