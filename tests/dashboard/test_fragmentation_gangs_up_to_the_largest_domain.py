"""The Fragmentation page, its API and /metrics count a flavor's gangs, in its unit, only up
to what its largest NVLink domain could ever hold. The MIG flavor ``a100-3g.40gb`` of nodes m1
and m2 (8 A100 cards of two 3g.40gb instances each: 32 MIG instances in all, each node its
own domain of 16) lists gangs of 1 to 16 MIG instances. Before, every flavor listed gangs of
1, 2, 4, 8, 16 and 72, so this pool of 32 showed a gang of 72 MIG instances (4 x 16 + 1 x 8)
fitting "none" now, as if it could fit once work left."""

from __future__ import annotations

import re
from typing import Any

import pytest
from dashboard_pages import live, text
from django.test import Client
from django.utils import timezone
from domain_builders import MIG_FLAVOR, mig_beside, node
from rest_framework.test import APIClient

from gpupool.control.models import SchedulingCycle
from gpupool.control.queries import pool_policy, pool_snapshot
from gpupool.inventory.queries import fragmentation_sample
from gpupool.scheduler.cycle_state import Cycle

MIG = MIG_FLAVOR
SIZES = [1, 2, 4, 8, 16]  # of GANG_SIZES, those a node of 16 MIG instances holds


@pytest.fixture
def mig_pool(pool: Any) -> Any:
    """The pool with MIG nodes m1 and m2 beside the h100 nodes: 32 MIG instances, all free."""
    mig = mig_beside(pool)
    node("m2", mig, gpus=8, mig_layout={"3g.40gb": 2})
    return pool


def test_the_page_lists_no_gang_larger_than_the_largest_domain(mig_pool: Any, page_as: Any) -> None:
    page = text(live(page_as("max"), f"/fragmentation/?flavor={MIG}"))
    gangs = page.split('id="gangs-title"', 1)[1].split("</section>", 1)[0]
    assert [int(size) for size in re.findall(r'id="gang-(\d+)"', gangs)] == SIZES
    assert "72" not in gangs
    fit = gangs.split("How many fit at once", 1)[1].split("</tr>", 1)[0]
    assert re.findall(r'<td class="number">(\d+)</td>', fit) == ["32", "16", "8", "4", "2"]
    said = " ".join(re.sub(r"<[^>]+>", " ", gangs).split())
    assert (
        "The largest node has 16 healthy MIG instances, cordoned or not: a larger gang never "
        "fits in one, so the table shows none."
    ) in said


def test_the_api_and_the_metrics_say_the_pages_gangs_in_mig_instances(mig_pool: Any) -> None:
    client = APIClient()
    client.force_authenticate(mig_pool.users["vic"])
    answer = client.get("/api/v1/fragmentation/")
    assert answer.status_code == 200, answer.content
    figures = {row["flavor"]: row for row in answer.json()["flavors"]}[MIG]
    assert (figures["unit"], figures["healthy_gpus"]) == ("MIG instance", 32)
    assert (figures["largest_domain_gpus"], figures["largest_gang_gpus"]) == (16, 16)
    assert [gang["gpus"] for gang in figures["gangs"]] == SIZES
    # /metrics reads the sample a cycle records of its starting state (``control.loop``).
    database = pool_snapshot().value
    cycle = Cycle(database.snapshot, pool_policy(), database.now)
    now = timezone.now()
    SchedulingCycle.objects.create(
        started_at=now,
        cluster_at=now,
        finished_at=now,
        status="succeeded",
        outcome={"fragmentation": fragmentation_sample(cycle.cluster, cycle.placer.distributions)},
    )
    body = Client().get("/metrics").content.decode()
    labels = f'{{flavor="{MIG}",unit="MIG instance"}}'
    assert f"gpupool_flavor_largest_gang{labels} 16.0" in body
    assert f"gpupool_flavor_free{labels} 32.0" in body
