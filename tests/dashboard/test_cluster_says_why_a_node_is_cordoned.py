"""The Cluster page showed a node cordoned without saying why or by whom: the reason an admin
gave was kept in the audit log only. Each cordoned node's row now says who cordoned (or
drained) it, when and why, read from the audit log in one query for the page's nodes; a node
the cluster itself cordoned (kubectl cordon) says so."""

from __future__ import annotations

import re
from typing import Any

from dashboard_pages import text
from django.db import connection
from django.test.utils import CaptureQueriesContext
from domain_builders import node

from gpupool.audit.models import AuditEvent
from gpupool.inventory.actions import do_set_node_cordoned
from gpupool.inventory.models import Node


def note_of(page: str, name: str) -> str:
    """The cordon note on node ``name``'s row, its tags but ``<time>`` dropped."""
    row = page.split(f'<tr id="node-{name}">', 1)[1].split("</tr>", 1)[0]
    found = re.search(r'<div class="cordon-note">(.*?)</div>', row, re.S)
    assert found is not None, row
    return re.sub(r"<time [^>]*>[^<]*</time>", "TIME", found.group(1))


def time_of(page: str, name: str) -> str:
    """The moment the cordon note on node ``name``'s row gives, as written for the browser."""
    row = page.split(f'<tr id="node-{name}">', 1)[1].split("</tr>", 1)[0]
    found = re.search(r'<div class="cordon-note">.*?<time datetime="([^"]+)"', row, re.S)
    assert found is not None, row
    return found.group(1)


def test_a_cordoned_node_says_who_cordoned_it_when_and_why(pool: Any, page_as: Any) -> None:
    page_as("ada").post("/cluster/nodes/n2/cordon/", {"cordoned": "on", "reason": "firmware"})
    event = AuditEvent.objects.get(action="inventory.set_node_cordoned")
    page = text(page_as("max").get("/cluster/"))  # a member reads it too
    assert note_of(page, "n2") == "cordoned by ada at TIME: firmware"
    assert time_of(page, "n2") == event.at.isoformat()
    assert 'class="cordon-note"' not in page.split('<tr id="node-n1">', 1)[1].split("</tr>")[0]


def test_the_latest_cordon_is_the_one_shown(pool: Any, page_as: Any) -> None:
    client = page_as("ada")
    client.post("/cluster/nodes/n2/cordon/", {"cordoned": "on", "reason": "first"})
    client.post("/cluster/nodes/n2/cordon/", {"reason": "fixed"})  # uncordoned
    do_set_node_cordoned(Node.objects.get(name="n2"), cordoned=True, acting_user=None)
    assert note_of(text(client.get("/cluster/")), "n2") == (
        "cordoned by the system at TIME (no reason given)"
    )


def test_a_drained_node_says_who_drained_it_and_why(pool: Any, page_as: Any) -> None:
    client = page_as("ada")
    client.post("/cluster/nodes/n2/cordon/", {"cordoned": "on", "reason": "flaky"})
    client.post("/cluster/nodes/n2/drain/", {"reason": "RMA"})
    assert note_of(text(client.get("/cluster/")), "n2") == "drained by ada at TIME: RMA"


def test_a_node_cordoned_in_the_cluster_says_so(pool: Any, page_as: Any) -> None:
    Node.objects.filter(name="n2").update(cluster_exclusion="cordoned")
    page = text(page_as("ada").get("/cluster/"))
    assert note_of(page, "n2") == "cordoned in the cluster (kubectl cordon), not by gpupool"


def test_the_notes_are_read_in_one_query_for_the_page(pool: Any, page_as: Any) -> None:
    client = page_as("ada")
    client.post("/cluster/nodes/n2/cordon/", {"cordoned": "on", "reason": "one"})
    with CaptureQueriesContext(connection) as few:
        assert client.get("/cluster/").status_code == 200
    for index in range(6):
        extra = node(f"more-{index}", pool.h100, gpus=8)
        do_set_node_cordoned(extra, cordoned=True, acting_user=pool.users["ada"], reason="more")
    with CaptureQueriesContext(connection) as many:
        page = text(client.get("/cluster/"))
    assert note_of(page, "more-5") == "cordoned by ada at TIME: more"
    assert len(many) == len(few)
