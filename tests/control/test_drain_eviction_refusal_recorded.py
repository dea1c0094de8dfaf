"""A drain's eviction a PodDisruptionBudget refuses: the workload's row keeps the refusal
(``Workload.eviction_refusal``), which its page and the workloads API show naming the budget
while it is current, and which is cleared once the eviction is accepted or no longer wanted;
the drain does not ask again before the refusal's back-off (``REFUSAL_BACKOFF_S``) has
passed, and does after it."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from loop_builders import World, build_world

from gpupool.clusters.base import EvictOutcome, PodRef
from gpupool.control.loop import REFUSAL_BACKOFF_S
from gpupool.inventory.actions import do_drain_node, do_set_node_cordoned
from gpupool.inventory.models import Node
from gpupool.quotas.models import PriorityClass

pytestmark = pytest.mark.django_db

# What the API adds to a budget's 429 (``clusters.simulated`` says it the same way).
CAUSE = "The disruption budget guard needs 1 healthy pod and has 1 currently"


@pytest.fixture
def world(db: None) -> World:
    """One 8-GPU node running ``filler``, whose pods a budget ``team-a/guard`` protects,
    and a drain of that node asked: its first eviction is refused."""
    world = build_world(nodes=1)
    world.submit("filler", gpus=8, priority_class=PriorityClass.objects.get(name="low"))
    world.cycle()
    world.cycle()
    world.cluster.run()
    world.cycle()
    assert world.workload("filler").state == "running"
    plain = world.cluster.evict

    def evict(pods: Sequence[PodRef], reason: str) -> EvictOutcome:
        """The fake cluster's eviction, its refusals saying which budget refused."""
        answer = plain(pods, reason)
        return EvictOutcome(
            tuple(
                dataclasses.replace(r, message=f"{r.message}; {CAUSE}")
                if r.status == "refused"
                else r
                for r in answer.results
            )
        )

    world.cluster.evict = evict  # type: ignore[method-assign]
    world.cluster.refuse.update(p.key for p in world.cluster.pods_of("filler"))
    do_drain_node(Node.objects.get(name="n1"), acting_user=None, reason="maintenance")
    world.cycle()
    assert world.cluster.calls["evict"] == 1
    return world


def readers() -> tuple[Client, Client]:
    """A page client and an API client, both an admin's."""
    admin = get_user_model().objects.create_superuser("root", "", "x")
    page, api = Client(), Client()
    page.force_login(admin)
    api.force_login(admin)
    return page, api


def detail(api: Client) -> dict[str, Any]:
    response = api.get("/api/v1/workloads/team-a/filler/")
    assert response.status_code == 200
    body: dict[str, Any] = response.json()
    return body


def page_text(page: Client) -> str:
    response = page.get("/workloads/team-a/filler/")
    assert response.status_code == 200
    return response.content.decode()


def test_a_refused_drain_eviction_is_on_the_workload_page_and_api_naming_the_budget(
    world: World,
) -> None:
    row = world.workload("filler")
    assert row.state == "running" and row.eviction_refusal is not None
    page, api = readers()
    refusal = detail(api)["eviction_refusal"]
    assert refusal is not None
    assert (refusal["budget"], refusal["reason"], refusal["nodes"], refusal["preemptor"]) == (
        "team-a/guard",
        "admin",
        ["n1"],
        None,
    )
    assert refusal["needs"] == "1 healthy pod and has 1 currently"
    assert refusal["at"] is not None
    assert refusal["detail"].startswith(
        "Eviction (a drain) refused by PodDisruptionBudget team-a/guard"
    )
    text = page_text(page)
    assert "data-eviction-refused" in text
    assert "PodDisruptionBudget <code>team-a/guard</code>" in text
    assert "for a drain (node n1)" in text


def test_the_refusal_is_cleared_once_the_eviction_is_accepted(world: World) -> None:
    world.cluster.refuse.clear()
    world.cluster.tick(REFUSAL_BACKOFF_S + 1)
    world.cycle()
    assert world.cluster.calls["evict"] == 2  # asked again, and accepted
    assert world.workload("filler").eviction_refusal is None
    page, api = readers()
    assert detail(api)["eviction_refusal"] is None
    assert "data-eviction-refused" not in page_text(page)


def test_a_refusal_retried_and_refused_again_stays_with_its_new_time(world: World) -> None:
    first = world.workload("filler").eviction_refusal
    assert first is not None
    world.cluster.tick(REFUSAL_BACKOFF_S + 1)
    world.cycle()
    assert world.cluster.calls["evict"] == 2
    again = world.workload("filler").eviction_refusal
    assert again is not None and again["budget"] == "team-a/guard"
    assert again["at"] > first["at"]


def test_the_refusal_is_cleared_when_the_drain_ends_and_no_eviction_is_wanted(
    world: World,
) -> None:
    # Uncordoning the node ends its drain.
    do_set_node_cordoned(Node.objects.get(name="n1"), cordoned=False, acting_user=None)
    world.cluster.tick(REFUSAL_BACKOFF_S + 1)
    world.cycle()
    assert world.cluster.calls["evict"] == 1  # not asked again: nobody wants it evicted
    assert world.workload("filler").state == "running"
    assert world.workload("filler").eviction_refusal is None


def test_a_drain_does_not_ask_again_before_the_refusal_back_off_and_does_after(
    world: World,
) -> None:
    for _ in range(3):  # within the back-off: not asked again, however many cycles
        world.cluster.tick(REFUSAL_BACKOFF_S / 4)
        world.cycle()
    assert world.cluster.calls["evict"] == 1
    assert world.workload("filler").eviction_reason == ""  # no eviction pending meanwhile
    world.cluster.tick(REFUSAL_BACKOFF_S / 2)  # past it
    world.cycle()
    assert world.cluster.calls["evict"] == 2


def test_a_refused_preemption_is_recorded_with_its_preemptor_and_cleared_once_evicted(
    db: None,
) -> None:
    world = build_world(nodes=1)
    world.submit("filler", gpus=8, priority_class=PriorityClass.objects.get(name="low"))
    world.cycle()
    world.cycle()
    world.cluster.run()
    world.cycle()
    world.cluster.tick(60)
    world.cluster.refuse.update(p.key for p in world.cluster.pods_of("filler"))
    urgent = world.submit("urgent", gpus=8, priority_class=PriorityClass.objects.get(name="high"))
    world.cycle()
    world.cycle()
    assert world.cluster.calls["evict"] == 1
    refusal = world.workload("filler").eviction_refusal
    assert refusal is not None
    assert (refusal["reason"], refusal["preemptor"], refusal["budget"]) == (
        "preempt",
        "team-a/urgent",
        "",  # the fake cluster's refusal names no budget
    )
    assert refusal["preemptor_tenant_id"] == urgent.queue.tenant_id
    world.cluster.refuse.clear()
    world.cluster.tick(REFUSAL_BACKOFF_S + 1)
    for _ in range(2):
        world.cycle()
    assert world.cluster.calls["evict"] == 2
    assert world.workload("filler").eviction_refusal is None
