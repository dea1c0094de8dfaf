"""Why a pending gang waits on the Fragmentation page, linked to the shape that blocks it:
"your 16-GPU job waits although 20 GPUs are free: no domain has 16 free together". Pure:
the page passes in the gang's size, its topology and pods, and the flavor's figures
(``inventory.queries``). Only a gang bound to one NVLink domain (``topology: domain``) is
told about domains; one that may spread is judged by whether its pods find nodes."""

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


# The workload topology that binds a gang to one NVLink domain (``Workload.topology``; the
# others, none and ``preferred``, let it spread over domains).
IN_ONE_DOMAIN = "domain"


def blocking_shape(
    needed: Decimal,
    figures: FlavorFragmentation,
    share: Decimal | None = None,
    reason: str | None = None,
    *,
    topology: str | None = None,
    pods: int | None = None,
    pod_gpus: int | None = None,
) -> Blocking:
    """Why a gang of ``needed`` GPUs of the flavor waits, as far as the pool's shape says.
    ``share``: the share of one GPU each pod asks, on a shared flavor; such a pod needs that
    much free on one GPU, not whole GPUs together in a domain. ``reason``: the workload's
    pending reason; one that is not about shape (quota, ...) is never blamed on shape.

    ``topology``: the workload's (``""``, ``preferred`` or ``domain``); None when the caller
    does not know it, judged as bound to one domain (the strictest reading). A gang that may
    spread is told whether its ``pods`` pods of (at most) ``pod_gpus`` whole GPUs each fit
    on the flavor's nodes now (the page's column for gangs of ``pod_gpus``, which counts such
    pods over every domain), never that no NVLink domain holds it."""
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
    elif topology is not None and topology != IN_ONE_DOMAIN and needed <= free:
        return _spread(job, needed, free, largest, figures, column, pods, pod_gpus)
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


def _spread(
    job: str,
    needed: Decimal,
    free: Decimal,
    largest: int,
    figures: FlavorFragmentation,
    column: int | None,
    pods: int | None,
    pod_gpus: int | None,
) -> Blocking:
    """A gang that may spread over NVLink domains, ``needed`` at most the flavor's free GPUs:
    whether its pods find nodes now, by the column of single pods of ``pod_gpus`` GPUs (how
    many fit at once over the whole flavor), or, without one, only what the figures tell."""
    single = next(
        (
            gang
            for gang in figures.gangs
            if pod_gpus is not None and gang.gpus == pod_gpus and gang.pods == 1
        ),
        None,
    )
    if single is not None and pods:
        each = f"{pods} pod{'s' if pods != 1 else ''} of {gpus(pod_gpus)}"
        room = f"{single.gangs} such pod{'s' if single.gangs != 1 else ''}"
        if single.gangs >= pods:
            return Blocking(
                FITS,
                f"{job} fits now across NVLink domains (its {each} may spread; the nodes have "
                f"room for {room}): the pool's shape does not hold it back; the reason it "
                "waits for does.",
                single.gpus,
            )
        return Blocking(
            SHAPE,
            f"{job} waits although {gpus(free)} are free: its {each} may spread over NVLink "
            f"domains, but the nodes have room for {room} only.",
            single.gpus,
        )
    if needed <= largest:
        return Blocking(
            FITS,
            f"{job} fits in one NVLink domain now (the largest free block is {gpus(largest)}): "
            "the pool's shape does not hold it back; the reason it waits for does.",
            column,
        )
    return Blocking(
        SHAPE,
        f"{job} waits although {gpus(free)} are free: it may spread over NVLink domains, but "
        "the free GPUs are not on nodes where its pods fit.",
        column,
    )
