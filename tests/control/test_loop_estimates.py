"""Estimated starts of pending work: refreshed apart from the cycle, from its snapshot."""

from __future__ import annotations

import threading
from datetime import datetime

import pytest
from loop_builders import World, build_world

from gpupool.client.main import estimate
from gpupool.control import runner
from gpupool.control.estimates import EstimateRefresher
from gpupool.control.learning import MIN_SAMPLES
from gpupool.control.runner import run_forever
from gpupool.control.tasks import refresh_estimates_task
from gpupool.inventory.units import FlavorUnits
from gpupool.workloads.api import ExplanationSerializer
from gpupool.workloads.queries import (
    AS_WRITTEN,
    ESTIMATE_LEARNED_FACT,
    ESTIMATE_NOT_BEFORE_FACT,
    explain,
)

pytestmark = pytest.mark.django_db

HOUR = 3600


@pytest.fixture
def world(db: None) -> World:
    """One node of 8 GPUs, a loop."""
    return build_world(nodes=1)


def running(world: World, name: str, gpus: int, **fields: object) -> None:
    """A workload admitted, bound and running."""
    world.submit(name, gpus=gpus, **fields)
    world.cycle()
    world.cycle()
    world.cluster.run()
    world.cycle()
    assert world.workload(name).state == "running"


def test_a_waiting_workload_is_estimated_to_start_when_the_work_ahead_of_it_ends(
    world: World,
) -> None:
    running(world, "hog", 8, expected_runtime_s=2 * HOUR)
    started = world.workload("hog").started_at
    world.submit("next", gpus=4, expected_runtime_s=HOUR)
    world.cycle()
    run = world.loop.refresh_estimates()
    waiting = world.workload("next")
    assert run.source == "loop" and run.pending == 1 and run.estimated == 1
    assert started is not None and waiting.estimated_start_at is not None
    assert abs((waiting.estimated_start_at - started).total_seconds() - 2 * HOUR) < 1
    assert waiting.pending_facts[ESTIMATE_LEARNED_FACT] is False
    assert waiting.pending_reason  # the cycle's explanation is kept beside the estimate


def test_an_estimate_that_rests_on_a_learned_runtime_says_so(world: World) -> None:
    for index in range(MIN_SAMPLES):
        running(world, f"past-{index}", 8)
        world.cluster.tick(20 * 60)
        for pod in world.cluster.pods_of(f"past-{index}"):
            world.cluster.finish(pod.key)
        world.cycle()
    running(world, "hog", 8)  # declares nothing: its end is learned (about 20 minutes)
    world.submit("next", gpus=1)
    world.cycle()
    world.loop.refresh_estimates()
    assert world.workload("next").pending_facts[ESTIMATE_LEARNED_FACT] is True


def test_the_cycles_explanations_keep_the_estimates_facts(world: World) -> None:
    running(world, "hog", 8, expected_runtime_s=2 * HOUR)
    world.submit("next", gpus=4, expected_runtime_s=HOUR)
    world.cycle()
    world.loop.refresh_estimates()
    world.loop.written.clear()  # the next cycle writes every explanation again
    world.cycle()
    assert world.workload("next").pending_facts[ESTIMATE_LEARNED_FACT] is False


def test_work_the_replay_does_not_reach_gets_no_estimate_and_a_moment_it_starts_no_earlier(
    world: World,
) -> None:
    running(world, "hog", 8, expected_runtime_s=2 * HOUR)
    world.submit("first", gpus=8, expected_runtime_s=HOUR)
    world.submit("second", gpus=8, expected_runtime_s=HOUR)
    world.cycle()
    world.loop.estimates.max_steps = 2  # reaches the first's start, not the second's
    run = world.loop.refresh_estimates()
    first, second = world.workload("first"), world.workload("second")
    assert run.estimated == 1 and run.unestimated == 1
    assert first.estimated_start_at is not None and second.estimated_start_at is None
    not_before = datetime.fromisoformat(second.pending_facts[ESTIMATE_NOT_BEFORE_FACT])
    assert not_before == first.estimated_start_at
    # and the people asking are told so: the summary, the API's explanation and the CLI
    told = explain(second, seen=AS_WRITTEN, units=FlavorUnits())
    assert told.estimated_start_at is None and told.estimate_not_before == not_before
    assert "No estimated start yet: not before " in told.summary
    assert explain(first, seen=AS_WRITTEN, units=FlavorUnits()).estimate_not_before is None
    api = ExplanationSerializer(told).data
    assert estimate(dict(api)).startswith("not before ")


