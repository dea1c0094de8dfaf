"""The Fragmentation page's sentence of what blocks a pending gang speaks its flavor's unit: on
a MIG flavor every amount is in MIG instances (the figures it is judged against count them), as
the page's cards, table and heatmap say them; never "GPUs"."""

from __future__ import annotations

from decimal import Decimal

from gpupool.dashboard.blocking import CAPACITY, FITS, SHAPE, blocking_shape
from gpupool.dashboard.facts import MIG_UNIT
from gpupool.inventory.queries import FlavorFragmentation, GangFit


def mig_pool(free: float, largest: int) -> FlavorFragmentation:
    """A MIG flavor of two nodes of 8 instances (two cards cut in four), each its own domain."""
    return FlavorFragmentation(
        flavor="a100-1g.10gb",
        nodes=2,
        domains=2,
        healthy_gpus=16,
        free_gpus=free,
        fragmented_gpus=0.0,
        stranded_gpus=0.0,
        largest_gang_gpus=largest,
        gangs=(GangFit(4, 1, 4, 2), GangFit(8, 1, 8, 1 if largest >= 8 else 0)),
    )


def test_a_mig_gang_bound_to_one_node_is_told_in_instances() -> None:
    why = blocking_shape(
        Decimal(8), mig_pool(10, 5), topology="domain", unit=MIG_UNIT, nvlink=False
    )
    assert why.kind == SHAPE
    assert why.text == (
        "This job of 8 MIG instances waits although 10 MIG instances are free: no node has 8 "
        "free together (the largest free block is 5 MIG instances)."
    )
    assert "GPU" not in why.text


def test_a_mig_gang_that_fits_and_one_beyond_the_flavor() -> None:
    fits = blocking_shape(Decimal(4), mig_pool(10, 5), topology="domain", unit=MIG_UNIT)
    assert fits.kind == FITS
    assert "This job of 4 MIG instances fits in one NVLink domain now" in fits.text
    assert "(the largest free block is 5 MIG instances)" in fits.text
    beyond = blocking_shape(Decimal(12), mig_pool(10, 5), unit=MIG_UNIT)
    assert beyond.kind == CAPACITY
    assert beyond.text == (
        "This job of 12 MIG instances needs more than the 10 MIG instances free in the whole "
        "flavor."
    )


def test_a_mig_gang_that_may_spread_counts_its_pods_in_instances() -> None:
    why = blocking_shape(
        Decimal(8), mig_pool(10, 5), topology="", pods=2, pod_gpus=4, unit=MIG_UNIT
    )
    assert why.kind == FITS
    assert "its 2 pods of 4 MIG instances may spread" in why.text
    assert "GPU" not in why.text


def test_a_whole_gpu_flavor_still_says_gpus() -> None:
    why = blocking_shape(Decimal(8), mig_pool(10, 5), topology="domain", nvlink=False)
    assert why.text.startswith("This 8-GPU job waits although 10 GPUs are free")
