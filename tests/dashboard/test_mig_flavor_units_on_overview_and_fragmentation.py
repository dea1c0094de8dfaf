"""The Overview and the Fragmentation page say each flavor's figures in its own unit: a MIG
flavor's capacity and use are its MIG instances (as ``gpupool nodes`` and the nodes API say
them: ``mig_instances``), never called GPUs and never added to a whole-GPU flavor's GPUs.

The pool: the two teams' h100 nodes n1 (8 GPUs, one broken) and n2 (8), and MIG node m1 of
flavor ``a100-3g.40gb``: 8 A100 cards of two 3g.40gb instances each, card 5 broken, so 14
healthy MIG instances; nlp runs ``slices`` on three of them."""

from __future__ import annotations

import json
import re
from datetime import timedelta
from typing import Any

import pytest
from dashboard_pages import live, text
from django.utils import timezone
from domain_builders import MIG_FLAVOR, flavor, mig_beside, node

from gpupool.control.models import SchedulingCycle
from gpupool.dashboard import charts
from gpupool.inventory.models import Node
from gpupool.workloads.actions import (
    PlacementSpec,
    PodSetSpec,
    do_submit_workload,
    do_transition_workload,
)

MIG = MIG_FLAVOR


@pytest.fixture
def mig_pool(pool: Any) -> Any:
    """The pool with MIG node m1 beside the h100 nodes, and nlp's work on three instances."""
    mig = mig_beside(pool, unhealthy_gpus={5: "XID 79"})
    workload = do_submit_workload(
        "slices", queue=pool.nlp_queue, pod_sets=[PodSetSpec(count=1, gpus=3, flavor=mig)]
    )
    do_transition_workload(
        workload,
        "admitted",
        reason="test",
        placements=[PlacementSpec("main", 0, Node.objects.get(name="m1"), [0, 1, 2])],
    )
    return pool


def cycle(minutes_ago: float, allocated: dict[str, dict[str, float]]) -> SchedulingCycle:
    """A succeeded cycle's record as the loop writes it: per queue, per flavor, allocated."""
    at = timezone.now() - timedelta(minutes=minutes_ago)
    return SchedulingCycle.objects.create(
        started_at=at,
        cluster_at=at,
        finished_at=at + timedelta(seconds=1),
        status="succeeded",
        outcome={
            "queues": {
                name: {
                    of: {"allocated": value, "borrowed": 0.0, "lent": 0.0}
                    for of, value in flavors.items()
                }
                for name, flavors in allocated.items()
            }
        },
    )


def figure(page: str, chart: str) -> dict[str, Any]:
    found = re.search(rf'<script id="{chart}-figure" type="application/json">(.*?)</script>', page)
    assert found is not None, chart
    return dict(json.loads(found.group(1)))


def card(page: str, label: str) -> str:
    """The card whose label is ``label``: its value and detail, as text."""
    after = page.split(f'<p class="label">{label}</p>', 1)[1].split("</div>", 1)[0]
    return re.sub(r"<[^>]+>", " ", after).split()


