"""Running the loop: the lock, the commands, the Celery task, /metrics."""

from __future__ import annotations

import json
import threading
from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command
from django.test import Client
from fake_cluster import FakeCluster
from loop_builders import PRODUCT, World, build_world

from gpupool.control import runner
from gpupool.control.lock import cycle_lock
from gpupool.control.loop import ControlLoop
from gpupool.control.models import SchedulingCycle
from gpupool.workloads.models import Workload


def one_node_cluster() -> FakeCluster:
    """The backend the commands' tests configure: one 8-GPU node."""
    cluster = FakeCluster()
    cluster.add_node("n1", 8, PRODUCT)
    return cluster


@pytest.fixture
def configured(settings: Any, db: None) -> World:
    """The commands run on a fake cluster through the settings' backend table."""
    settings.GPUPOOL_CLUSTER = "simulated"
    settings.GPUPOOL_CLUSTER_BACKENDS = {"simulated": "test_loop_commands.one_node_cluster"}
    runner._shared = None
    world = build_world()
    yield world
    runner._shared = None


def gpupool(*args: str) -> tuple[int, str, str]:
    """Run ``manage.py gpupool ARGS``; returns (status, stdout, stderr)."""
    out, err = StringIO(), StringIO()
    try:
        call_command("gpupool", *args, stdout=out, stderr=err)
    except SystemExit as exit_:
        return int(exit_.code or 0), out.getvalue(), err.getvalue()
    return 0, out.getvalue(), err.getvalue()


def test_gpupool_cycle_runs_one_cycle_and_prints_its_record(configured: World) -> None:
    configured.submit("train", gpus=2)
    status, out, _ = gpupool("cycle")
    record = json.loads(out)
    assert status == 0 and record["status"] == "succeeded"
    # The phases, and the warm-up before the lock of a process's first cycle.
    assert set(record["timings_s"]) == {"warm", "sync", "snapshot", "plan", "record", "apply"}
    # The cycle thread's CPU: some, and no more than its wall time (the rest is waiting).
    assert 0 < record["cpu_s"] <= sum(record["timings_s"].values()) + 0.01
    row = SchedulingCycle.objects.get(pk=record["cycle"])
    assert row.status == "succeeded"
    assert row.outcome["cpu_s"] == pytest.approx(record["cpu_s"], abs=1e-4)


def test_gpupool_cycle_dry_run_plans_and_records_nothing(configured: World) -> None:
    configured.submit("train", gpus=2)
    gpupool("cycle")  # its pods exist now
    before = SchedulingCycle.objects.count()
    status, out, _ = gpupool("cycle", "--dry-run")
    record = json.loads(out)
    assert status == 0 and record["status"] == "dry-run"
    assert record["admitted"] == ["team-a/train"]
    assert SchedulingCycle.objects.count() == before
    assert configured.workload("train").state == "pending"


def holding_the_lock() -> tuple[threading.Thread, threading.Event]:
    """Another worker (a thread with its own database connection) holding the cycle lock;
    set the event to let it go."""
    entered, release = threading.Event(), threading.Event()

    def hold() -> None:
        from django.db import connection

        with cycle_lock() as held:
            assert held
            entered.set()
            release.wait(10)
        connection.close()

    other = threading.Thread(target=hold)
    other.start()
    assert entered.wait(10)
    return other, release


def test_a_cycle_beside_a_running_one_skips_and_says_so(configured: World) -> None:
    other, release = holding_the_lock()
    try:
        status, out, err = gpupool("cycle")
    finally:
        release.set()
        other.join()
    assert status == 1 and json.loads(out)["status"] == "skipped"
    assert "another scheduling cycle holds the lock" in err


@pytest.mark.django_db(transaction=True)
def test_two_workers_run_one_cycle_at_a_time(settings: Any) -> None:
    world = build_world()
    other, release = holding_the_lock()
    results = [world.loop.run_cycle().status]
    release.set()
    other.join()
    results.append(world.loop.run_cycle().status)
    assert results == ["skipped", "succeeded"]


