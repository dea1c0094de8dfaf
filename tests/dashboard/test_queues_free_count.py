"""The Queues page's "though N GPUs of this flavor are free" counts the GPUs the core counts
free (the Fragmentation page's "Free" card). Work holding a GPU since marked broken held it in
the page's count twice -- the healthy capacity had left it out already -- and the page said
one GPU fewer free than the Fragmentation page."""

from __future__ import annotations

from typing import Any

from dashboard_pages import text
from django.core.cache import cache

from gpupool.inventory.models import Node
from gpupool.workloads.actions import (
    PlacementSpec,
    PodSetSpec,
    do_submit_workload,
    do_transition_workload,
)


def test_a_broken_gpu_that_work_holds_is_not_taken_off_the_free_count_twice(
    pool: Any, page_as: Any
) -> None:
    """``pool``: n1 (8 GPUs, GPU 3 broken) and n2 (8). vision runs 8 GPUs on n1, GPU 3
    among them; nlp waits for 8 with all of n2 free: 8 free, not 7."""
    busy = do_submit_workload(
        "busy", queue=pool.vision_queue, pod_sets=[PodSetSpec(count=1, gpus=8, flavor=pool.h100)]
    )
    do_transition_workload(
        busy,
        "admitted",
        reason="test",
        placements=[PlacementSpec("main", 0, Node.objects.get(name="n1"), list(range(8)))],
    )
    do_transition_workload(busy, "running", reason="test")
    do_submit_workload(
        "wants", queue=pool.nlp_queue, pod_sets=[PodSetSpec(count=2, gpus=8, flavor=pool.h100)]
    )
    cache.clear()
    page = text(page_as("ada").get("/queues/?flavor=h100"))
    assert "though 8 GPUs of this flavor are free" in page, page.split("though", 1)[-1][:200]
