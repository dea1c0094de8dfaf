"""The loop reads the utilisation source once a minute and records each workload's activity."""

from __future__ import annotations

import fcntl
import time
from contextlib import nullcontext

import pytest
from django.db import connection
from loop_world import LoopWorld

from gpupool.clusters.base import PodKey
from gpupool.clusters.grouping import WorkloadKey
from gpupool.control.lock import cycle_lock, lock_file
from gpupool.control.loop import PHASES
from gpupool.control.models import SchedulingCycle
from gpupool.control.snapshot import read_workloads
from gpupool.control.state import CLOCK_MARGIN_S, SQLITE_MARGIN_S
from gpupool.control.sync import moment
from gpupool.utilization.models import ActivityWindow
from gpupool.utilization.sampling import UtilizationSampler, simulated_source, source_for
from gpupool.utilization.simulated import Profile, SimulatedSource
from gpupool.utilization.source import UtilizationReadout, UtilizationUnavailable
from gpupool.workloads.choices import WorkloadState

pytestmark = pytest.mark.django_db


def running_world() -> LoopWorld:
    world = LoopWorld()
    world.submit("train", gpus=4)
    world.submit("reserved", gpus=2)
    for _ in range(3):  # pods made, bound, seen running
        world.cycle()
    assert world.workload("train").state == WorkloadState.RUNNING
    assert world.workload("reserved").state == WorkloadState.RUNNING
    world.loop.utilization.source = SimulatedSource(
        world.cluster,
        chosen={"team-a/train": Profile.BUSY_TRAINING, "team-a/reserved": Profile.IDLE_RESERVATION},
    )
    return world


def test_the_simulated_cluster_gets_its_own_source_and_a_fake_one_none() -> None:
    world = LoopWorld()
    assert isinstance(world.loop.utilization.source, SimulatedSource)
    assert simulated_source(object()) is None  # type: ignore[arg-type]


def test_a_cycle_a_minute_after_the_last_read_records_each_workloads_window() -> None:
    world = running_world()
    world.clock.advance(300)
    world.cycle()

    windows = {w.workload.name: w for w in ActivityWindow.objects.select_related("workload")}
    assert set(windows) == {"train", "reserved"}
    train, reserved = windows["train"], windows["reserved"]
    assert (train.gpus, reserved.gpus) == (4, 2)
    assert train.active_gpu_seconds == train.observed_gpu_seconds > 0
    assert train.mean_utilization >= 80
    assert reserved.active_gpu_seconds == 0 and reserved.last_active_at is None
    assert train.tenant.name == "a" and train.queue.name == "team-a"

    # Within the minute nothing more is read; a minute later the next window follows on.
    world.clock.advance(30)
    world.cycle()
    assert ActivityWindow.objects.count() == 2
    world.clock.advance(60)
    world.cycle()
    later = ActivityWindow.objects.filter(workload__name="train").order_by("started_at")
    assert [w.started_at for w in later][1] == later[0].ended_at


def test_an_unavailable_source_skips_the_read_and_the_cycle_goes_on() -> None:
    world = running_world()

    class Down:
        def read(self, start: float, end: float, step: float) -> UtilizationReadout:
            raise UtilizationUnavailable("Prometheus at http://nowhere: refused")

    world.loop.utilization.source = Down()
    world.clock.advance(300)
    world.cycle()
    assert ActivityWindow.objects.count() == 0


def test_the_read_follows_the_cycle_off_its_lock_and_skips_when_another_reads() -> None:
    """The read is no part of the cycle: it runs once the cycle's row is finished and its
    lock released, on a lock of its own, and is timed on its own."""
    world = running_world()
    seen: list[tuple[str, bool]] = []
    sample = world.loop.utilization.sample

    def watched(now: float, pods: object, facts: object = None) -> object:
        latest = SchedulingCycle.objects.latest("id")
        with cycle_lock() if connection.vendor != "postgresql" else nullcontext(True) as free:
            seen.append((latest.status, free))
        return sample(now, pods, facts)  # type: ignore[arg-type]

    world.loop.utilization.sample = watched  # type: ignore[method-assign]
    world.clock.advance(300)
    result = world.cycle()
    assert seen == [("succeeded", True)]  # the cycle was over, its lock free (beside SQLite)
    assert result.timings["utilization"] > 0 and set(PHASES) < set(result.timings)
    assert "utilization_s" not in SchedulingCycle.objects.latest("id").outcome
    assert ActivityWindow.objects.count() == 2

    world.clock.advance(300)
    if connection.vendor != "postgresql":  # another process reading: this one does not
        with lock_file("utilization-read").open("a+") as other:  # its own open file
            fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
            result = world.cycle()
        assert "utilization" not in result.timings
        assert ActivityWindow.objects.count() == 2
    world.cycle()
    assert ActivityWindow.objects.count() == 4


