"""``gpupool nodes`` says why a cordoned node is cordoned, as the nodes API's ``cordon`` note
does (who cordoned or drained it, when and why; or that the cluster cordoned it), its moment
written as the client writes moments (``when``). It said only "cordoned: no new placements"."""

from __future__ import annotations

import json
from typing import Any

import pytest
from client_cli import run
from domain_builders import flavor, node, user

from gpupool.client.main import when
from gpupool.inventory.actions import do_set_node_cordoned
from gpupool.inventory.models import Node

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def pool(live_client: Any) -> None:
    """h100 nodes: n1 cordoned by ada (XID storm), n2 cordoned in the cluster (kubectl
    cordon), n3 ready; ada, an admin, is logged in."""
    h100 = flavor("h100")
    for name in ("n1", "n2", "n3"):
        node(name, h100, gpus=8)
    ada = user("ada", admin=True)
    do_set_node_cordoned(
        Node.objects.get(name="n1"), cordoned=True, acting_user=ada, reason="XID storm"
    )
    Node.objects.filter(name="n2").update(cluster_exclusion="cordoned")
    live_client(ada)


def test_nodes_says_who_cordoned_a_node_when_and_why(pool: None) -> None:
    status, out, err = run("nodes")
    assert (status, err) == (0, "")
    rows = {line.split()[0]: line for line in out.splitlines()[1:]}
    status, listed, _ = run("--json", "nodes")
    cordon = {n["name"]: n["cordon"] for n in json.loads(listed)}
    assert cordon["n1"]["by"] == "ada" and cordon["n3"] is None
    assert rows["n1"].endswith(f"cordoned by ada at {when(cordon['n1']['at'])}: XID storm")
    assert rows["n2"].endswith("cordoned in the cluster (kubectl cordon), not by gpupool")
    assert "cordoned by" not in rows["n3"] and rows["n3"].endswith("-")
