"""The Fragmentation page's "what blocks this job" on a shared flavor: a pod asking a share of
one GPU needs that much free on one GPU, not whole GPUs together in an NVLink domain. The page
said a 0.81-GPU notebook "waits although 3.19 GPUs are free: no NVLink domain has 0.81 free
together (the largest free block is 0 GPUs)" while a GPU had 1.0 free."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from dashboard_pages import text
from domain_builders import flavor, node, quota

from gpupool.dashboard.blocking import blocking_shape
from gpupool.inventory.models import Node
from gpupool.inventory.queries import FlavorFragmentation, flavor_fragmentation
from gpupool.scheduler.statement import ClusterState
from gpupool.scheduler.types import NodeInfo
from gpupool.workloads.actions import (
    PlacementSpec,
    PodSetSpec,
    do_submit_workload,
    do_transition_workload,
)


def shared(free: float, most: float) -> FlavorFragmentation:
    """An l40s-shared flavor with ``free`` GPUs free, ``most`` of them on one GPU, and no GPU
    wholly free in any domain (every GPU has a pod on it)."""
    return FlavorFragmentation(
        flavor="l40s-shared",
        nodes=2,
        domains=2,
        healthy_gpus=8,
        free_gpus=free,
        fragmented_gpus=0.0,
        stranded_gpus=0.0,
        largest_gang_gpus=0,
        gangs=(),
        most_free_on_one_gpu=most,
    )


def test_a_share_that_one_gpu_has_free_is_not_held_back_by_the_shape() -> None:
    why = blocking_shape(Decimal("0.81"), shared(3.19, 0.9), Decimal("0.81"))
    assert why.kind == "fits", why
    assert "its pods ask 0.81 of a GPU each and a GPU has 0.9 GPUs free" in why.text


def test_a_share_no_one_gpu_has_free_is_blocked_by_the_shape() -> None:
    why = blocking_shape(Decimal("0.81"), shared(3.19, 0.5), Decimal("0.81"))
    assert why.kind == "shape", why
    assert why.text == (
        "This 0.81-GPU job waits although 3.19 GPUs are free: no GPU has 0.81 free (the most "
        "free on one GPU is 0.5 GPUs)."
    )


def test_shares_beyond_what_is_free_wait_for_capacity() -> None:
    why = blocking_shape(Decimal("4"), shared(3.19, 0.9), Decimal("0.5"))
    assert why.kind == "capacity", why


def test_the_flavors_figures_give_the_most_free_on_one_gpu() -> None:
    """Two GPUs of a node, 0.25 and 0.6 used, and a node whose GPUs are another scheduler's:
    the most free on one GPU is 0.75, and no GPU is wholly free."""
    nodes = (
        NodeInfo("s1", "l40s-shared", 2, 0, 0, "s1"),
        NodeInfo("s2", "l40s-shared", 2, 0, 0, "s2", foreign_gpus=frozenset({0, 1})),
    )
    cluster = ClusterState(nodes, {"s1": ({0: 250, 1: 600}, 0, 0)})
    (figures,) = flavor_fragmentation(cluster, {})
    assert figures.most_free_on_one_gpu == 0.75
    assert figures.largest_gang_gpus == 0


def test_the_page_judges_a_shared_pod_by_one_gpus_rest(pool: Any, page_as: Any) -> None:
    """A 4-GPU shared node, every GPU 0.3 used by vision: a 0.5-GPU notebook of nlp is not
    held back by the shape (each GPU has 0.7 free); a whole-GPU-sized share would be."""
    l40s = flavor("l40s-shared", sharing="shared", gpu_memory_gb=48)
    node("s1", l40s, gpus=4)
    quota(pool.nlp_queue, l40s, 0, 2, 2)
    quota(pool.vision_queue, l40s, 0, 2, 2)
    busy = do_submit_workload(
        "busy",
        queue=pool.vision_queue,
        pod_sets=[PodSetSpec(count=4, gpus=1, gpu_milli=300, flavor=l40s)],
    )
    do_transition_workload(
        busy,
        "admitted",
        reason="test",
        placements=[
            PlacementSpec("main", i, Node.objects.get(name="s1"), [i], milli=300) for i in range(4)
        ],
    )
    do_submit_workload(
        "notebook",
        queue=pool.nlp_queue,
        pod_sets=[PodSetSpec(count=1, gpus=1, gpu_milli=500, flavor=l40s)],
        submitter=pool.users["max"],
    )
    page = text(page_as("max").get("/fragmentation/?flavor=l40s-shared"))
    assert 'href="/workloads/nlp/notebook/"' in page
    assert "its pods ask 0.5 of a GPU each and a GPU has 0.7 GPUs free" in page
    assert "no NVLink domain has 0.5 free together" not in page
    assert "See gangs of 1 GPU</a>" in page  # (it said "1 GPUs")