def test_the_window_is_whole_steps_and_a_long_pause_reads_the_last_hour_only() -> None:
    world = running_world()
    sampler = UtilizationSampler(world.loop.utilization.source, interval_s=60, step_s=15)
    now = world.clock.now()
    sampler.sampled_until = now - 5 * 3600
    pods = {PodKey("team-a", "train-main-0"): WorkloadKey("team-a", "train")}

    result = sampler.sample(now, pods)

    assert result is not None
    assert (result.start, result.end) == (now - 3600, now)
    assert sampler.sampled_until == now

    # 100 s later: six whole steps of 15 s are read, the rest waits for the next read.
    result = sampler.sample(now + 100, pods)
    assert result is not None
    assert (result.start, result.end) == (now, now + 90)


def test_a_second_process_reads_on_from_where_the_first_read_ended() -> None:
    """Two Celery worker processes each have a loop and a sampler; each starts its reads
    where the windows in the database end, so no minute is read (and counted) twice."""
    world = running_world()
    source = world.loop.utilization.source
    first, second = (UtilizationSampler(source, interval_s=60, step_s=15) for _ in range(2))
    now = world.clock.now()
    first.sampled_until = second.sampled_until = now - 600  # both read up to here before
    pods = {PodKey("team-a", "train-main-0"): WorkloadKey("team-a", "train")}

    assert first.sample(now, pods) is not None
    assert second.sample(now + 10, pods) is None  # less than a step since the other's read
    later = second.sample(now + 60, pods)

    assert later is not None and (later.start, later.end) == (now, now + 60)
    spans = list(
        ActivityWindow.objects.filter(workload__name="train")
        .order_by("started_at")
        .values_list("started_at", "ended_at")
    )
    assert spans == [(moment(now - 600), moment(now)), (moment(now), moment(now + 60))]


def test_the_source_is_chosen_from_the_table(settings: object) -> None:
    world = LoopWorld()
    settings.GPUPOOL_UTILIZATION_SOURCE = "none"  # type: ignore[attr-defined]
    assert source_for(world.loop.backend) is None
    settings.GPUPOOL_UTILIZATION_SOURCE = "prometheus"  # type: ignore[attr-defined]
    settings.GPUPOOL_PROMETHEUS_URL = "http://prometheus:9090"  # type: ignore[attr-defined]
    assert source_for(world.loop.backend).url == "http://prometheus:9090"  # type: ignore[union-attr]
    settings.GPUPOOL_UTILIZATION_SOURCE = "grafana"  # type: ignore[attr-defined]
    with pytest.raises(ValueError, match="grafana"):
        source_for(world.loop.backend)


@pytest.mark.django_db(transaction=True)  # no test transaction holding the horizon back
def test_the_idle_spells_a_read_writes_are_held_by_the_loops_state_as_the_database_reads_them() -> (
    None
):
    world = running_world()
    # The workloads' rows as they started: older than the horizon (SQLite's margin is wider).
    time.sleep((SQLITE_MARGIN_S if connection.vendor == "sqlite" else CLOCK_MARGIN_S) + 0.5)
    world.cycle()
    world.clock.advance(300)
    world.cycle()  # the read writes the reserved workload's idle spell

    reserved = world.workload("reserved")
    assert reserved.idle_since is not None
    state = world.loop.state
    assert state.held.get(reserved.pk) == reserved.updated_at  # not read back
    now = moment(world.clock.now())
    assert state.rows["team-a/reserved"] == read_workloads(now)["team-a/reserved"]
    assert state.rows["team-a/reserved"].info.idle_since == reserved.idle_since.timestamp()

    state.begin_cycle()
    state.refresh(now)
    # Held, not read again; and quiet: the sync and apply need not look at it again.
    assert state.reread == 0 and state.skipped >= 1 and "team-a/reserved" not in state.changed
    assert state.rows == read_workloads(now)
