"""A large queue tree comes folded on the Queues page: its first level and the viewer's own
branches open, the rest opened on demand (``?open=``), read with a fixed number of queries;
the fairness explainer still names every starved or borrowing team."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from dashboard_pages import live, text
from django.db import connection
from django.test.utils import CaptureQueriesContext
from domain_builders import queue, quota

from gpupool.dashboard import views
from gpupool.quotas.queries import QueueUsage
from gpupool.scheduler.shares import QueueShare


@pytest.fixture
def labs(pool: Any, monkeypatch: Any) -> Any:
    """Under the pool's root, ``labs`` with ``vision-lab`` (vision's second queue, 2 / 4 / 8)
    and ``labs-spare``; trees of more than 3 queues are folded."""
    monkeypatch.setattr(views, "QUEUES_UNFOLDED_UP_TO", 3)
    labs = queue("labs", parent=pool.nlp_queue.parent)
    lab = queue("vision-lab", parent=labs, tenant=pool.vision_queue.tenant)
    quota(lab, pool.h100, 2, 4, 8)
    queue("labs-spare", parent=labs)
    return labs


def shown(page: str) -> set[str]:
    """The queues whose rows the page shows."""
    return {part.split('"', 1)[0] for part in page.split('<tr data-queue="')[1:]} | {
        part.split('"', 1)[0] for part in page.split('<tr class="mine" data-queue="')[1:]
    }


def test_a_small_tree_is_shown_whole(pool: Any, page_as: Any) -> None:
    page = text(page_as("max").get("/queues/"))
    assert shown(page) == {"pool", "nlp", "vision"}
    assert "data-folded" not in page and "data-toggle" not in page


def test_a_large_tree_opens_its_first_level_and_the_viewers_branches(
    labs: Any, page_as: Any
) -> None:
    member_of_nlp = text(page_as("max").get("/queues/"))
    assert shown(member_of_nlp) == {"pool", "nlp", "vision", "labs"}
    assert "The tree has 6 queues" in member_of_nlp
    assert 'data-toggle="labs" aria-expanded="false"' in member_of_nlp
    assert "+2 queues" in member_of_nlp
    member_of_vision = text(page_as("vic").get("/queues/"))  # vision-lab is under labs
    assert shown(member_of_vision) == {"pool", "nlp", "vision", "labs", "vision-lab", "labs-spare"}
    assert 'data-toggle="labs" aria-expanded="true"' in member_of_vision


def test_a_folded_queue_opens_and_closes_by_its_link(labs: Any, page_as: Any) -> None:
    client = page_as("max")
    # the link says every queue open after it: the root, open by default, and labs
    assert '<a href="?flavor=h100&amp;open=labs,pool"' in text(client.get("/queues/?flavor=h100"))
    opened = text(live(client, "/queues/?flavor=h100&open=labs"))
    assert "<html" not in opened
    assert {"labs-spare", "vision-lab"} <= shown(opened)
    assert "vision-lab" in opened and '<td class="number" data-level="guarantee">2 GPUs' in opened
    assert '<a href="?flavor=h100&amp;open=pool" hx-boost="true" data-toggle="labs"' in opened
    closed = text(client.get("/queues/?flavor=h100&open="))  # nothing open, not even the root
    assert shown(closed) == {"pool"}
    assert '?flavor=h100&amp;open=labs"' in text(client.get("/queues/?open=labs"))  # keeps it


def test_a_folded_tree_reads_the_same_queries_however_many_queues_it_hides(
    labs: Any, page_as: Any
) -> None:
    client = page_as("max")
    client.get("/queues/")  # the pool's shape and shares, cached per cycle
    with CaptureQueriesContext(connection) as before:
        client.get("/queues/")
    for index in range(20):
        queue(f"lab-{index:02d}", parent=labs)
    with CaptureQueriesContext(connection) as after:
        page = text(client.get("/queues/"))
    assert "+22 queues" in page
    assert len(after) == len(before)


def test_the_explainer_names_every_borrowing_team_even_folded_away(labs: Any) -> None:
    usage = QueueUsage(
        shares={"vision-lab": {"h100": QueueShare(6000, 2000, 0)}},
        cycle_id=None,
        at=None,
        unavailable="",
    )
    flavor = labs.quotas.model.objects.get(queue__name="vision-lab").flavor
    verdicts = {
        v.queue: v.kind for v in views.fairness_verdicts(flavor, usage, {"nlp"}, Decimal(6))
    }
    assert verdicts == {"nlp": "within", "vision-lab": "borrowing"}  # vision: within, folded
    everyone = views.fairness_verdicts(flavor, usage, {"nlp", "vision", "vision-lab"}, Decimal(6))
    assert {v.queue for v in everyone} == {"nlp", "vision", "vision-lab"}
    assert Decimal(4) == labs.children.get(name="vision-lab").quotas.get().deserved
