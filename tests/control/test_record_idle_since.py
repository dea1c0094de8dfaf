"""A workload's idle spell ends with its hold on the GPUs: the sync's step that finishes it or
takes its placement away clears ``Workload.idle_since`` in the same ``UPDATE``."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from loop_builders import World, build_world

from gpupool.clusters.base import PodKey
from gpupool.control.snapshot import WorkloadRow
from gpupool.control.state import stepped
from gpupool.scheduler.types import PodSetInfo, WorkloadInfo
from gpupool.utilization.actions import do_record_activity
from gpupool.workloads.choices import WorkloadState
from gpupool.workloads.models import Workload


@pytest.fixture
def world(db: None) -> World:
    """Two teams, two 8-GPU nodes, a loop."""
    return build_world()


def _running_and_idle(world: World, name: str) -> tuple[Workload, PodKey]:
    pod = world.cluster.add_pod(f"{name}-0", workload=name, gpus=1)
    world.cycle()
    world.cluster.run()
    world.cycle()
    workload = world.workload(name)
    assert workload.state == "running"
    assert workload.started_at is not None
    do_record_activity([], idle_since={workload.pk: workload.started_at + timedelta(seconds=1)})
    assert Workload.objects.get(pk=workload.pk).idle_since is not None
    return workload, pod


@pytest.mark.django_db
@pytest.mark.parametrize("phase", ["Succeeded", "Failed"])
def test_a_workload_that_finishes_keeps_no_idle_spell(world: World, phase: str) -> None:
    workload, pod = _running_and_idle(world, "job")
    world.cluster.tick(60)
    world.cluster.finish(pod, phase)
    with CaptureQueriesContext(connection) as queries:
        world.cycle()
    row = Workload.objects.get(pk=workload.pk)
    assert row.state == phase.lower()
    assert row.idle_since is None
    # In the UPDATE that moved its state: no statement of its own.
    writes = [q["sql"] for q in queries if q["sql"].startswith("UPDATE")]
    writes = [sql for sql in writes if "idle_since" in sql]
    assert len(writes) == 1 and '"state"' in writes[0] and '"finished_at"' in writes[0]


@pytest.mark.django_db
def test_a_workload_whose_pods_vanish_keeps_no_idle_spell(world: World) -> None:
    workload, pod = _running_and_idle(world, "job")
    world.cluster.tick(60)
    world.cluster.remove(pod)
    world.cycle()
    row = Workload.objects.get(pk=workload.pk)
    assert row.state in ("preempted", "pending")
    assert not row.placements.exists()
    assert row.idle_since is None


def test_a_requeued_workload_is_held_without_its_idle_spell_as_read_back() -> None:
    """The loop holds a requeue as ``read_workloads`` reads it back (``state.stepped``): a
    pending row has no idle spell, which the write above now also says."""
    at = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)
    info = WorkloadInfo(
        name="team-a/job",
        queue="team-a",
        priority_class="normal",
        pod_sets=(PodSetInfo(count=1, gpus=1, flavors=("h100",)),),
        submitted_at=at.timestamp() - 600,
        state="running",
        started_at=at.timestamp() - 300,
        idle_since=at.timestamp() - 200,
    )
    row = WorkloadRow(7, info, (7,), state=WorkloadState.RUNNING)
    after = stepped(row, [(WorkloadState.PREEMPTED, at), (WorkloadState.PENDING, at)])
    assert after is not None and after.state == WorkloadState.PENDING
    assert after.info.idle_since is None


def test_a_workload_cancelled_through_the_api_keeps_no_idle_spell(db: None) -> None:
    """The slow path (``do_transition_workload``: the API's and the pages' cancel) ends the
    idle spell with the hold on the GPUs, as the record's steps do."""
    from datetime import timedelta

    from django.utils import timezone
    from loop_builders import build_world

    from gpupool.workloads.actions import do_cancel_workload

    world = build_world()
    world.submit("nb", gpus=1)
    world.cycle()
    world.cycle()
    notebook = world.workload("nb")
    assert notebook.state in ("admitted", "running")
    notebook.idle_since = timezone.now() - timedelta(hours=1)
    notebook.save(update_fields=["idle_since"])
    do_cancel_workload(notebook, acting_user=None, reason="not needed")
    assert world.workload("nb").idle_since is None
