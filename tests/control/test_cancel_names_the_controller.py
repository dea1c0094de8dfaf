"""Cancelling work says what becomes of its pods, naming the controller that owns them.

The sync keeps the controller of the pods it registers (``Workload.controller_kind`` and
``controller_name``: a Job's pods' is the Job; empty for a bare pod's and gpupool's own), the
workload's detail API shows it, and the cancel's answer (``outcome``), the workload page's
confirmation and message, and ``gpupool cancel`` say what the control loop does: a Job's Job is
suspended (its controller removes the pods and makes none again); another controller's pods
are deleted, and those it makes again are left pending. Before, all of them said "the control
loop deletes its pods", which a Job's pods no longer are.

And a placed workload's pods whose malformed annotation was fixed are told again when the same
bad value comes back: the sync forgets the complaint once they read clean.
"""

from __future__ import annotations

import argparse
import dataclasses
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import pytest
from django.test import Client
from domain_builders import user
from loop_builders import World, build_world
from rest_framework.test import APIClient

from gpupool.client.main import do_cancel
from gpupool.clusters.base import JobKey, PodKey
from gpupool.clusters.grouping import WorkloadKey
from gpupool.control.actions import _register
from gpupool.control.sync import PodSetShape, Registration
from gpupool.inventory.models import Flavor
from gpupool.workloads.models import Workload

pytestmark = pytest.mark.django_db

CHECKPOINT = "gpupool.io/last-checkpoint"
JOB_WORDS = (
    "its Job team-a/trainer-owner is suspended by the control loop at its next cycle (its "
    "controller removes the pods and makes none again)"
)
REPLICA_SET_WORDS = (
    "its pods are deleted; their controller ReplicaSet web-owner may make them again, and "
    "gpupool leaves those pending"
)


def api_as(who: object) -> APIClient:
    client = APIClient()
    client.force_authenticate(who)
    return client


def running(world: World, pod: str, workload: str, owner: str | None) -> PodKey:
    """A 1-GPU pod of ``workload`` made by ``owner`` (a kind, or None: kubectl), running."""
    key = world.cluster.add_pod(pod, gpus=1, workload=workload, owner=owner)
    world.cycle()
    world.cluster.run()
    world.cycle()
    assert world.workload(workload).state == "running"
    return key


def test_the_sync_keeps_the_controller_of_the_pods_it_registers() -> None:
    world = build_world()
    world.cluster.add_pod("trainer-0", workload="trainer", owner="Job")
    world.cluster.add_pod("web-0", workload="web", owner="ReplicaSet")
    world.cluster.add_pod("loose-0", workload="loose")
    world.submit("ours")
    world.cycle()
    kept = {
        w.name: (w.origin, w.controller_kind, w.controller_name) for w in Workload.objects.all()
    }
    assert kept == {
        "trainer": ("controller", "Job", "trainer-owner"),
        "web": ("controller", "ReplicaSet", "web-owner"),
        "loose": ("bare", "", ""),
        "ours": ("gpupool", "", ""),
    }
    admin = user("root", admin=True)
    detail = api_as(admin).get("/api/v1/workloads/team-a/trainer/").json()
    assert (detail["origin"], detail["controller_kind"], detail["controller_name"]) == (
        "controller",
        "Job",
        "trainer-owner",
    )
    loose = api_as(admin).get("/api/v1/workloads/team-a/loose/").json()
    assert (loose["origin"], loose["controller_kind"], loose["controller_name"]) == ("bare", "", "")


def test_the_one_by_one_registration_keeps_the_controller_too() -> None:
    world = build_world()
    world.cycle()  # the nodes and their flavor
    flavors = {f.pk: f for f in Flavor.objects.all()}
    shape = PodSetShape("set-0", 1, 1, (world.h100.pk,), None, Decimal(1), Decimal(1))
    at = datetime(2026, 1, 5, 9, tzinfo=UTC)
    registration = Registration(
        WorkloadKey("team-a", "sts"), "team-a", None, (shape,), "controller", at, None, "",
        None, None, controller_kind="StatefulSet", controller_name="sts",
    )  # fmt: skip
    made = _register(registration, flavors)
    row = Workload.objects.get(pk=made.pk)
    assert (row.origin, row.controller_kind, row.controller_name) == (
        "controller",
        "StatefulSet",
        "sts",
    )


def test_an_owner_longer_than_the_workload_keeps_is_left_out_not_a_failed_registration() -> None:
    world = build_world()
    world.cluster.add_pod("odd-0", workload="odd", owner="K" * 64)
    world.cycle()
    odd = world.workload("odd")
    assert (odd.origin, odd.controller_kind, odd.controller_name) == ("controller", "", "")
    # Its cancel then says what holds for any controller's pods, naming none.
    assert "a Job's by suspending the Job" in odd.pods_when_cancelled(held_gpus=False)


