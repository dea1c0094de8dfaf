"""The nodes API said a node was cordoned (``cordoned``, ``state``) but not why or by whom: the
reason an admin gave was kept in the audit log only. Each node now carries ``cordon``: who
cordoned or drained it, when and why (the audit log's, read once for a list's nodes), or that
the cluster itself cordoned it; null when it is not cordoned."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from domain_builders import node
from resources_pool import pool

from gpupool.audit.models import AuditEvent
from gpupool.inventory.actions import do_set_node_cordoned
from gpupool.inventory.models import Flavor, Node

pytestmark = pytest.mark.django_db


@pytest.fixture
def resources(world: Any) -> dict[str, Any]:
    return pool(world)


def by_name(answer: Any) -> dict[str, Any]:
    """The listed nodes by name."""
    return {row["name"]: row for row in answer.json()["results"]}


def test_a_cordoned_node_says_who_cordoned_it_when_and_why(api_as: Any, resources: dict) -> None:
    answer = api_as("admin").post("/api/v1/nodes/n1/cordon/", {"reason": "XID 79"}, format="json")
    event = AuditEvent.objects.get(action="inventory.set_node_cordoned")
    at = f"{event.at:%Y-%m-%d %H:%M} UTC"
    want = {
        "in_cluster": False,
        "by": "ada",
        "reason": "XID 79",
        "drain": False,
        "words": f"cordoned by ada at {at}: XID 79",
    }
    assert {k: v for k, v in answer.json()["cordon"].items() if k != "at"} == want
    listed = by_name(api_as("member").get("/api/v1/nodes/"))
    assert listed["n1"]["cordon"] == answer.json()["cordon"]
    assert listed["n1"]["cordon"]["at"] is not None
    assert listed["n2"]["cordon"] is None
    assert api_as("member").get("/api/v1/nodes/n1/").json()["cordon"] == answer.json()["cordon"]


def test_a_drain_and_the_clusters_own_cordon_say_so(api_as: Any, resources: dict) -> None:
    api_as("admin").post("/api/v1/nodes/n1/drain/", {"reason": "RMA"}, format="json")
    Node.objects.filter(name="n2").update(cluster_exclusion="cordoned")
    listed = by_name(api_as("member").get("/api/v1/nodes/"))
    drained = listed["n1"]["cordon"]
    assert (drained["by"], drained["reason"], drained["drain"]) == ("ada", "RMA", True)
    assert drained["words"].startswith("drained by ada at ")
    assert listed["n2"]["cordon"] == {
        "in_cluster": True,
        "by": None,
        "at": None,
        "reason": "",
        "drain": False,
        "words": "cordoned in the cluster (kubectl cordon), not by gpupool",
    }


def test_the_list_reads_the_notes_in_one_query(api_as: Any, resources: dict, world: Any) -> None:
    client = api_as("member")
    do_set_node_cordoned(
        Node.objects.get(name="n1"), cordoned=True, acting_user=world.users["admin"]
    )
    with CaptureQueriesContext(connection) as few:
        client.get("/api/v1/nodes/")
    h100 = Flavor.objects.get(name="h100")
    for index in range(5):
        extra = node(f"more-{index}", h100, gpus=8, nvlink_domain=f"m{index}")
        do_set_node_cordoned(extra, cordoned=True, acting_user=world.users["admin"], reason="x")
    with CaptureQueriesContext(connection) as many:
        listed = by_name(client.get("/api/v1/nodes/"))
    assert listed["more-4"]["cordon"]["reason"] == "x"
    assert len(many) == len(few)
