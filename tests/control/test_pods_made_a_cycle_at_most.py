"""A cycle makes at most ``apply.CREATES_PER_CYCLE`` pods: a workload submitted through the API
with 100,000 pods (the API's bound) was made in one cycle that never ended, and the demo's
SQLite stayed locked for everyone else meanwhile. The rest are made by the next cycles."""

from __future__ import annotations

import pytest
from loop_builders import World, build_world

from gpupool.control import apply

pytestmark = pytest.mark.django_db


def test_a_huge_workloads_pods_are_made_a_bounded_number_a_cycle(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    world: World = build_world()
    world.cycle()
    monkeypatch.setattr("gpupool.control.loop.CREATES_PER_CYCLE", 3)
    world.submit("many", gpus=1, count=7)
    world.submit("one", gpus=1)

    made = []
    for _ in range(4):
        result = world.cycle()
        made.append(result.counts.get("created", 0))
    assert made == [3, 3, 2, 0]  # 7 + 1, three a cycle, then nothing more to make
    assert len(world.cluster.pods_of("many")) == 7 and len(world.cluster.pods_of("one")) == 1


def test_new_pods_stops_at_its_limit() -> None:
    from gpupool.clusters.grouping import WorkloadKey

    run = apply.WorkloadRun(
        key=WorkloadKey("team-a", "w"),
        queue="team-a",
        priority_class="normal",
        min_member=None,
        topology="",
        protected_runtime_s=0,
        expected_runtime_s=None,
        pod_sets=(
            apply.PodSetRun(
                name="main", count=100_000, image="x", command=(), env={},
                gpu_resource="nvidia.com/gpu", gpus=1, gpu_milli=None, cpu_milli=1000,
                memory_mib=1024,
            ),
        ),
    )  # fmt: skip
    assert len(apply.new_pods(run, (), limit=5)) == 5
    assert [p.name for p in apply.new_pods(run, ("w-main-0",), limit=2)] == [
        "w-main-1", "w-main-2"]  # fmt: skip


def test_work_that_never_fits_gets_no_pods_and_says_so_from_its_first_cycle() -> None:
    """Team a may take 16 GPUs at most (its capability): a gang of 3 x 8 can never run. Its
    pods were made at once (reason "its pods are being created", a place in line), and only
    then was it found never to fit; the core now says so before it asks for pods."""
    from gpupool.inventory.units import FlavorUnits
    from gpupool.workloads.queries import AS_WRITTEN, summary

    world: World = build_world()
    world.cycle()
    world.submit("too-big", gpus=8, count=3)

    for _ in range(2):
        world.cycle()
        too_big = world.workload("too-big")
        assert summary(too_big, seen=AS_WRITTEN, units=FlavorUnits()).startswith(
            "Never fits: Queue team-a can never hold 24"
        )
        assert too_big.queue_position is None
        assert world.cluster.pods_of("too-big") == []
