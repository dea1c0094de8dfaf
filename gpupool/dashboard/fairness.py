"""The fairness explainer of the Queues page: each team queue's standing in one flavor, in
plain words with its numbers ("team-b holds 18 GPUs: 12 deserved, 6 borrowed from team-c,
which is idle"), and who is starved and who borrows. A borrower names where its borrowed GPUs
come from as the core counts them (``scheduler.shares``: nearest first, each source a queue of
its own part of the tree, with what it lends to this borrower). Pure: the page passes the numbers in
(the core's quota tree at the last cycle, ``quotas.queries.queue_usage``, and the pending
work per queue)."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from decimal import Decimal

from gpupool.dashboard.facts import in_unit
from gpupool.inventory.units import GPU_UNIT

BORROWING = "borrowing"
STARVED = "starved"
WAITING = "waiting"  # below its share with work waiting, but GPUs are free: not a fairness matter
LENDING = "lending"
WITHIN = "within"


@dataclass(frozen=True, slots=True)
class Lender:
    """Part of a borrower's borrowed GPUs and where it comes from: ``queue``'s idle deserved
    share, or with ``unassigned`` the share of ``queue`` that none of its children deserves
    ("": the pool's GPUs no queue deserves; without ``unassigned``, use beyond the pool's
    healthy GPUs)."""

    queue: str
    amount: Decimal
    unassigned: bool = False


@dataclass(frozen=True, slots=True)
class Standing:
    """One team queue in one flavor: its deserved quota, what it holds, borrows and lends
    now, and how many of its workloads wait."""

    queue: str
    team: str
    deserved: Decimal
    allocated: Decimal
    borrowed: Decimal
    lent: Decimal
    waiting: int
    lenders: tuple[Lender, ...] = ()  # where its borrowed GPUs come from, nearest first
    guarantee: Decimal = Decimal(0)  # never lent
    lending_limit: Decimal | None = None  # the most of its idle share it lends (None: all)

    @property
    def may_lend(self) -> Decimal:
        """What of its idle share the scheduler lends: its idle deserved beyond its guarantee,
        at most its lending limit (docs/scheduler.md, "Quota")."""
        idle = max(self.deserved - max(self.allocated, self.guarantee), Decimal(0))
        return idle if self.lending_limit is None else min(idle, self.lending_limit)


@dataclass(frozen=True, slots=True)
class Verdict:
    """One queue's standing in words, and its kind (borrowing, starved, lending, within)."""

    queue: str
    kind: str
    text: str


def _lender_words(lender: Standing, unit: str) -> str:
    """A lender, and why it lends: idle, or using less than it deserves."""
    if lender.allocated == 0:
        return f"{lender.queue}, which is idle"
    uses, deserves = in_unit(lender.allocated, unit), in_unit(lender.deserved, unit)
    return f"{lender.queue}, which uses {uses} of its {deserves}"


def _source_words(source: Lender, unit: str) -> str:
    """One source of a borrower's GPUs (or MIG instances) with what it gives it."""
    if source.unassigned and not source.queue:
        return f"the pool's unclaimed {unit}s ({in_unit(source.amount, unit)})"
    if source.unassigned:
        amount = in_unit(source.amount, unit)
        return f"{source.queue}'s share that none of its queues deserves ({amount})"
    if not source.queue:
        return f"beyond the pool's healthy {unit}s ({in_unit(source.amount, unit)})"
    return f"{source.queue} ({in_unit(source.amount, unit)})"


# A borrower's verdict names at most this many of the sources it borrows from (nearest
# first), then counts the rest: on B5's year 150 queues lend at once, and a sentence naming
# them all, for each of 60 borrowers, made the Queues page 500 kB.
LENDERS_NAMED = 3


def _lending_text(held: str, standing: Standing, unit: str) -> str:
    """A lender's sentence. What others use of its idle share beyond what it lends -- its
    guarantee, or past its lending limit -- is counted where it is used (the figures add up,
    ``scheduler.shares``), but said apart: the queue does not lend it, and takes it back
    when it wants it."""
    lends = min(standing.lent, standing.may_lend)
    beyond = standing.lent - lends
    deserves = f"{held} of the {in_unit(standing.deserved, unit)} it deserves"
    if beyond < Decimal("0.001"):
        return (
            f"{deserves} and lends {in_unit(standing.lent, unit)} to busier teams while it "
            "does not need them."
        )
    kept = []
    if standing.guarantee > standing.allocated:
        kept.append(f"its guarantee of {in_unit(standing.guarantee, unit)}")
    idle = max(standing.deserved - max(standing.allocated, standing.guarantee), Decimal(0))
    if standing.lending_limit is not None and idle > standing.lending_limit:
        kept.append(f"what is past its lending limit of {in_unit(standing.lending_limit, unit)}")
    which = " or ".join(kept) or "what it does not lend"
    lent = (
        f" and lends {in_unit(lends, unit)} to busier teams while it does not need them"
        if lends > 0
        else ""
    )
    return (
        f"{deserves}{lent}; {in_unit(beyond, unit)} more of its idle share ({which}, which it "
        "does not lend) are in use by others until it wants them back."
    )


