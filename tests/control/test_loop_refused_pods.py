"""Pods gpupool will not schedule are shown on the Workloads page, not only in their Events.

A pod that names another tenant's queue (or carries a malformed gpupool.io label, or sits in
a namespace no tenant owns) never becomes a workload, so no page listed it: the Overview said
nothing was pending while such pods waited in the cluster. Each cycle's record now names them
with the sync's sentence (``ControlLoop._refused_pods``), and the page shows them to admins and
to the team that owns the namespace."""

from __future__ import annotations

import pytest
from django.test import Client
from domain_builders import user
from loop_builders import World, build_world

from gpupool.control.models import SchedulingCycle
from gpupool.tenancy.actions import do_set_membership
from gpupool.tenancy.models import Tenant

pytestmark = pytest.mark.django_db


def refused(world: World) -> dict[str, object]:
    latest = SchedulingCycle.objects.order_by("-id").first()
    assert latest is not None and latest.status == "succeeded"
    return latest.outcome["refused_pods"]


def page_for(who: object) -> str:
    client = Client()
    client.force_login(who)
    response = client.get("/workloads/")
    assert response.status_code == 200
    return response.content.decode()


def test_a_pod_naming_another_tenant_s_queue_is_listed_with_why_until_it_is_deleted() -> None:
    world = build_world()
    stray = world.cluster.add_pod("stray-0", "team-a", queue="team-b", gpus=1, workload="stray")
    world.cycle()
    world.cycle()
    assert refused(world) == {
        "count": 1,
        "workloads": [
            {
                "workload": "team-a/stray",
                "pods": 1,
                "why": 'gpupool will not schedule these pods: gpupool.io/queue: "team-b" belongs '
                "to tenant b, not to a, which owns namespace team-a",
            }
        ],
    }
    (event,) = world.cluster.events_on(stray)
    assert event[1] == refused(world)["workloads"][0]["why"]  # type: ignore[index]

    admin, a_member, b_member = user("root", admin=True), user("amy"), user("bob")
    do_set_membership(a_member, Tenant.objects.get(name="a"), role="member", acting_user=None)
    do_set_membership(b_member, Tenant.objects.get(name="b"), role="member", acting_user=None)
    for who in (admin, a_member):
        page = page_for(who)
        assert "Pods gpupool will not schedule (1)" in page
        assert "team-a/stray" in page and "belongs to tenant b" in page
    assert "team-a/stray" not in page_for(b_member)  # not team b's namespace

    world.cluster.remove(stray)
    world.cycle()
    assert refused(world) == {"count": 0, "workloads": []}
    assert "Pods gpupool will not schedule" not in page_for(admin)


def test_a_workload_whose_window_was_capped_is_scheduled_so_not_listed() -> None:
    world = build_world()
    world.queues["team-a"].max_protected_runtime_s = 600
    world.queues["team-a"].save()
    world.cluster.add_pod(
        "capped-0",
        "team-a",
        gpus=1,
        workload="capped",
        annotations={"gpupool.io/protected-runtime": "7200"},
    )
    world.cycle()
    world.cycle()
    assert world.workload("capped").state in ("admitted", "running")
    assert refused(world) == {"count": 0, "workloads": []}
