"""People's actions on workloads are stamped on the pool's clock, not the wall clock.

A simulated cluster (the demo: an hour a minute) runs ahead of the wall clock; the loop stamps
starts with it. A cancel stamped with the wall clock landed before the workload's start and
was refused ("a workload cannot finish before it started"); a submission sorted hours below
work submitted before it.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from domain_builders import flavor, node, priority_class, queue, tenant, user

from gpupool.control.choices import CycleStatus
from gpupool.control.clock import pool_now
from gpupool.control.models import SchedulingCycle
from gpupool.inventory.models import Node
from gpupool.workloads.actions import (
    PlacementSpec,
    PodSetSpec,
    do_cancel_workload,
    do_submit_workload,
    do_transition_workload,
)
from gpupool.workloads.models import Workload

pytestmark = pytest.mark.django_db


@pytest.fixture
def pool() -> dict[str, Any]:
    """Tenant nlp (member max) with leaf queue nlp-train; one 8-GPU node."""
    h100 = flavor("h100")
    node("n1", h100, gpus=8)
    priority_class("normal", default=True)
    max_ = user("max")
    nlp = tenant("nlp", members=(max_,), namespaces=("nlp",))
    return {
        "h100": h100,
        "member": max_,
        "queue": queue("nlp-train", parent=queue("root"), tenant=nlp),
    }


def cycle_with_cluster_clock(ahead: timedelta) -> Any:
    """A finished cycle whose cluster's clock read the wall clock plus ``ahead``."""
    wall = timezone.now()
    cluster_at = wall + ahead
    SchedulingCycle.objects.create(
        started_at=wall,
        finished_at=wall,
        status=CycleStatus.SUCCEEDED,
        cluster_at=cluster_at,
    )
    return cluster_at


def submit(pool: dict[str, Any], name: str, **fields: Any) -> Workload:
    spec = PodSetSpec(1, gpus=4, flavor=pool["h100"])
    return do_submit_workload(
        name, queue=pool["queue"], submitter=pool["member"], pod_sets=[spec], **fields
    )


def start(workload: Workload, at: Any) -> Workload:
    placement = PlacementSpec("main", 0, Node.objects.get(name="n1"), [0, 1, 2, 3])
    do_transition_workload(workload, "admitted", reason="fits", at=at, placements=[placement])
    do_transition_workload(workload, "running", reason="started", at=at)
    workload.refresh_from_db()
    return workload


def test_a_submission_beside_a_cluster_ahead_of_the_wall_clock_is_stamped_on_its_clock(
    pool: dict,
) -> None:
    cluster_at = cycle_with_cluster_clock(timedelta(hours=3))
    workload = submit(pool, "train")
    assert workload.submitted_at == cluster_at
    assert pool_now() == cluster_at


def test_a_running_workload_started_on_the_clusters_clock_is_cancelled_after_its_start(
    pool: dict,
) -> None:
    cluster_at = cycle_with_cluster_clock(timedelta(hours=3))
    workload = start(submit(pool, "train", at=cluster_at - timedelta(hours=1)), cluster_at)
    transition = do_cancel_workload(workload, acting_user=pool["member"], reason="not needed")
    workload.refresh_from_db()
    assert workload.state == "cancelled"
    assert workload.finished_at == cluster_at == transition.at


def test_a_start_recorded_after_the_last_finished_cycle_still_precedes_the_cancel(
    pool: dict,
) -> None:
    """A cycle still being recorded starts work after the clock the last finished one read:
    the cancel follows that start, it is not refused for ending before it."""
    cluster_at = cycle_with_cluster_clock(timedelta(hours=3))
    started = cluster_at + timedelta(seconds=40)
    workload = start(submit(pool, "train", at=cluster_at), started)
    do_cancel_workload(workload, acting_user=pool["member"], reason="not needed")
    workload.refresh_from_db()
    assert workload.state == "cancelled"
    assert workload.finished_at == started


def test_without_a_cycle_the_stamp_is_the_wall_clock(pool: dict) -> None:
    before = timezone.now()
    workload = submit(pool, "train")
    assert before <= workload.submitted_at <= timezone.now()


def test_a_drain_is_asked_on_the_pools_clock_as_its_end_is_recorded(pool: dict[str, Any]) -> None:
    """The loop stamps ``drained_at`` on the cluster's clock; the drain's request was
    stamped on the wall clock, so a drain of a minute read as hours in the demo."""
    from gpupool.inventory.actions import do_drain_node, do_record_drained

    cluster_at = cycle_with_cluster_clock(timedelta(hours=5))
    node = do_drain_node(Node.objects.get(name="n1"), acting_user=None)
    assert abs(node.drain_requested_at - cluster_at) < timedelta(seconds=5)
    do_record_drained({"n1"}, at=cluster_at + timedelta(minutes=1))
    node.refresh_from_db()
    assert node.drained_at - node.drain_requested_at < timedelta(minutes=2)
