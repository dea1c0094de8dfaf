"""Expected runtimes not declared are learned from similar finished work of the same queue."""

from __future__ import annotations

import pytest
from loop_builders import World, build_world

from gpupool.control.learning import MIN_SAMPLES

pytestmark = pytest.mark.django_db


@pytest.fixture
def world(db: None) -> World:
    """One node, a loop."""
    return build_world(nodes=1)


def finish_one(world: World, name: str, minutes: float) -> None:
    """A one-GPU workload of team-a that runs ``minutes`` and succeeds."""
    world.submit(name, gpus=1)
    world.cycle()
    world.cycle()
    world.cluster.run()
    world.cycle()
    world.cluster.tick(minutes * 60)
    for pod in world.cluster.pods_of(name):
        world.cluster.finish(pod.key)
    world.cycle()
    assert world.workload(name).state == "succeeded"


def test_an_undeclared_runtime_is_the_median_of_similar_finished_work_and_says_so(
    world: World,
) -> None:
    for index, minutes in enumerate((10, 30, 20)[:MIN_SAMPLES]):
        finish_one(world, f"past-{index}", minutes)
    world.submit("hog", gpus=8)  # holds the node: what follows waits
    world.cycle()
    world.cycle()
    world.submit("next", gpus=1)
    world.cycle()
    world.cycle()
    waiting = world.workload("next")
    assert waiting.state == "pending"
    assert waiting.pending_facts["expected_runtime_learned"] is True
    assert 19 * 60 < waiting.pending_facts["expected_runtime_s"] < 21 * 60


def test_too_few_similar_runs_teach_nothing(world: World) -> None:
    finish_one(world, "past", 10)
    world.submit("hog", gpus=8)
    world.cycle()
    world.cycle()
    world.submit("next", gpus=1)
    world.cycle()
    world.cycle()
    assert "expected_runtime_learned" not in world.workload("next").pending_facts
