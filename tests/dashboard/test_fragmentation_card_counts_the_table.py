"""The Fragmentation page's "Free" card and its per-domain table count the same GPUs: the
card's free GPUs are the core's (``inventory.queries.flavor_fragmentation``), the table's
free GPUs and the nodes and domains they are on (``heatmap.free_spread``) are read off the
same rule (``statement.initial_state``). The card once said "on 40 nodes" of a flavor's every
node while the table showed free GPUs on 12 of them."""

from __future__ import annotations

from typing import Any

import pytest
from dashboard_pages import live, text
from domain_builders import node as db_node

from gpupool.dashboard.heatmap import domain_summaries, free_spread, gpu_rows
from gpupool.inventory.actions import do_set_node_cordoned
from gpupool.inventory.models import Node
from gpupool.inventory.queries import flavor_fragmentation
from gpupool.scheduler.cycle_state import Cycle
from gpupool.scheduler.types import (
    FlavorInfo,
    NodeInfo,
    PodPlacement,
    PodSetInfo,
    PolicyInfo,
    PriorityClassInfo,
    QueueInfo,
    Snapshot,
    WorkloadInfo,
)
from gpupool.workloads.actions import (
    PlacementSpec,
    PodSetSpec,
    do_submit_workload,
    do_transition_workload,
)

NOW = 1_800_000_000.0


def node(name: str, flavor: str, domain: str = "", **fields: Any) -> NodeInfo:
    """A 4-GPU node, its own NVLink domain unless told."""
    return NodeInfo(name, flavor, 4, 64_000, 512 * 1024, domain or name, **fields)


def running(name: str, flavor: str, *pods: PodPlacement, milli: int = 1000) -> WorkloadInfo:
    """A running workload of queue nlp placed as ``pods`` (one GPU each, or ``milli``)."""
    return WorkloadInfo(
        name,
        "nlp",
        "normal",
        (PodSetInfo(len(pods), 1, (flavor,), gpu_milli=milli),),
        0.0,
        state="running",
        placement=pods,
    )


def snapshot() -> Snapshot:
    """Whole GPUs (h100: a busy node, a broken one, a cordoned one, an empty two-node domain)
    and shared ones (l40s: a GPU partly used, one fully)."""
    return Snapshot(
        flavors=(FlavorInfo("h100"), FlavorInfo("l40s", sharing="shared")),
        nodes=(
            node("busy", "h100"),
            node("broken", "h100", unhealthy_gpus=frozenset({0, 1})),
            node("off", "h100", cordoned=True),
            node("full", "h100"),
            node("r1", "h100", "nvl"),
            node("r2", "h100", "nvl"),
            node("s1", "l40s"),
            node("s2", "l40s"),
        ),
        queues=(QueueInfo("root", None), QueueInfo("nlp", "root", "nlp")),
        priority_classes=(PriorityClassInfo("normal", 0, default=True),),
        workloads=(
            running("a", "h100", PodPlacement("busy", (0,)), PodPlacement("busy", (1,))),
            running("b", "h100", *(PodPlacement("full", (i,)) for i in range(4))),
            running("c", "h100", *(PodPlacement("r1", (i,)) for i in range(4))),
            running("d", "l40s", PodPlacement("s1", (0,), 400), milli=400),
            running("e", "l40s", *(PodPlacement("s2", (i,), 1000) for i in range(4)), milli=1000),
        ),
    )


@pytest.mark.parametrize("flavor", ["h100", "l40s"])
def test_the_cards_free_gpus_are_the_tables_and_on_the_nodes_it_lists(flavor: str) -> None:
    pool = snapshot()
    cycle = Cycle(pool, PolicyInfo(), NOW)
    (card,) = [f for f in flavor_fragmentation(cycle.cluster, {}) if f.flavor == flavor]
    shown = [row for row in gpu_rows(pool) if row.flavor == flavor]
    summaries = domain_summaries(shown)
    spread = free_spread(summaries)
    assert spread.gpus == pytest.approx(card.free_gpus)
    assert (spread.all_nodes, spread.all_domains) == (card.nodes, card.domains)
    with_free = [row.node for row in shown if any(cell.free_milli for cell in row.cells)]
    assert spread.nodes == len(with_free)
    assert spread.domains == sum(1 for summary in summaries if summary.free_gpus)
    if flavor == "h100":  # busy 2, broken 2, r2 4: not off (cordoned), full or r1
        assert (card.free_gpus, card.nodes, card.domains) == (8, 6, 5)
        assert (with_free, spread.domains) == (["broken", "busy", "r2"], 3)
    else:  # s1: 3 whole GPUs and 0.6 of the fourth; s2 full
        assert card.free_gpus == pytest.approx(3.6)
        assert (with_free, spread.domains) == (["s1"], 1)


def test_the_page_says_free_gpus_are_on_the_nodes_the_table_shows(pool: Any, page_as: Any) -> None:
    """``pool``: n1 (8 GPUs, one broken) and n2 (8); n3 is cordoned and n4 is full."""
    db_node("n3", pool.h100, gpus=8)
    do_set_node_cordoned(Node.objects.get(name="n3"), cordoned=True, acting_user=None)
    db_node("n4", pool.h100, gpus=8)
    workload = do_submit_workload(
        "big", queue=pool.nlp_queue, pod_sets=[PodSetSpec(count=1, gpus=8, flavor=pool.h100)]
    )
    do_transition_workload(
        workload,
        "admitted",
        reason="test",
        placements=[PlacementSpec("main", 0, Node.objects.get(name="n4"), list(range(8)))],
    )
    part = text(live(page_as("ada"), "/fragmentation/"))
    card = part.split("Free (of", 1)[1].split("</div>", 1)[0]
    assert "15 GPUs" in card
    assert "on 2 of 4 nodes (the table below)" in card  # each node its own domain
    table = part.split("Per node", 1)[1].split("</table>", 1)[0]
    free = {
        row.split("<td>", 1)[1].split("</td>", 1)[0]: row.split('<td class="number">')[3].split(
            "<", 1
        )[0]
        for row in table.split("<tr>")[2:]
    }
    assert free == {"n1": "7", "n2": "8", "n3": "0", "n4": "0"}
