"""Admins drain a node through the API (``POST nodes/<name>/drain/``) and end a drain
(``POST nodes/<name>/end-drain/``), calling the very actions the Cluster page calls
(``do_drain_node``, ``do_end_drain``): before, a drain was on the dashboard only."""

from __future__ import annotations

from typing import Any

import pytest
from resources_pool import pool

from gpupool.audit.models import AuditEvent
from gpupool.inventory.models import Node

pytestmark = pytest.mark.django_db

DRAIN = "/api/v1/nodes/{}/drain/"
END_DRAIN = "/api/v1/nodes/{}/end-drain/"


@pytest.fixture
def resources(world: Any) -> dict[str, Any]:
    return pool(world)


def test_an_admin_drains_a_node_through_the_audited_action(api_as: Any, resources: dict) -> None:
    answer = api_as("admin").post(DRAIN.format("n1"), {"reason": "firmware"}, format="json")
    assert answer.status_code == 200, answer.content
    assert answer.json()["state"] == "draining"
    assert answer.json()["cordoned"] is True and answer.json()["drain_requested_at"]
    n1 = Node.objects.get(name="n1")
    assert n1.state == "draining" and n1.cordoned and n1.drain_requested_at is not None
    (event,) = AuditEvent.objects.filter(action="inventory.drain_node")
    assert (event.reason, event.actor.username) == ("firmware", "ada")
    listed = api_as("member").get("/api/v1/nodes/?state=draining").json()["results"]
    assert [n["name"] for n in listed] == ["n1"]


def test_draining_a_draining_node_again_changes_nothing(api_as: Any, resources: dict) -> None:
    """``do_drain_node`` takes a repeated drain as done already: no refusal, no second audit
    row, and the drain keeps the time it was first asked."""
    admin = api_as("admin")
    first = admin.post(DRAIN.format("n1"), {"reason": "firmware"}, format="json").json()
    again = admin.post(DRAIN.format("n1"), {"reason": "again"}, format="json")
    assert again.status_code == 200
    assert again.json()["drain_requested_at"] == first["drain_requested_at"]
    assert again.json()["state"] == "draining"
    assert AuditEvent.objects.filter(action="inventory.drain_node").count() == 1


def test_only_admins_drain_or_end_a_drain(api_as: Any, resources: dict) -> None:
    for role in ("finance", "lead", "member"):
        for url in (DRAIN, END_DRAIN):
            answer = api_as(role).post(url.format("n1"), {}, format="json")
            assert answer.status_code == 403, (role, url)
    assert api_as("anonymous").post(DRAIN.format("n1")).status_code == 401
    n1 = Node.objects.get(name="n1")
    assert (n1.state, n1.cordoned, n1.drain_requested_at) == ("ready", False, None)


def test_draining_an_unknown_node_is_a_404(api_as: Any, resources: dict) -> None:
    for url in (DRAIN, END_DRAIN):
        answer = api_as("admin").post(url.format("nope"), {}, format="json")
        assert answer.status_code == 404
        assert answer.json()["error"]["status"] == 404


def test_a_reason_too_long_is_refused_naming_it_and_changes_nothing(
    api_as: Any, resources: dict
) -> None:
    answer = api_as("admin").post(DRAIN.format("n1"), {"reason": "x" * 401}, format="json")
    assert answer.status_code == 400
    assert list(answer.json()["error"]["fields"]) == ["reason"]
    assert Node.objects.get(name="n1").state == "ready"
    assert not AuditEvent.objects.filter(action="inventory.drain_node").exists()


def test_ending_a_drain_puts_the_node_back_in_service(api_as: Any, resources: dict) -> None:
    admin = api_as("admin")
    admin.post(DRAIN.format("n1"), {}, format="json")
    ended = admin.post(END_DRAIN.format("n1"), {"reason": "fixed"}, format="json")
    assert ended.status_code == 200
    assert (ended.json()["state"], ended.json()["cordoned"]) == ("ready", False)
    assert ended.json()["drain_requested_at"] is None
    (event,) = AuditEvent.objects.filter(action="inventory.end_drain")
    assert event.reason == "fixed"


def test_ending_the_drain_of_a_node_not_draining_leaves_its_cordon(
    api_as: Any, resources: dict
) -> None:
    admin = api_as("admin")
    admin.post("/api/v1/nodes/n1/cordon/", {}, format="json")
    answer = admin.post(END_DRAIN.format("n1"), {}, format="json")
    assert answer.status_code == 200 and answer.json()["state"] == "cordoned"
    assert not AuditEvent.objects.filter(action="inventory.end_drain").exists()
