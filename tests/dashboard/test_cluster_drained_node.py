"""A drained node (cordoned, empty, awaiting uncordon) says so on the Cluster page and in the
nodes API, in the same word (``Node.state``), and an admin puts it back in service."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from dashboard_pages import text

from gpupool.inventory.actions import do_drain_node, do_record_drained
from gpupool.inventory.models import Node

AT = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)


def drained(name: str = "n2") -> Node:
    """Drain the node and have the loop find it empty."""
    do_drain_node(Node.objects.get(name=name), acting_user=None, reason="maintenance")
    do_record_drained({name}, at=AT)
    return Node.objects.get(name=name)


def test_the_page_and_the_api_call_an_empty_drained_node_drained(pool: Any, page_as: Any) -> None:
    do_drain_node(Node.objects.get(name="n1"), acting_user=None, reason="still busy")
    drained("n2")
    client = page_as("ada")
    page = text(client.get("/cluster/"))
    n1, n2 = page.split('id="node-n1"', 1)[1], page.split('id="node-n2"', 1)[1]
    assert ">draining</span>" in n1.split("</tr>", 1)[0]
    row = n2.split("</tr>", 1)[0]
    assert ">drained</span>" in row and "draining" not in row
    assert "drained: empty, and cordoned until an admin uncordons it" in row
    assert "Uncordon: back in service" in row
    api = client.get("/api/v1/nodes/").json()
    states = {item["name"]: item["state"] for item in api["results"]}
    assert states == {"n1": "draining", "n2": "drained"}
    assert client.get("/api/v1/nodes/n2/").json()["drained_at"] == "2026-12-06T12:00:00Z"


def test_uncordoning_a_drained_node_from_the_page_puts_it_back_in_service(
    pool: Any, page_as: Any
) -> None:
    drained("n2")
    response = page_as("ada").post("/cluster/nodes/n2/cordon/", {"reason": "done"}, follow=True)
    assert "n2 is uncordoned after its drain: back in service." in text(response)
    node = Node.objects.get(name="n2")
    assert (node.state, node.cordoned, node.drained_at) == ("ready", False, None)


def test_draining_a_node_again_says_nothing_changed_not_that_its_work_is_evicted(
    pool: Any, page_as: Any
) -> None:
    # (Walk s23: a second "Yes, drain" -- a second tab, the back button -- said "n2 is
    # draining: ... the control loop evicts its workloads", also of a node already drained,
    # where the action changes nothing and audits nothing.)
    drained("n2")
    do_drain_node(Node.objects.get(name="n1"), acting_user=None, reason="firmware")
    client = page_as("ada")
    for name, state in (("n2", "drained"), ("n1", "draining")):
        answer = client.post(f"/cluster/nodes/{name}/drain/", {"reason": ""}, follow=True)
        said = [str(message) for message in answer.context["messages"]]
        assert said == [f"{name} was already {state}: nothing was changed."], said
        assert Node.objects.get(name=name).state == state
