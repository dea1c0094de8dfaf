"""The usage roll-up (the cost reports' tables) runs beside the cycles: between them in the
in-process loop, and on Celery beat's schedule with a broker, on the cluster's clock."""

from __future__ import annotations

import threading
from datetime import timedelta
from decimal import Decimal
from io import StringIO
from typing import Any

import pytest
from django.conf import settings
from django.core.management import call_command
from django.db.models import Sum
from django.utils import timezone
from loop_builders import World, build_world

from gpupool.accounting.models import RollUpState, UsageHour, UsageInterval
from gpupool.accounting.periods import accounting_zone, hour_start, local_day
from gpupool.accounting.reports import FLAVOR_LINES, ReportQuery, capacity_report, usage_report
from gpupool.cli.subcommands.seed_demo import seed
from gpupool.clusters.simulated import SimulatedBackend, SimulatedCluster, VirtualClock
from gpupool.control import runner
from gpupool.control.loop import ControlLoop, CycleResult
from gpupool.control.models import SchedulingCycle
from gpupool.control.sync import moment
from gpupool.simcluster.store import DatabaseStore, cluster_state
from gpupool.simulation.demo_submissions import DemoWorkloadFeed
from gpupool.utilization.models import ActivityWindow
from gpupool.utilization.prometheus import PrometheusSource
from gpupool.utilization.sampling import UtilizationSampler

pytestmark = pytest.mark.django_db

HOUR_S = 3600.0
_configured: World | None = None


def configured_cluster() -> Any:
    """The backend the settings' table builds in these tests: the test's fake cluster."""
    assert _configured is not None
    return _configured.cluster


@pytest.fixture
def world(settings: Any, db: None) -> World:
    """Two teams, two 8-GPU nodes, a loop; the settings' backend is its fake cluster."""
    global _configured
    _configured = build_world()
    settings.GPUPOOL_CLUSTER = "simulated"
    settings.GPUPOOL_CLUSTER_BACKENDS = {"simulated": "test_loop_roll_up.configured_cluster"}
    runner._shared = None
    yield _configured
    runner._shared = None
    _configured = None


def running(world: World, name: str, gpus: int) -> UsageInterval:
    """A workload submitted, placed and running on the fake cluster: its open usage."""
    world.submit(name, gpus=gpus)
    world.cycle()  # its pods
    world.cycle()  # bound
    world.cluster.run()
    world.cycle()  # running
    return UsageInterval.objects.get(workload__name=name)


def rolled_gpu_hours() -> Decimal:
    """GPU-hours in the hourly roll-up."""
    return UsageHour.objects.aggregate(total=Sum("gpu_hours"))["total"] or Decimal(0)


def test_the_in_process_loop_rolls_usage_up_to_the_last_hour_finished_on_the_clusters_clock(
    world: World,
) -> None:
    usage = running(world, "train", gpus=4)
    world.cluster.tick(3 * HOUR_S)  # three hours pass on the cluster, a moment on the wall
    stop = threading.Event()
    rolled = []

    def one_cycle(result: CycleResult) -> None:
        stop.set()

    cycles = runner.run_forever(
        world.loop,
        stop,
        interval_s=0,
        roll_up_interval_s=0,
        on_cycle=one_cycle,
        on_roll_up=rolled.append,
    )
    final = hour_start(moment(world.cluster.now()), accounting_zone())
    assert cycles == 1 and len(rolled) == 1 and rolled[0].hours >= 3
    assert RollUpState.objects.get().rolled_until == final > timezone.now()
    hours = Decimal((final - usage.started_at).total_seconds()) / Decimal(HOUR_S)
    assert abs(rolled_gpu_hours() - 4 * hours) < Decimal("0.001")


def test_the_loop_rolls_up_again_only_when_the_interval_has_passed(world: World) -> None:
    running(world, "train", gpus=2)
    world.cluster.tick(2 * HOUR_S)
    stop = threading.Event()
    rolled = []
    cycles = 0

    def three_cycles(result: CycleResult) -> None:
        nonlocal cycles
        cycles += 1
        world.cluster.tick(HOUR_S)
        if cycles == 3:
            stop.set()

    runner.run_forever(
        world.loop,
        stop,
        interval_s=0,
        roll_up_interval_s=HOUR_S,  # an hour of wall time: once in this test
        on_cycle=three_cycles,
        on_roll_up=rolled.append,
    )
    assert cycles == 3 and len(rolled) == 1