def test_only_estimates_that_changed_are_written_again(world: World) -> None:
    running(world, "hog", 8, expected_runtime_s=2 * HOUR)
    world.submit("next", gpus=4, expected_runtime_s=HOUR)
    world.cycle()
    assert world.loop.refresh_estimates().written == 1
    world.cycle()
    assert world.loop.refresh_estimates().written == 0


def test_estimates_are_not_a_change_the_loops_state_reads_again(world: World) -> None:
    running(world, "hog", 8, expected_runtime_s=2 * HOUR)
    world.submit("next", gpus=4, expected_runtime_s=HOUR)
    world.cycle()
    before = world.workload("next").updated_at
    world.loop.refresh_estimates()
    assert world.workload("next").updated_at == before


def test_a_process_that_ran_no_cycle_estimates_from_its_own_read_of_the_database(
    world: World,
) -> None:
    running(world, "hog", 8, expected_runtime_s=2 * HOUR)
    world.submit("next", gpus=4, expected_runtime_s=HOUR)
    world.cycle()
    run = EstimateRefresher(world.loop.policy).refresh(None)
    assert run.source == "state" and run.estimated == 1
    assert world.workload("next").estimated_start_at is not None


def test_the_estimates_task_refreshes_them_and_says_how_long_it_took(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    running(world, "hog", 8, expected_runtime_s=2 * HOUR)
    world.submit("next", gpus=4, expected_runtime_s=HOUR)
    world.cycle()
    monkeypatch.setattr("gpupool.control.runner._shared", world.loop)
    answer = refresh_estimates_task.apply().get()
    assert answer["source"] == "loop" and answer["estimated"] == 1 and answer["total_s"] >= 0
    assert world.workload("next").estimated_start_at is not None


def test_the_estimates_task_in_a_process_that_runs_no_cycle_makes_no_loop(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    running(world, "hog", 8, expected_runtime_s=2 * HOUR)
    world.submit("next", gpus=4, expected_runtime_s=HOUR)
    world.cycle()
    monkeypatch.setattr("gpupool.control.runner._shared", None)
    monkeypatch.setattr("gpupool.control.runner._refresher", None)
    answer = refresh_estimates_task.apply().get()
    assert answer["source"] == "state" and answer["estimated"] == 1
    assert runner._shared is None


def test_the_in_process_loop_refreshes_estimates_after_a_cycle_once_due(world: World) -> None:
    running(world, "hog", 8, expected_runtime_s=2 * HOUR)
    world.submit("next", gpus=4, expected_runtime_s=HOUR)
    stop, cycles = threading.Event(), []

    def second_stops(result: object) -> None:
        cycles.append(result)
        if len(cycles) == 2:
            stop.set()

    run_forever(world.loop, stop, interval_s=0.0, on_cycle=second_stops)
    assert world.loop.estimates.last_at is not None
    assert world.workload("next").estimated_start_at is not None
    assert not world.loop.estimates.due()  # the second cycle did not refresh again


def test_estimates_are_refreshed_once_the_pools_clock_moved_a_minute_not_only_the_walls(
    world: World,
) -> None:
    """A simulated cluster runs ahead of the wall clock (the demo: an hour a minute):
    estimates refreshed once a wall minute lay an hour of the pool's time behind, and read
    as starts long past. Each cycle here moves the pool's clock 10 minutes."""
    running(world, "hog", 8, expected_runtime_s=2 * HOUR)
    world.submit("next", gpus=4, expected_runtime_s=HOUR)
    stop, cycles = threading.Event(), []

    def tick(result: object) -> None:
        cycles.append(result)
        world.cluster.tick(600)
        if len(cycles) == 3:
            stop.set()

    run_forever(world.loop, stop, interval_s=0.0, on_cycle=tick)
    refreshed = world.loop.estimates.last_pool_at
    assert refreshed is not None and world.loop.latest is not None
    # refreshed after the second cycle too (the third stops the loop), within a wall minute
    assert abs(refreshed - (world.loop.latest.now - 600)) < 5
    assert not world.loop.estimates.due(refreshed + 59)
    assert world.loop.estimates.due(refreshed + 60)
