"""The Fragmentation page blamed shape for a quota wait: nlp/walk-big (16 pods x 8 GPUs, no
NVLink topology asked) waits on quota, but the page said "no NVLink domain has 128 free
together". A wait that is not about the pool's shape is listed as blocked by it only where
the shape would hold the gang back as well (test_fragmentation_domains_and_never_fits)."""

from __future__ import annotations

import dataclasses
from decimal import Decimal

from gpupool.dashboard.blocking import FITS, SHAPE, blocking_shape
from gpupool.inventory.queries import FlavorFragmentation, GangFit


def spread(free: float, largest: int) -> FlavorFragmentation:
    return FlavorFragmentation(
        flavor="h100",
        nodes=31,
        domains=31,
        healthy_gpus=248,
        free_gpus=free,
        fragmented_gpus=0.0,
        stranded_gpus=0.0,
        largest_gang_gpus=largest,
        gangs=(),
    )


def test_a_quota_wait_is_not_blamed_on_shape() -> None:
    # No NVLink topology asked (``""``): its 16 pods of 8 GPUs fit across the 31 nodes.
    figures = dataclasses.replace(
        spread(242.0, 8),
        gangs=(GangFit(8, 1, 8, 31),),  # 31 pods of 8 GPUs fit now
    )
    why = blocking_shape(Decimal(128), figures, reason="quota", topology="", pods=16, pod_gpus=8)
    assert why.kind == FITS
    assert "quota" in why.text
    assert "no NVLink domain" not in why.text


def test_a_capacity_wait_still_names_the_shape() -> None:
    why = blocking_shape(Decimal(128), spread(242.0, 8), reason="capacity")
    assert why.kind == SHAPE
