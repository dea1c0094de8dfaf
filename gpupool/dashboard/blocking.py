"""Why a pending gang waits on the Fragmentation page, linked to the shape that blocks it:
"your 16-GPU job waits although 20 GPUs are free: no domain has 16 free together". Pure:
the page passes in the gang's size, its topology and pods, and the flavor's figures
(``inventory.queries``). Only a gang bound to one NVLink domain (``topology: domain``) is
told about domains; one that may spread is judged by whether its pods find nodes."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from gpupool.dashboard.facts import GPU_UNIT, in_unit
from gpupool.inventory.queries import FlavorFragmentation, GangFit
from gpupool.number_formats import plain_number

FITS = "fits"
SHAPE = "shape"
CAPACITY = "capacity"
NEVER = "never"  # it can never run as asked (``scheduler.explain.never_fits``)


@dataclass(frozen=True, slots=True)
class Blocking:
    """What keeps a pending gang out: nothing in the pool's shape (``fits``: it waits for
    something else), the shape (free GPUs enough, but not together), capacity, or nothing
    the pool could free (``never``: it can never run as asked, its explanation says); and the
    gang size of the page's table that shows it (None when no column does)."""

    kind: str
    text: str
    gang_size: int | None


# Pending reasons that are not about the pool's shape or capacity: a workload waiting on
# one of these is never blamed on fragmentation; it is told the shape would hold it back as
# well only when it would (but not while room is being made for it by preemption).
MAKING_ROOM = "waiting-for-preemption"
NOT_SHAPE_REASONS = frozenset({"quota", "budget", "behind", MAKING_ROOM})


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
    never: str | None = None,
    in_one_domain: float | None = None,
    nvlink: bool = True,
    unit: str = GPU_UNIT,
) -> Blocking:
    """Why a gang of ``needed`` GPUs of the flavor waits, as far as the pool's shape says.
    ``share``: the share of one GPU each pod asks, on a shared flavor; such a pod needs that
    much free on one GPU, not whole GPUs together in a domain. ``reason``: the workload's
    pending reason; one that is not about shape (quota, ...) is never blamed on shape, but a
    gang the shape would hold back as well is told so (a 32-GPU gang bound to one domain
    waiting on quota while no domain has 32 free is not "fits").

    ``topology``: the workload's (``""``, ``preferred`` or ``domain``); None when the caller
    does not know it, judged as bound to one domain (the strictest reading). A gang that may
    spread is told whether its ``pods`` pods of (at most) ``pod_gpus`` whole GPUs each fit
    on the flavor's nodes now (the page's column for gangs of ``pod_gpus``, which counts such
    pods over every domain), never that no NVLink domain holds it.

    ``never``: the workload's explanation when its facts say it can never run as asked
    (``scheduler.explain.never_fits``): that sentence, not the free GPUs, is why it waits, and
    no defragmenting would help. ``in_one_domain``: the most GPUs free together in one domain
    (the page's per-domain table), what a gang bound to one domain is judged against (default:
    the figures' largest gang in one domain). ``nvlink``: False for a flavor whose every
    domain is one node (no ``nvidia.com/gpu.clique``): its domains are called nodes.
    ``unit``: what the flavor's figures count (``inventory.units.flavor_unit``: a MIG flavor's MIG
    instances), the unit every amount of the sentence is said in."""
    column = next((gang.gpus for gang in figures.gangs if gang.gpus >= needed), None)
    amount = Amounts(unit)
    job = amount.job(needed)
    if never is not None:
        return Blocking(
            NEVER,
            never.strip() or f"{job} can never run as asked, however free the pool.",
            None,
        )
    verdict = _shape(
        needed, figures, share, topology, pods, pod_gpus, in_one_domain, column, job, nvlink, amount
    )
    if reason in NOT_SHAPE_REASONS:
        # Room is being made for it (its victims are leaving): what is free now is not
        # what it will get, so only the others are judged by the shape as well.
        if verdict.kind == FITS or reason == MAKING_ROOM:
            return Blocking(
                FITS,
                f"{job} waits for its reason ({reason}), not for the pool's shape.",
                verdict.gang_size,
            )
        return Blocking(
            verdict.kind,
            f"{verdict.text} It waits for its reason ({reason}) too.",
            verdict.gang_size,
        )
    return verdict