@pytest.mark.django_db(transaction=True)
def test_skipped_and_failed_cycles_are_counted_in_the_metrics(
    settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A skipped row carries no counters (another process held the lock): the next cycle
    that runs counts it, once. A failed cycle counts itself. /metrics said only succeeded."""
    from gpupool.control import metrics

    world = build_world()
    other, release = holding_the_lock()
    try:
        assert world.loop.run_cycle().status == "skipped"
        assert world.loop.run_cycle().status == "skipped"
    finally:
        release.set()
        other.join()
    assert world.loop.run_cycle().status == "succeeded"
    assert world.loop.run_cycle().status == "succeeded"
    from gpupool.control import loop as loop_module

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("the plan broke")

    monkeypatch.setattr(loop_module, "run_cycle", broken)
    assert world.loop.run_cycle().status == "failed"
    cycles = metrics.carried_totals()["cycles"]
    assert cycles == {"skipped": 2, "succeeded": 2, "failed": 1}, cycles
    body = Client().get("/metrics").content.decode()
    assert 'gpupool_cycles_total{status="skipped"} 2.0' in body
    assert 'gpupool_cycles_total{status="failed"} 1.0' in body


def test_gpupool_loop_runs_cycles_until_told_to_stop(configured: World) -> None:
    status, out, _ = gpupool("loop", "--interval", "0.01", "--cycles", "3")
    assert status == 0
    assert out.count(": succeeded") == 3


def test_the_celery_task_is_a_shim_over_one_cycle(configured: World) -> None:
    from gpupool.control.tasks import run_cycle_task

    record = run_cycle_task.apply().get()
    assert record["status"] == "succeeded"
    assert run_cycle_task.expires and run_cycle_task.time_limit


def test_a_celery_cycle_that_made_pods_runs_the_next_one_soon_after(
    configured: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Work submitted through gpupool gets its pods in one cycle and is bound in the next:
    the task of the first queues the second on its own (eager here: it runs at once) rather
    than leaving the work unbound until the beat's next cycle."""
    from gpupool.celery import app
    from gpupool.control.tasks import run_cycle_task

    monkeypatch.setitem(app.conf, "task_always_eager", True)
    configured.submit("train", gpus=2)
    before = SchedulingCycle.objects.count()

    record = run_cycle_task.apply().get()

    assert record["counts"]["created"] == 1
    assert SchedulingCycle.objects.count() == before + 2  # the follow-up, and no third
    assert configured.workload("train").state in ("admitted", "running")


def test_a_cycle_that_made_no_pods_leaves_the_next_to_the_beat(configured: World) -> None:
    from gpupool.control.runner import follow_up_s
    from gpupool.control.tasks import run_cycle_task

    before = SchedulingCycle.objects.count()
    record = run_cycle_task.apply().get()  # nothing submitted: nothing to make

    assert record["status"] == "succeeded" and not record["counts"].get("created")
    assert SchedulingCycle.objects.count() == before + 1
    assert follow_up_s(runner.CycleResult("skipped", counts={"created": 3})) is None


def test_the_loops_tasks_go_to_the_cycle_queue_and_the_rest_to_the_default_one() -> None:
    """The cycle and the estimated starts (which reuse the loop's snapshot) are taken by the
    one worker process of the loop's queue; a what-if replay or a roll-up never holds them up."""
    from gpupool.celery import app
    from gpupool.quotas.tasks import run_what_if_task

    def queue(task: str) -> str:
        return str(app.amqp.router.route({}, task)["queue"].name)

    assert queue("gpupool.control.run_cycle") == "cycle"
    assert queue("gpupool.control.refresh_estimates") == "cycle"
    for other in (
        run_what_if_task.name,
        "gpupool.accounting.roll_up_usage",
        "gpupool.utilization.prune_activity",
    ):
        assert queue(other) == app.conf.task_default_queue == "celery", other


def test_metrics_are_read_from_the_cycles(configured: World, client: Client) -> None:
    configured.submit("big", gpus=64)  # above its queue's capability: pending for quota
    gpupool("cycle")
    gpupool("cycle")
    body = client.get("/metrics").content.decode()
    assert 'gpupool_cycle_phase_duration_seconds_count{phase="plan"} 2.0' in body
    assert 'gpupool_cycles_total{status="succeeded"} 2.0' in body
    assert 'gpupool_pending_workloads{reason="quota"} 1.0' in body
    assert 'gpupool_queue_gpus_allocated{flavor="h100",queue="team-a"} 0.0' in body
    assert "gpupool_bind_errors_total 0.0" in body


@pytest.mark.django_db
def test_the_counters_add_up_over_loops_of_two_processes_taking_turns() -> None:
    """A loop carries its counters from its own last row without reading it back, until
    another process (a second Celery worker's loop) records a cycle: then it reads them."""
    world = build_world()
    other = ControlLoop(world.cluster)
    for loop in (world.loop, world.loop, other, world.loop, other, other, world.loop):
        assert loop.run_cycle().status == "succeeded"
    last = SchedulingCycle.objects.order_by("-id").first()
    assert last is not None
    assert last.totals["cycles"] == {"succeeded": 7}
    assert last.totals["phase_seconds"]["plan"]["count"] == 7


@pytest.mark.django_db
def test_a_real_cycle_after_a_dry_run_does_what_the_dry_run_only_planned() -> None:
    world = build_world()
    world.cluster.add_pod("kubectl-made")
    assert world.loop.run_cycle(dry_run=True).status == "dry-run"
    assert not Workload.objects.exists()
    world.cycle()
    assert world.workload("kubectl-made").state == "admitted"


def test_metrics_say_the_pools_free_gpus_per_flavor_as_the_fragmentation_page(
    configured: World, client: Client
) -> None:
    """An operator scraping /metrics could not see how much of the pool is free, nor whether
    a large gang still fits: only the queues' allocations were there."""
    configured.submit("train", gpus=2)
    gpupool("cycle")  # samples the pool (once a minute of its clock)
    gpupool("cycle")  # samples nothing: the gauges are the last sample's still
    first, last = SchedulingCycle.objects.order_by("id")
    assert "fragmentation" not in last.outcome
    figures = first.outcome["fragmentation"]["h100"]
    body = client.get("/metrics").content.decode()
    labels = '{flavor="h100",unit="GPU"}'
    assert f"gpupool_flavor_free{labels} {float(figures['free'])}" in body
    assert f"gpupool_flavor_fragmented{labels} {float(figures['fragmented'])}" in body
    assert f"gpupool_flavor_largest_gang{labels} {float(figures['largest_gang'])}" in body
    assert figures["free"] == 8  # the one 8-GPU node: train still waited for its pod then
    assert "(a MIG flavor's: MIG instances)" in body
