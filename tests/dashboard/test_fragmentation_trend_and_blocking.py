"""The Fragmentation page's trend (the cycles' samples) and each pending gang linked to the
shape that blocks it ("waits although 20 GPUs are free: no domain has 16 free together")."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from typing import Any

from dashboard_pages import text
from django.utils import timezone

from gpupool.control.models import SchedulingCycle
from gpupool.dashboard.blocking import blocking_shape
from gpupool.inventory.queries import FlavorFragmentation, GangFit
from gpupool.workloads.actions import PodSetSpec, do_submit_workload


def figures(free: float, largest: int, fitting: dict[int, int]) -> FlavorFragmentation:
    """An h100 flavor's figures with ``free`` GPUs and gangs fitting as told."""
    return FlavorFragmentation(
        flavor="h100",
        nodes=4,
        domains=3,
        healthy_gpus=32,
        free_gpus=free,
        fragmented_gpus=2.0,
        stranded_gpus=0.0,
        largest_gang_gpus=largest,
        gangs=tuple(
            GangFit(size, max(1, size // 8), min(size, 8), n) for size, n in fitting.items()
        ),
    )


def test_a_gang_larger_than_any_free_block_is_blocked_by_the_shape() -> None:
    why = blocking_shape(Decimal(16), figures(20, 9, {8: 2, 16: 0, 72: 0}))
    assert why.kind == "shape" and why.gang_size == 16
    assert why.text == (
        "This 16-GPU job waits although 20 GPUs are free: no NVLink domain has 16 free "
        "together (the largest free block is 9 GPUs)."
    )


def test_a_gang_larger_than_what_is_free_waits_for_capacity() -> None:
    why = blocking_shape(Decimal(24), figures(20, 9, {16: 0, 72: 0}))
    assert why.kind == "capacity" and why.gang_size == 72
    assert "needs more than the 20 GPUs free" in why.text


def test_a_gang_that_fits_a_domain_is_not_held_back_by_the_shape() -> None:
    why = blocking_shape(Decimal(4), figures(20, 9, {4: 3}))
    assert why.kind == "fits" and why.gang_size == 4


def test_the_page_links_each_pending_gang_to_its_blocking_shape(pool: Any, page_as: Any) -> None:
    do_submit_workload(
        "big",
        queue=pool.nlp_queue,
        pod_sets=[PodSetSpec(count=2, gpus=8, flavor=pool.h100)],
        submitter=pool.users["max"],
    )
    do_submit_workload(
        "eight",
        queue=pool.nlp_queue,
        pod_sets=[PodSetSpec(count=1, gpus=8, flavor=pool.h100)],
        submitter=pool.users["max"],
    )
    page = text(page_as("max").get("/fragmentation/"))
    assert 'href="/workloads/nlp/big/"' in page
    assert "This 16-GPU job needs more than the 15 GPUs free" in page
    # no column of 16: no h100 node (each its own domain) holds a gang of 16
    assert 'href="#gang-16"' not in page and 'id="gang-16"' not in page
    assert "This 8-GPU job fits now across nodes" in page
    assert 'href="#gang-8"' in page and 'id="gang-8"' in page
    assert "nlp/big" not in text(page_as("vic").get("/fragmentation/"))


def test_the_trend_draws_the_cycles_samples(pool: Any, page_as: Any) -> None:
    # Over the page's window the trend keeps the last sample of each hour: 90 and 10 minutes
    # ago always fall in different hours (30 and 10 did only some of the time).
    for minutes, free in ((90, 12.0), (10, 7.0)):
        at = timezone.now() - timedelta(minutes=minutes)
        SchedulingCycle.objects.create(
            started_at=at,
            cluster_at=at,
            finished_at=at,
            status="succeeded",
            outcome={
                "queues": {},
                "fragmentation": {"h100": {"free": free, "fragmented": 1.5, "largest_gang": 7}},
            },
        )
    page = text(page_as("max").get("/fragmentation/"))
    assert 'id="trend-chart-figure"' in page and "largest gang in a domain" in page
    assert "[12.0, 7.0]" in page
