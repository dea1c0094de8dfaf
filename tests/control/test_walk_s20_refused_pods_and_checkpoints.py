"""From a walk of the real Kubernetes path (s20): pods gpupool will not schedule are listed by
the API (``GET workloads/refused/``, what the My workloads page lists, scoped by tenant), and
a running pod whose ``gpupool.io/last-checkpoint`` cannot be read gets a Warning Event naming
the annotation (DESIGN section 4) and keeps running; a readable one is shown in the workload's
detail (API and page)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.test import Client
from domain_builders import user
from loop_builders import World, build_world
from rest_framework.test import APIClient

from gpupool.tenancy.actions import do_set_membership
from gpupool.tenancy.models import Tenant

pytestmark = pytest.mark.django_db


def api_as(who: object) -> APIClient:
    client = APIClient()
    client.force_authenticate(who)
    return client


def test_refused_pods_are_listed_by_the_workloads_api_scoped_by_tenant() -> None:
    world = build_world()
    world.cluster.add_pod("stray-0", "team-a", queue="team-b", gpus=1, workload="stray")
    world.cluster.add_pod("odd-0", "team-b", queue="team-b", gpus=1, workload="odd",
                          annotations={"gpupool.io/min-member": "four"})  # fmt: skip
    world.cycle()
    world.cycle()
    admin, amy, bob = user("root", admin=True), user("amy"), user("bob")
    do_set_membership(amy, Tenant.objects.get(name="a"), role="member", acting_user=None)
    do_set_membership(bob, Tenant.objects.get(name="b"), role="member", acting_user=None)

    everything = api_as(admin).get("/api/v1/workloads/refused/")
    assert everything.status_code == 200, everything.content
    assert everything.json()["count"] == 2
    assert [row["workload"] for row in everything.json()["results"]] == [
        "team-a/stray",
        "team-b/odd",
    ]

    mine = api_as(amy).get("/api/v1/workloads/refused/").json()
    assert mine["count"] == 1
    (row,) = mine["results"]
    assert row["workload"] == "team-a/stray"
    assert (row["namespace"], row["name"], row["pods"]) == ("team-a", "stray", 1)
    assert "belongs to tenant b" in row["why"]
    # The page's words are the API's (the same record).
    page = Client()
    page.force_login(amy)
    assert row["why"] in page.get("/workloads/").content.decode().replace("&quot;", '"')

    theirs = api_as(bob).get("/api/v1/workloads/refused/", {"namespace": "team-b"}).json()
    assert [r["workload"] for r in theirs["results"]] == ["team-b/odd"]
    assert 'gpupool.io/min-member: "four"' in theirs["results"][0]["why"]
    one = api_as(admin).get("/api/v1/workloads/refused/", {"namespace": "team-a", "name": "nope"})
    assert one.json() == {"count": 0, "results": []}
    unknown = api_as(admin).get("/api/v1/workloads/refused/", {"nmae": "stray"})
    assert unknown.status_code == 400 and "nmae" in unknown.json()["error"]["fields"]


def running(world: World, name: str) -> object:
    pod = world.cluster.add_pod(name, gpus=1)
    world.cycle()
    world.cluster.run()
    world.cycle()
    assert world.workload(name).state == "running"
    return pod


def test_an_unreadable_checkpoint_on_a_running_pod_is_told_once_and_it_runs_on() -> None:
    world = build_world()
    pod = running(world, "ckpt")
    world.cluster.annotate(pod, **{"gpupool.io/last-checkpoint": "yesterday"})  # type: ignore[arg-type]
    world.cycle()
    world.cycle()
    warnings = [e for e in world.cluster.events_on(pod) if e[2] == "Warning"]  # type: ignore[arg-type]
    assert len(warnings) == 1, world.cluster.events_on(pod)  # type: ignore[arg-type]
    reason, message, _ = warnings[0]
    assert reason != "FailedScheduling"  # it is scheduled: it runs
    assert 'gpupool.io/last-checkpoint: "yesterday"' in message
    assert "keeps running" in message
    assert world.workload("ckpt").state == "running"
    assert world.workload("ckpt").last_checkpoint_at is None


def test_a_checkpoint_is_shown_in_the_workload_detail_api_and_page() -> None:
    world = build_world()
    pod = running(world, "ckpt")
    world.cluster.tick(120)
    moment = datetime.fromtimestamp(world.cluster.clock - 60, tz=UTC).replace(microsecond=0)
    world.cluster.annotate(pod, **{"gpupool.io/last-checkpoint": moment.isoformat()})  # type: ignore[arg-type]
    world.cycle()
    admin = user("root", admin=True)
    detail = api_as(admin).get("/api/v1/workloads/team-a/ckpt/").json()
    assert datetime.fromisoformat(detail["last_checkpoint_at"]) == moment
    page = Client()
    page.force_login(admin)
    html = page.get("/workloads/team-a/ckpt/").content.decode()
    assert "data-checkpoint" in html and "last checkpoint" in html


def test_a_drains_eviction_event_says_which_drain_who_and_why() -> None:
    from gpupool.inventory.actions import do_drain_node
    from gpupool.inventory.models import Node

    world = build_world()
    pod = running(world, "drained")
    node = world.workload("drained").placements.get().node
    ada = user("ada", admin=True)
    do_drain_node(Node.objects.get(pk=node.pk), acting_user=ada, reason="walk: drain test")
    world.cycle()
    world.cycle()
    told = [message for reason, message, _ in world.cluster.events_on(pod) if reason == "Preempted"]  # type: ignore[arg-type]
    assert told, world.cluster.events_on(pod)  # type: ignore[arg-type]
    assert told[0] == f"admin, for the drain of node {node.name}, drained by ada: walk: drain test"
    assert len(told[0]) < 1024
