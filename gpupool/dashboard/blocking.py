"""Why a pending gang waits on the Fragmentation page, linked to the shape that blocks it:
"your 16-GPU job waits although 20 GPUs are free: no domain has 16 free together". Pure:
the page passes in the gang's size and the flavor's figures (``inventory.queries``)."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from gpupool.dashboard.templatetags.dashboard import gpus
from gpupool.inventory.queries import FlavorFragmentation
from gpupool.number_formats import plain_number

FITS = "fits"
SHAPE = "shape"
CAPACITY = "capacity"


@dataclass(frozen=True, slots=True)
class Blocking:
    """What keeps a pending gang out: nothing in the pool's shape (``fits``: it waits for
    something else), the shape (free GPUs enough, but not together), or capacity; and the
    gang size of the page's table that shows it (None when no column does)."""

    kind: str
    text: str
    gang_size: int | None


# Pending reasons that are not about the pool's shape or capacity: a workload waiting on
# one of these is not held back by fragmentation, whatever the free GPUs look like.
NOT_SHAPE_REASONS = frozenset({"quota", "budget", "behind", "waiting-for-preemption"})


def blocking_shape(
    needed: Decimal,
    figures: FlavorFragmentation,
    share: Decimal | None = None,
    reason: str | None = None,
) -> Blocking:
    """Why a gang of ``needed`` GPUs of the flavor waits, as far as the pool's shape says.
    ``share``: the share of one GPU each pod asks, on a shared flavor; such a pod needs that
    much free on one GPU, not whole GPUs together in a domain. ``reason``: the workload's
    pending reason; one that is not about shape (quota, ...) is never blamed on shape."""
    column = next((gang.gpus for gang in figures.gangs if gang.gpus >= needed), None)
    free = Decimal(str(figures.free_gpus))
    largest = figures.largest_gang_gpus
    job = f"This {plain_number(needed)}-GPU job"
    if reason in NOT_SHAPE_REASONS:
        return Blocking(
            FITS,
            f"{job} waits for its reason ({reason}), not for the pool's shape.",
            column,
        )
    if share is not None and share < 1:
        most = Decimal(str(figures.most_free_on_one_gpu))
        if share <= most and needed <= free:
            return Blocking(
                FITS,
                f"{job} fits now: its pods ask {plain_number(share)} of a GPU each and a GPU "
                f"has {gpus(most)} free: the pool's shape does not hold it back; the reason it "
                "waits for does.",
                column,
            )
        if needed <= free:
            return Blocking(
                SHAPE,
                f"{job} waits although {gpus(free)} are free: no GPU has "
                f"{plain_number(share)} free (the most free on one GPU is {gpus(most)}).",
                column,
            )
    elif needed <= largest:
        return Blocking(
            FITS,
            f"{job} fits in one NVLink domain now (the largest free block is {gpus(largest)}): "
            "the pool's shape does not hold it back; the reason it waits for does.",
            column,
        )
    if needed <= free:
        return Blocking(
            SHAPE,
            f"{job} waits although {gpus(free)} are free: no NVLink domain has "
            f"{plain_number(needed)} free together (the largest free block is {gpus(largest)}).",
            column,
        )
    return Blocking(
        CAPACITY,
        f"{job} needs more than the {gpus(free)} free in the whole flavor.",
        column,
    )
