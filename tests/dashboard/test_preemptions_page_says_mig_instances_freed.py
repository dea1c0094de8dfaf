"""The Preemptions page's "GPUs freed" cell of a victim stopped on a MIG flavor's nodes says
what it freed in that flavor's unit ("2 MIG instances"); a whole-GPU victim's stays "8 GPUs";
the page reads the nodes' flavors in one query, however many rows it shows.

The pool (``conftest``): h100 nodes n1 and n2, and here MIG node m1 of flavor
``a100-3g.40gb`` (8 A100 cards of two 3g.40gb instances each)."""

from __future__ import annotations

import re
from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from dashboard_pages import text
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from domain_builders import flavor, node
from two_teams import submit

from gpupool.accounting.actions import do_record_preemption

pytestmark = pytest.mark.django_db

MIG = "a100-3g.40gb"


@pytest.fixture
def mig_node(pool: Any) -> None:
    """MIG node m1 beside the h100 nodes."""
    mig = flavor(MIG, sharing="mig", gpu_model="A100-80GB", mig_profile="3g.40gb", gpu_memory_gb=40)
    node("m1", mig, gpus=8, mig_layout={"3g.40gb": 2})


def stopped(pool: Any, name: str, freed: int, nodes: list[str], minutes_ago: float) -> None:
    """vision's workload ``name`` stopped by a node failure on ``nodes``, freeing ``freed``."""
    do_record_preemption(
        submit(pool, name, pool.vision_queue, "vic"),
        reason="node-failure",
        at=timezone.now() - timedelta(minutes=minutes_ago),
        gpus_freed=freed,
        lost_gpu_hours=Decimal(1),
        nodes=nodes,
    )


def freed_cells(page: str) -> dict[str, str]:
    """Each listed victim's "GPUs freed" cell, by victim."""
    listed = page.split('id="history-title"')[1].split("</table>")[0]
    return {
        victim: cells[-2]
        for row in listed.split("<tr>")[2:]
        if (found := re.search(r"<code>vision/([^<]+)</code>", row))
        for victim, cells in [(found.group(1), re.findall(r'<td class="number">([^<]*)</td>', row))]
    }


def test_a_victim_on_a_mig_flavor_freed_mig_instances(
    pool: Any, page_as: Any, mig_node: None
) -> None:
    stopped(pool, "slices", 2, ["m1"], minutes_ago=20)
    stopped(pool, "whole", 8, ["n1"], minutes_ago=10)
    page = text(page_as("vic").get("/preemptions/"))
    assert freed_cells(page) == {"slices": "2 MIG instances", "whole": "8 GPUs"}


def test_the_nodes_flavors_are_read_once_whatever_the_rows(
    pool: Any, page_as: Any, mig_node: None
) -> None:
    stopped(pool, "slices-0", 2, ["m1"], minutes_ago=30)
    client = page_as("vic")
    with CaptureQueriesContext(connection) as few:
        client.get("/preemptions/")
    for index in range(1, 6):
        stopped(pool, f"slices-{index}", 1, ["m1"], minutes_ago=30 - index)
        stopped(pool, f"whole-{index}", 8, ["n2"], minutes_ago=20 - index)
    with CaptureQueriesContext(connection) as many:
        page = text(client.get("/preemptions/"))
    cells = freed_cells(page)
    assert (cells["slices-5"], cells["whole-5"]) == ("1 MIG instance", "8 GPUs")
    assert len(many) == len(few)