def _shape(
    needed: Decimal,
    figures: FlavorFragmentation,
    share: Decimal | None,
    topology: str | None,
    pods: int | None,
    pod_gpus: int | None,
    in_one_domain: float | None,
    column: int | None,
    job: str,
    nvlink: bool,
    amount: Amounts,
) -> Blocking:
    """What the pool's shape alone says of the gang (``blocking_shape``, its reason aside)."""
    gpus = amount.of
    free = Decimal(str(figures.free_gpus))
    largest = Decimal(str(figures.largest_gang_gpus if in_one_domain is None else in_one_domain))
    one, many = ("NVLink domain", "NVLink domains") if nvlink else ("node", "nodes")
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
        return _spread(job, needed, free, largest, figures, column, pods, pod_gpus, many, amount)
    elif needed <= largest:
        return Blocking(
            FITS,
            f"{job} fits in one {one} now (the largest free block is {gpus(largest)}): "
            "the pool's shape does not hold it back; the reason it waits for does.",
            column,
        )
    if needed <= free:
        return Blocking(
            SHAPE,
            f"{job} waits although {gpus(free)} are free: no {one} has "
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
    largest: Decimal,
    figures: FlavorFragmentation,
    column: int | None,
    pods: int | None,
    pod_gpus: int | None,
    many: str = "NVLink domains",
    amount: Amounts | None = None,
) -> Blocking:
    """A gang that may spread over NVLink domains, ``needed`` at most the flavor's free GPUs:
    whether its pods find nodes now, by the column of single pods of ``pod_gpus`` GPUs (how
    many fit at once over the whole flavor), or, without one, only what the figures tell."""
    amount = amount or Amounts(GPU_UNIT)
    gpus = amount.of
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
                f"{job} fits now across {many} (its {each} may spread; the nodes have "
                f"room for {room}): the pool's shape does not hold it back; the reason it "
                "waits for does.",
                single.gpus,
            )
        return Blocking(
            SHAPE,
            f"{job} waits although {gpus(free)} are free: its {each} may spread over "
            f"{many}, but the nodes have room for {room} only.",
            single.gpus,
        )
    if needed <= largest:
        return Blocking(
            FITS,
            f"{job} fits in one {many[:-1]} now (the largest free block is {gpus(largest)}): "
            "the pool's shape does not hold it back; the reason it waits for does.",
            column,
        )
    return Blocking(
        SHAPE,
        f"{job} waits although {gpus(free)} are free: it may spread over {many}, but "
        f"the free {amount.plural} are not on nodes where its pods fit.",
        column,
    )


@dataclass(frozen=True, slots=True)
class Amounts:
    """How the sentences say amounts of one flavor: in its unit (GPUs, or a MIG flavor's MIG
    instances: "This 16-GPU job", "This job of 2 MIG instances")."""

    unit: str

    @property
    def plural(self) -> str:
        return f"{self.unit}s"

    def of(self, value: Decimal | float | int | None) -> str:
        return in_unit(value, self.unit)

    def job(self, needed: Decimal) -> str:
        if self.unit == GPU_UNIT:
            return f"This {plain_number(needed)}-GPU job"
        return f"This job of {self.of(needed)}"


TIMES = "\N{MULTIPLICATION SIGN}"  # as the page's table writes pods: 2 x 8


def gang_pods(gang: GangFit) -> str:
    """The pods a gang of the page's table is, adding up to its GPUs: 2 x 8 for 16 GPUs on
    8-GPU nodes, 4 x 16 + 1 x 8 for 72 on 16-GPU nodes (``inventory.queries`` sizes each pod
    at most a node's GPUs, and counts room for ``gang.pods`` pods of that size)."""
    whole, rest = divmod(gang.gpus, gang.gpus_per_pod) if gang.gpus_per_pod else (0, 0)
    if not rest or not whole:
        return f"{gang.pods} {TIMES} {gang.gpus_per_pod}"
    return f"{whole} {TIMES} {gang.gpus_per_pod} + 1 {TIMES} {rest}"