def test_cancelling_a_jobs_workload_says_its_job_is_suspended_and_the_loop_does_so() -> None:
    world = build_world()
    running(world, "trainer-0", "trainer", "Job")
    admin = user("root", admin=True)
    answer = api_as(admin).post("/api/v1/workloads/team-a/trainer/cancel/", {}, format="json")
    assert answer.status_code == 200, answer.content
    body = answer.json()
    assert body["state"] == "cancelled"
    assert body["outcome"] == f"its GPUs are released, and {JOB_WORDS}."
    assert (body["controller_kind"], body["controller_name"]) == ("Job", "trainer-owner")
    world.cycle()
    assert world.cluster.suspended == {JobKey("team-a", "trainer-owner")}  # as it said


def test_cancelling_another_controllers_workload_on_its_page_says_what_becomes_of_its_pods() -> (
    None
):
    world = build_world()
    running(world, "web-0", "web", "ReplicaSet")
    admin = user("root", admin=True)
    page = Client()
    page.force_login(admin)
    before = page.get("/workloads/team-a/web/").content.decode()
    assert f"gives back its GPUs, and <span data-cancel-pods>{REPLICA_SET_WORDS}</span>" in (before)
    assert "ReplicaSet team-a/web-owner (a controller)" in before  # who submitted it
    after = page.post("/workloads/team-a/web/cancel/", {"reason": ""}, follow=True)
    said = after.content.decode()
    assert "team-a/web is cancelled: its GPUs are released, and" in said
    assert REPLICA_SET_WORDS in said
    assert world.workload("web").state == "cancelled"
    # A pending one's pods hold no node: none is deleted, and its page says so.
    world.cluster.add_pod("idle-0", gpus=16, workload="idle", owner="ReplicaSet")
    world.cycle()
    assert world.workload("idle").state == "pending"
    waiting = page.get("/workloads/team-a/idle/").content.decode()
    assert (
        "leaves its queue, and <span data-cancel-pods>gpupool leaves its pods pending, never "
        "scheduled: their controller ReplicaSet idle-owner would make them again</span>"
    ) in waiting


class _ApiThroughTheTestClient:
    """The client's ``Api``, answered by the API in this process (no server)."""

    def __init__(self, who: object) -> None:
        self.client = api_as(who)

    def call(self, method: str, path: str, body: Any = None, **_: Any) -> Any:
        assert method == "POST"
        answer = self.client.post(f"/api/v1/{path}", body, format="json")
        assert answer.status_code == 200, answer.content
        return answer.json()


def test_gpupool_cancel_says_what_becomes_of_the_pods() -> None:
    world = build_world()
    world.cluster.add_pod("trainer-0", gpus=16, workload="trainer", owner="Job")
    world.cycle()
    assert world.workload("trainer").state == "pending"
    out = _Out()
    options = argparse.Namespace(workload=("team-a", "trainer"), reason="wrong data")
    assert do_cancel(_ApiThroughTheTestClient(user("root", admin=True)), options, out) == 0  # type: ignore[arg-type]
    assert out.text.splitlines() == [
        "Cancelled team-a/trainer.",
        "It leaves queue team-a and will not be admitted (it held no GPUs); " + JOB_WORDS + ".",
    ]


class _Out:
    def __init__(self) -> None:
        self.text = ""

    def write(self, text: str) -> int:
        self.text += text
        return len(text)


def _warnings(world: World, pod: PodKey) -> list[str]:
    return [message for reason, message, kind in world.cluster.events_on(pod) if kind == "Warning"]  # type: ignore[arg-type]


def test_a_malformed_checkpoint_set_again_after_it_was_fixed_is_told_again() -> None:
    world = build_world()
    pod = running(world, "ckpt-0", "ckpt", None)
    world.cluster.annotate(pod, **{CHECKPOINT: "yesterday"})
    world.cycle()
    assert len(_warnings(world, pod)) == 1
    world.cluster.tick(60)
    fixed = datetime.fromtimestamp(world.cluster.clock - 30, tz=UTC).replace(microsecond=0)
    world.cluster.annotate(pod, **{CHECKPOINT: fixed.isoformat()})
    world.cycle()
    assert world.workload("ckpt").last_checkpoint_at == fixed
    world.cluster.annotate(pod, **{CHECKPOINT: "yesterday"})
    world.cycle()
    world.cycle()  # told once each time it turns bad, not each cycle
    told = _warnings(world, pod)
    assert len(told) == 2, world.cluster.events_on(pod)  # type: ignore[arg-type]
    assert all('gpupool.io/last-checkpoint: "yesterday"' in message for message in told)
    assert world.workload("ckpt").state == "running"


def test_a_malformed_checkpoint_removed_and_set_again_is_told_again() -> None:
    world = build_world()
    pod = running(world, "ckpt-0", "ckpt", None)
    world.cluster.annotate(pod, **{CHECKPOINT: "yesterday"})
    world.cycle()
    assert len(_warnings(world, pod)) == 1
    # The annotation taken off: the pods no longer say a checkpoint (the sync's fast path).
    facts = world.cluster.pods[pod]
    world.cluster.pods[pod] = dataclasses.replace(
        facts, annotations={k: v for k, v in facts.annotations.items() if k != CHECKPOINT}
    )
    world.cycle()
    world.cluster.annotate(pod, **{CHECKPOINT: "yesterday"})
    world.cycle()
    assert len(_warnings(world, pod)) == 2, world.cluster.events_on(pod)  # type: ignore[arg-type]
