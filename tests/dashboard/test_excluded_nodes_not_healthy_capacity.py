"""Finding 3: a node the cluster excludes (NotReady, unreachable, gone) gives no healthy
capacity, as the control loop's snapshot takes it (``control.snapshot.read_nodes``): the pages,
quota checks, approval impact and the cost roll-up's capacity samples read
``healthy_capacity``, which counted every uncordoned node. The Cluster page's problems filter
lists such a node, with why."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from dashboard_pages import text

from gpupool.accounting.actions import _observe_capacity
from gpupool.accounting.models import CapacitySample
from gpupool.inventory.models import Flavor, Node, healthy_capacity


def test_a_not_ready_or_gone_node_gives_no_healthy_capacity(pool: Any) -> None:
    h100 = Flavor.objects.get(name="h100")
    assert healthy_capacity(h100) == 15  # n1's 7 healthy GPUs and n2's 8
    Node.objects.filter(name="n2").update(cluster_exclusion="not Ready")
    assert healthy_capacity(h100) == 7
    Node.objects.filter(name="n2").update(
        cluster_exclusion="gone from the cluster", gone_at=datetime(2026, 1, 1, tzinfo=UTC)
    )
    assert healthy_capacity(h100) == 7
    Node.objects.filter(name="n2").update(cluster_exclusion="", gone_at=None)
    assert healthy_capacity(h100) == 15


def test_the_roll_ups_capacity_sample_leaves_an_excluded_node_out(pool: Any) -> None:
    Node.objects.filter(name="n2").update(cluster_exclusion="not Ready")
    _observe_capacity(datetime(2026, 1, 1, tzinfo=UTC))
    assert CapacitySample.objects.get(flavor__name="h100").healthy_gpus == 7


def test_the_problems_filter_lists_an_excluded_node_with_why(pool: Any, page_as: Any) -> None:
    Node.objects.filter(name="n2").update(cluster_exclusion="not Ready")
    page = text(page_as("ada").get("/cluster/?flavor=h100&show=problems"))
    assert 'id="node-n2"' in page
    row = page.split('id="node-n2"', 1)[1].split("</tr>", 1)[0]
    assert "the cluster takes no pods here: not Ready" in row
    assert 'id="node-n1"' in page  # its broken GPU


def test_the_cluster_summary_counts_without_the_excluded_node_and_says_so(
    pool: Any, page_as: Any
) -> None:
    Node.objects.filter(name="n2").update(cluster_exclusion="not Ready")
    page = text(page_as("ada").get("/cluster/"))
    card = page.split('<p class="label">h100</p>', 1)[1].split("</div>", 1)[0]
    assert '<p class="value">7 GPUs</p>' in card
    assert "1 excluded by the cluster" in card
