"""The Fragmentation page blamed shape for a quota wait: nlp/walk-big (16 pods x 8 GPUs, no
NVLink topology asked) waits on quota, but the page said "no NVLink domain has 128 free
together". Only a wait that is about the pool's shape may be listed as blocked by it."""

from __future__ import annotations

from decimal import Decimal

from gpupool.dashboard.blocking import FITS, SHAPE, blocking_shape
from gpupool.inventory.queries import FlavorFragmentation


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
    why = blocking_shape(Decimal(128), spread(242.0, 8), reason="quota")
    assert why.kind == FITS
    assert "quota" in why.text
    assert "NVLink" not in why.text


def test_a_capacity_wait_still_names_the_shape() -> None:
    why = blocking_shape(Decimal(128), spread(242.0, 8), reason="capacity")
    assert why.kind == SHAPE