def test_gpupool_loop_says_when_a_roll_up_made_hours_final(world: World) -> None:
    running(world, "train", gpus=1)
    world.cluster.tick(2 * HOUR_S)
    out = StringIO()
    call_command("gpupool", "loop", "--interval", "0.01", "--cycles", "1", stdout=out)
    assert "roll-up: " in out.getvalue()
    assert rolled_gpu_hours() > 0


def test_beat_runs_the_roll_up_task_on_the_clusters_clock(world: World) -> None:
    from gpupool.accounting.tasks import roll_up_usage_task

    running(world, "train", gpus=2)
    world.cluster.tick(5 * HOUR_S)
    entry = next(
        e for e in settings.CELERY_BEAT_SCHEDULE.values() if e["task"] == roll_up_usage_task.name
    )
    assert entry["schedule"] == settings.GPUPOOL_ROLL_UP_INTERVAL_S
    roll_up_usage_task.apply()
    assert RollUpState.objects.get().rolled_until == hour_start(
        moment(world.cluster.now()), accounting_zone()
    )
    assert roll_up_usage_task.expires


def test_an_hour_is_final_only_once_the_sampler_could_have_read_its_end(world: World) -> None:
    """With a utilisation source the roll-up makes an hour final only once the sampler, which
    reads once an interval up to within a step of its time, has read past the hour's end:
    the window of the hour's last minute, written after the hour ended, is counted in it."""
    usage = running(world, "train", gpus=2)
    sampler = UtilizationSampler(PrometheusSource("http://127.0.0.1:9"), interval_s=60, step_s=15)
    world.loop.utilization = sampler
    zone = accounting_zone()
    hour = hour_start(moment(world.cluster.now()), zone) + timedelta(hours=2)
    world.cluster.tick(hour.timestamp() - world.cluster.now() + 30)  # 30 s into an hour
    runner.roll_up_usage(world.loop)
    assert RollUpState.objects.get().rolled_until == hour - timedelta(hours=1)
    # The sampler's read 45 s into the hour: the last minute, both GPUs working.
    window = activity(usage, hour - timedelta(seconds=45), hour + timedelta(seconds=15))
    ActivityWindow.objects.filter(pk=window.pk).update(active_gpu_seconds=120.0)
    world.cluster.tick(60 + 15)  # the sampler's interval and step since
    runner.roll_up_usage(world.loop)
    assert RollUpState.objects.get().rolled_until == hour
    last = UsageHour.objects.get(hour=hour - timedelta(hours=1))
    assert last.active_gpu_hours == pytest.approx(Decimal(2 * 45) / 3600, abs=Decimal("0.0001"))


def activity(usage: UsageInterval, start: Any, end: Any) -> ActivityWindow:
    """The sampler saw ``usage``'s workload hold its GPUs, idle, from ``start`` to ``end``."""
    workload = usage.workload
    return ActivityWindow.objects.create(
        workload=workload, tenant=workload.queue.tenant, queue=workload.queue, started_at=start,
        ended_at=end, gpus=2, observed_gpu_seconds=120.0, active_gpu_seconds=0.0,
        mean_utilization=0.0,
    )  # fmt: skip


def test_the_in_process_loop_deletes_activity_past_its_retention(
    world: World, settings: Any
) -> None:
    usage = running(world, "train", gpus=2)
    world.cluster.tick(2 * HOUR_S)
    now = moment(world.cluster.now())
    for days in (40, 36, 10):
        activity(usage, now - timedelta(days=days, minutes=1), now - timedelta(days=days))
    settings.GPUPOOL_ACTIVITY_RETENTION_DAYS = 35
    stop = threading.Event()

    runner.run_forever(world.loop, stop, interval_s=0, roll_up_interval_s=0, prune_interval_s=0,
                       on_cycle=lambda result: stop.set())  # fmt: skip

    left = ActivityWindow.objects.filter(started_at__lt=now - timedelta(days=1))
    assert [now - window.ended_at for window in left] == [timedelta(days=10)]


