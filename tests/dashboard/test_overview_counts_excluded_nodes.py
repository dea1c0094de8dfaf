"""The Overview's capacity card says how many of a flavor's nodes the cluster excludes (not
Ready, unreachable, gone: no healthy capacity, ``inventory.models.takes_pods``) beside those
cordoned, with the Cluster page's count (``views.flavors_with_nodes``): a node out of the pool
no longer hides behind "N nodes"."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from dashboard_pages import live, text

from gpupool.inventory.models import Node


def card(page: str, flavor: str) -> str:
    """The capacity card of ``flavor`` on a page."""
    return page.split(f'<p class="label">{flavor}</p>', 1)[1].split("</div>", 1)[0]


def test_the_overview_counts_the_nodes_the_cluster_excludes_as_the_cluster_page(
    pool: Any, page_as: Any
) -> None:
    client = page_as("ada")
    assert "excluded by the cluster" not in card(text(live(client, "/overview/")), "h100")
    Node.objects.filter(name="n2").update(cluster_exclusion="not Ready")
    overview = card(text(live(client, "/overview/")), "h100")
    assert "2 nodes, 1 excluded by the cluster" in overview
    assert "1 excluded by the cluster" in card(text(client.get("/cluster/")), "h100")
    Node.objects.filter(name="n1").update(cordoned=True)
    Node.objects.filter(name="n2").update(
        cluster_exclusion="gone from the cluster", gone_at=datetime(2026, 1, 1, tzinfo=UTC)
    )
    overview = card(text(live(client, "/overview/")), "h100")
    assert "2 nodes, 1 cordoned, 1 excluded by the cluster" in overview