def test_the_overview_counts_a_mig_flavor_in_mig_instances_apart_from_gpus(
    mig_pool: Any, page_as: Any
) -> None:
    cycle(30, {"nlp": {"h100": 8, MIG: 2}, "vision": {"h100": 4}})
    cycle(5, {"nlp": {"h100": 4, MIG: 3}, "vision": {"h100": 7}})
    page = text(live(page_as("max"), "/overview/"))
    # Healthy capacity: h100's 15 GPUs, the MIG flavor's 14 instances (not "14 GPUs").
    capacity = page.split('id="capacity-title"', 1)[1].split('id="utilisation-title"', 1)[0]
    assert card(capacity, "h100")[:2] == ["15", "GPUs"]
    assert card(capacity, MIG)[:3] == ["14", "MIG", "instances"]
    assert "14 GPUs" not in page
    # Allocated now: each flavor's share of its own capacity, in its unit.
    allocated = page.split('id="utilisation-title"', 1)[1]
    assert card(allocated, MIG)[:5] == ["21%", "3", "MIG", "instances", "allocated"]
    assert card(allocated, "h100")[:3] == ["73%", "11", "GPUs"]
    # Over time: a stacked figure of GPUs with the h100 series only, and one of MIG
    # instances apart; no band stacks instances on GPUs.
    gpus = figure(page, "allocation-chart")
    instances = figure(page, "mig-allocation-chart")
    assert [trace["name"] for trace in gpus["data"]] == ["nlp · h100", "vision · h100"]
    assert [trace["name"] for trace in instances["data"]] == [f"nlp · {MIG}"]
    assert gpus["layout"]["yaxis"]["title"]["text"] == "GPUs allocated"
    assert instances["layout"]["yaxis"]["title"]["text"] == "MIG instances allocated"
    assert instances["data"][0]["y"] == [2.0, 3.0]
    assert "MIG instances<extra>" in instances["data"][0]["hovertemplate"]
    assert sum(trace["y"][-1] for trace in gpus["data"]) == 11  # the h100 GPUs alone
    assert ">GPUs allocated per team and flavor, last 24 h</h2>" in page
    assert ">MIG instances allocated per team and MIG flavor, last 24 h</h2>" in page
    latest = page.split('id="mig-allocation-chart-title"', 1)[1].split("</table>", 1)[0]
    assert "MIG instances allocated at the last cycle" in latest
    assert f'<td>nlp · {MIG}</td><td class="number">3</td>' in latest


def test_a_pool_of_mig_alone_draws_no_gpu_chart(pool: Any, page_as: Any) -> None:
    mig = flavor(MIG, sharing="mig", gpu_model="A100-80GB", mig_profile="3g.40gb", gpu_memory_gb=40)
    node("m1", mig, gpus=8, mig_layout={"3g.40gb": 2})
    cycle(5, {"nlp": {MIG: 3}})
    page = text(live(page_as("max"), "/overview/"))
    assert 'id="mig-allocation-chart-figure"' in page
    assert 'id="allocation-chart-figure"' not in page
    assert "GPUs allocated per team" not in page


def test_fragmentation_of_a_mig_flavor_says_mig_instances(mig_pool: Any, page_as: Any) -> None:
    page = text(page_as("vic").get(f"/fragmentation/?flavor={MIG}"))
    assert f"Every {MIG} MIG instance, by node</h2>" in page
    assert f"Every {MIG} GPU" not in page
    # The cards: 14 healthy instances (card 5's two are broken), 3 held by nlp: 11 free.
    assert "Free (of 14 healthy MIG instances)" in page
    assert '<p class="value">11 MIG instances</p>' in page
    # Each cell is an instance, named with the card it is cut from; nlp holds instances.
    assert "m1 MIG instance 2 of GPU 1 (domain m1): nlp 1 MIG instance" in page
    assert "m1 MIG instance 11 of GPU 5 (domain m1): broken: XID 79" in page
    heatmap = figure(page, "gpu-heatmap")
    assert heatmap["layout"]["xaxis"]["title"]["text"] == "MIG instance"
    table = page.split("<thead>", 2)[2].split("</table>", 1)[0]
    assert '<th scope="col" class="number">MIG instances</th>' in table
    assert "nlp 3 MIG instances" in table
    gangs = page.split('id="gangs-title"', 1)[1].split("</thead>", 1)[0]
    assert "2 MIG instances</th>" in gangs and "GPU" not in gangs.split("</h2>", 1)[1]


def test_the_whole_gpu_flavor_keeps_its_gpus_beside_a_mig_one(mig_pool: Any, page_as: Any) -> None:
    # With as many instances as h100 GPUs (16 each), the page opens on the flavor with the
    # most physical GPUs: h100's 16 cards, not m1's 8 (whose instances are no GPUs).
    page = text(page_as("vic").get("/fragmentation/"))
    assert "Every h100 GPU, by node</h2>" in page
    assert "Free (of 15 healthy GPUs)" in page
    assert "n2 GPU 0 (domain n2): free" in page
    assert "MIG instance" not in page.split('aria-label="Flavors"', 1)[1]


def test_the_fragmentation_trend_says_its_unit() -> None:
    trend = charts.fragmentation_trend_figure(["t"], {"free": [3.0]}, unit="MIG instances")
    assert trend["layout"]["yaxis"]["title"]["text"] == "MIG instances"
    assert trend["data"][0]["hovertemplate"].endswith(" MIG instances<extra></extra>")