def test_the_in_process_loop_thins_the_cycle_log_past_its_retention(
    world: World, settings: Any
) -> None:
    """Its retention step also thins the cycle log's hours older than
    ``GPUPOOL_CYCLE_RETENTION_DAYS`` on the wall clock (which stamps the rows), keeping what
    the charts over time read: an hour's last succeeded cycle."""
    world.cycle()
    hour = (timezone.now() - timedelta(days=9)).replace(minute=0, second=0, microsecond=0)
    old = [
        SchedulingCycle.objects.create(
            started_at=hour + timedelta(minutes=m),
            finished_at=hour + timedelta(minutes=m, seconds=1),
            status="succeeded",
            outcome={"queues": {}},
        ).pk
        for m in (5, 10, 15)
    ]
    settings.GPUPOOL_CYCLE_RETENTION_DAYS = 7
    stop = threading.Event()

    runner.run_forever(world.loop, stop, interval_s=0, roll_up_interval_s=0, prune_interval_s=0,
                       on_cycle=lambda result: stop.set())  # fmt: skip

    assert set(SchedulingCycle.objects.filter(pk__in=old).values_list("pk", flat=True)) == {old[-1]}
    assert SchedulingCycle.objects.filter(started_at__gt=hour + timedelta(days=1)).count() == 2


def test_activity_the_roll_up_has_not_counted_is_kept_whatever_its_age(
    world: World, settings: Any
) -> None:
    usage = running(world, "train", gpus=2)
    world.cluster.tick(2 * HOUR_S)
    runner.roll_up_usage(world.loop)
    rolled = RollUpState.objects.get().rolled_until
    counted = activity(usage, rolled - timedelta(minutes=2), rolled - timedelta(minutes=1))
    uncounted = activity(usage, rolled, rolled + timedelta(minutes=1))
    settings.GPUPOOL_ACTIVITY_RETENTION_DAYS = 0

    assert runner.prune_activity(world.loop) >= 1
    assert not ActivityWindow.objects.filter(pk=counted.pk).exists()
    assert ActivityWindow.objects.filter(pk=uncounted.pk).exists()


def test_beat_runs_the_retention_task(world: World, settings: Any) -> None:
    from gpupool.utilization.tasks import prune_activity_task

    usage = running(world, "train", gpus=2)
    world.cluster.tick(2 * HOUR_S)
    runner.roll_up_usage(world.loop)
    now = moment(world.cluster.now())
    activity(usage, now - timedelta(days=50, minutes=1), now - timedelta(days=50))
    entry = next(
        e for e in settings.CELERY_BEAT_SCHEDULE.values() if e["task"] == prune_activity_task.name
    )

    assert entry["schedule"] == settings.GPUPOOL_ACTIVITY_PRUNE_INTERVAL_S
    assert prune_activity_task.apply().get() == 1
    assert prune_activity_task.expires


@pytest.mark.slow
def test_the_simulated_demo_shows_what_its_teams_used_and_cost(settings: Any) -> None:
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    seed()
    state = cluster_state()
    clock = VirtualClock(state.last_reading)
    backend = SimulatedBackend(SimulatedCluster(DatabaseStore(state.pk, clock), clock))
    loop = ControlLoop(backend)
    feed = DemoWorkloadFeed(seed=42, load=1.0, start=clock.now())
    first = moment(clock.now())
    stop = threading.Event()
    cycles = 0

    def five_minutes_later(result: CycleResult) -> None:
        nonlocal cycles
        cycles += 1
        clock.advance(300)
        feed.submit_due(clock.now())
        if cycles == 40:  # 200 simulated minutes
            stop.set()

    runner.run_forever(loop, stop, interval_s=0, roll_up_interval_s=0, on_cycle=five_minutes_later)
    zone = accounting_zone()
    query = ReportQuery(local_day(first, zone), local_day(moment(clock.now()), zone))
    used = usage_report(query, by=("tenant",)).rows()
    assert sum(row["gpu_hours"] for row in used) > 0
    assert all(row["cost"] > 0 for row in used if row["gpu_hours"] > 0)
    for row in capacity_report(query).rows():
        assert sum(row[line] for line in FLAVOR_LINES) == row["capacity"] > 0