def _sources(standing: Standing, by_queue: dict[str, Standing], unit: str) -> str:
    """Where a borrower's GPUs (or MIG instances) come from, nearest first, with what each
    source gives it."""
    sources = standing.lenders
    if not sources:
        return ""
    [first, *_] = sources
    if len(sources) == 1 and not first.unassigned and first.queue in by_queue:
        return f" from {_lender_words(by_queue[first.queue], unit)}"
    if len(sources) == 1 and first.unassigned and not first.queue:
        return f" from the pool's unclaimed {unit}s"
    if len(sources) == 1 and not first.unassigned and first.queue:
        return f" from the idle share of {first.queue}"
    named = sources[:LENDERS_NAMED]
    words = " from " + ", ".join(_source_words(source, unit) for source in named)
    if len(sources) > 1:
        words = ", nearest first," + words
    if len(sources) > len(named):
        more = len(sources) - len(named)
        rest = sum((source.amount for source in sources[len(named) :]), Decimal(0))
        queues = "source" if more == 1 else "sources"
        words += f" and {more} other {queues} ({in_unit(rest, unit)} in all)"
    return words


def explain_fairness(
    standings: list[Standing],
    shown: Collection[str] | None = None,
    free: Decimal | None = None,
    unit: str = GPU_UNIT,
) -> list[Verdict]:
    """Each queue's standing in words, borrowers first, then the starved, those waiting, the
    lenders and the rest (by queue name within each). With ``shown``, only the queues it names
    and every borrowing, starved or waiting one (the words of the others are not written).

    ``unit`` is the flavor's (``inventory.units.flavor_unit``): every amount is said in it, a
    MIG flavor's in MIG instances, never as GPUs.

    ``free`` is how many GPUs (or MIG instances) of the flavor nobody holds. A queue below its
    share with work waiting is starved only when the flavor is full: with a whole one or more
    free, its work
    waits for room that fits it (a node, an NVLink domain, a gang's members at once) or for
    its own limits, and calling that starvation would send its team looking for the wrong
    cause."""
    by_queue = {standing.queue: standing for standing in standings}
    borrowers = {s.queue for s in standings if s.borrowed > 0}
    verdicts: list[Verdict] = []
    for standing in sorted(standings, key=lambda s: s.queue):
        starved = standing.waiting and standing.allocated < standing.deserved
        kept = shown is None or standing.queue in shown or standing.borrowed > 0 or starved
        if not kept:
            continue
        held = f"{standing.queue} holds {in_unit(standing.allocated, unit)}"
        if standing.borrowed > 0:
            within = standing.allocated - standing.borrowed
            source = _sources(standing, by_queue, unit)
            borrowed = in_unit(standing.borrowed, unit)
            text = f"{held}: {in_unit(within, unit)} deserved, {borrowed} borrowed{source}."
            text += f" Borrowed {unit}s are taken back when their owner wants them."
            verdicts.append(Verdict(standing.queue, BORROWING, text))
        elif starved:
            waiting = (
                "1 of its workloads waits"
                if standing.waiting == 1
                else f"{standing.waiting} of its workloads wait"
            )
            if free is not None and free >= 1:
                # The verb agrees with the amount as ``in_unit`` writes it ("1 MIG instance").
                spare = in_unit(free, unit)
                verb = "is" if spare == in_unit(1, unit) else "are"
                text = (
                    f"{held} of the {in_unit(standing.deserved, unit)} it deserves while "
                    f"{waiting}, though {spare} of this flavor {verb} free: its work "
                    "waits for room that fits it (whole nodes, an NVLink domain, a gang placed at "
                    "once) or for its own limits, not for its share. Each workload's reason says "
                    "which."
                )
                verdicts.append(Verdict(standing.queue, WAITING, text))
                continue
            then = (
                "the scheduler reclaims what others borrowed from it first."
                if borrowers  # a starved queue borrows nothing itself
                else f"nobody borrows from it now, so its work goes first as {unit}s free up."
            )
            text = (
                f"{held} of the {in_unit(standing.deserved, unit)} it deserves while {waiting}: "
                f"it is starved, and {then}"
            )
            verdicts.append(Verdict(standing.queue, STARVED, text))
        elif standing.lent > 0:
            verdicts.append(Verdict(standing.queue, LENDING, _lending_text(held, standing, unit)))
        else:
            text = f"{held}, within the {in_unit(standing.deserved, unit)} it deserves."
            verdicts.append(Verdict(standing.queue, WITHIN, text))
    order = {BORROWING: 0, STARVED: 1, WAITING: 2, LENDING: 3, WITHIN: 4}
    return sorted(verdicts, key=lambda v: (order[v.kind], v.queue))
