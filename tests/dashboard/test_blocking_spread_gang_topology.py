"""The Fragmentation page's sentence of what blocks a pending gang follows its topology: only a
gang bound to one NVLink domain (``topology: domain``) is told "no NVLink domain has 16 free
together"; one that may spread (no topology, or ``preferred``) is judged by whether its pods
find nodes, from the page's column of single pods of its pods' size (counted over every
domain)."""

from __future__ import annotations

from decimal import Decimal

import pytest

from gpupool.dashboard.blocking import FITS, SHAPE, blocking_shape
from gpupool.inventory.queries import FlavorFragmentation, GangFit


def spread_out(free: float, largest: int, pods_of_8: int) -> FlavorFragmentation:
    """An h100 flavor of 8-GPU nodes, each its own domain: ``free`` GPUs, ``largest`` whole
    GPUs free in one domain, room for ``pods_of_8`` pods of 8 GPUs over the flavor."""
    return FlavorFragmentation(
        flavor="h100",
        nodes=4,
        domains=4,
        healthy_gpus=32,
        free_gpus=free,
        fragmented_gpus=0.0,
        stranded_gpus=0.0,
        largest_gang_gpus=largest,
        gangs=(GangFit(8, 1, 8, pods_of_8), GangFit(16, 2, 8, 0)),
    )


@pytest.mark.parametrize("topology", ["", "preferred"])
def test_a_gang_that_may_spread_and_finds_nodes_is_not_blamed_on_domains(topology: str) -> None:
    # Two nodes of 8 free, in two domains: 2 pods of 8 fit, though no domain has 16.
    why = blocking_shape(
        Decimal(16), spread_out(20, 8, 2), reason="fragmentation", topology=topology,
        pods=2, pod_gpus=8,
    )  # fmt: skip
    assert why.kind == FITS and why.gang_size == 8
    assert "no NVLink domain has" not in why.text
    assert why.text == (
        "This 16-GPU job fits now across NVLink domains (its 2 pods of 8 GPUs may spread; the "
        "nodes have room for 2 such pods): the pool's shape does not hold it back; the reason "
        "it waits for does."
    )


def test_a_gang_that_may_spread_is_told_its_pods_lack_nodes() -> None:
    why = blocking_shape(Decimal(16), spread_out(20, 8, 1), topology="", pods=2, pod_gpus=8)
    assert why.kind == SHAPE and why.gang_size == 8
    assert why.text == (
        "This 16-GPU job waits although 20 GPUs are free: its 2 pods of 8 GPUs may spread over "
        "NVLink domains, but the nodes have room for 1 such pod only."
    )


def test_a_gang_that_may_spread_without_a_column_for_its_pods_names_no_domain() -> None:
    why = blocking_shape(Decimal(18), spread_out(20, 8, 1), topology="", pods=3, pod_gpus=6)
    assert why.kind == SHAPE
    assert "no NVLink domain has" not in why.text
    assert "may spread over NVLink domains" in why.text


def test_a_gang_bound_to_one_domain_still_needs_one() -> None:
    why = blocking_shape(Decimal(16), spread_out(20, 8, 2), topology="domain", pods=2, pod_gpus=8)
    assert why.kind == SHAPE and why.gang_size == 16
    assert "no NVLink domain has 16 free together (the largest free block is 8 GPUs)" in why.text
