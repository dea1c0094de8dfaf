"""``gpupool nodes`` on a MIG node says its physical GPUs and the MIG instances they give, the
unit its flavor's quotas and capacity count in (DESIGN section 2: MIG profiles are flavors of
their own), as the nodes API does (``mig_instances``, ``healthy_mig_instances``; null on other
nodes). The pages count the same instances (``inventory.models.healthy_capacity``)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from client_cli import run
from domain_builders import flavor, node, tenant, user

from gpupool.inventory.models import Flavor, healthy_capacity

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def pool(live_client: Any) -> None:
    """MIG node m1 (8 A100 cards of two 3g.40gb instances each, card 5 broken) and h100 node
    n1 (8 GPUs); max, a member of tenant nlp, is logged in."""
    mig = flavor(
        "a100-3g.40gb",
        sharing="mig",
        gpu_model="A100-80GB",
        mig_profile="3g.40gb",
        gpu_memory_gb=40,
    )
    node("m1", mig, gpus=8, mig_layout={"3g.40gb": 2}, unhealthy_gpus={5: "XID 79"})
    node("n1", flavor("h100"), gpus=8)
    member = user("max")
    tenant("nlp", lead=user("lena"), members=(member,), namespaces=("nlp",))
    live_client(member)


def test_a_mig_node_shows_its_gpus_and_the_mig_instances_they_give(pool: None) -> None:
    status, out, err = run("nodes")
    assert status == 0, err
    rows = {line.split()[0]: line for line in out.splitlines()[1:]}
    assert "7/8 (14/16 MIG instances)" in rows["m1"]
    assert rows["n1"].split()[:4] == ["n1", "h100", "ready", "8/8"]
    assert "MIG" not in rows["n1"]
    # The flavor's healthy capacity, as the pages count it, is the same instances.
    assert healthy_capacity(Flavor.objects.get(name="a100-3g.40gb")) == 14


def test_the_nodes_api_gives_the_mig_instances_and_null_elsewhere(pool: None) -> None:
    status, out, err = run("nodes", "--json")
    assert status == 0, err
    by_name = {row["name"]: row for row in json.loads(out)}
    assert (by_name["m1"]["healthy_gpus"], len(by_name["m1"]["gpus"])) == (7, 8)
    assert (by_name["m1"]["healthy_mig_instances"], by_name["m1"]["mig_instances"]) == (14, 16)
    assert (by_name["n1"]["healthy_mig_instances"], by_name["n1"]["mig_instances"]) == (None, None)
