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

from gpupool.dashboard.templatetags.dashboard import gpus

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


def _lender_words(lender: Standing) -> str:
    """A lender, and why it lends: idle, or using less than it deserves."""
    if lender.allocated == 0:
        return f"{lender.queue}, which is idle"
    return f"{lender.queue}, which uses {gpus(lender.allocated)} of its {gpus(lender.deserved)}"


def _source_words(source: Lender) -> str:
    """One source of a borrower's GPUs with what it gives it."""
    if source.unassigned and not source.queue:
        return f"the pool's unclaimed GPUs ({gpus(source.amount)})"
    if source.unassigned:
        return f"{source.queue}'s share that none of its queues deserves ({gpus(source.amount)})"
    if not source.queue:
        return f"beyond the pool's healthy GPUs ({gpus(source.amount)})"
    return f"{source.queue} ({gpus(source.amount)})"


# A borrower's verdict names at most this many of the sources it borrows from (nearest
# first), then counts the rest: on B5's year 150 queues lend at once, and a sentence naming
# them all, for each of 60 borrowers, made the Queues page 500 kB.
LENDERS_NAMED = 3


def _lending_text(held: str, standing: Standing) -> str:
    """A lender's sentence. What others use of its idle share beyond what it lends -- its
    guarantee, or past its lending limit -- is counted where it is used (the figures add up,
    ``scheduler.shares``), but said apart: the queue does not lend it, and takes it back
    when it wants it."""
    lends = min(standing.lent, standing.may_lend)
    beyond = standing.lent - lends
    deserves = f"{held} of the {gpus(standing.deserved)} it deserves"
    if beyond < Decimal("0.001"):
        return (
            f"{deserves} and lends {gpus(standing.lent)} to busier teams while it does not "
            "need them."
        )
    kept = []
    if standing.guarantee > standing.allocated:
        kept.append(f"its guarantee of {gpus(standing.guarantee)}")
    idle = max(standing.deserved - max(standing.allocated, standing.guarantee), Decimal(0))
    if standing.lending_limit is not None and idle > standing.lending_limit:
        kept.append(f"what is past its lending limit of {gpus(standing.lending_limit)}")
    which = " or ".join(kept) or "what it does not lend"
    lent = (
        f" and lends {gpus(lends)} to busier teams while it does not need them" if lends > 0 else ""
    )
    return (
        f"{deserves}{lent}; {gpus(beyond)} more of its idle share ({which}, which it does not "
        "lend) are in use by others until it wants them back."
    )


def _sources(standing: Standing, by_queue: dict[str, Standing]) -> str:
    """Where a borrower's GPUs come from, nearest first, with what each source gives it."""
    sources = standing.lenders
    if not sources:
        return ""
    [first, *_] = sources
    if len(sources) == 1 and not first.unassigned and first.queue in by_queue:
        return f" from {_lender_words(by_queue[first.queue])}"
    if len(sources) == 1 and first.unassigned and not first.queue:
        return " from the pool's unclaimed GPUs"
    if len(sources) == 1 and not first.unassigned and first.queue:
        return f" from the idle share of {first.queue}"
    named = sources[:LENDERS_NAMED]
    words = " from " + ", ".join(_source_words(source) for source in named)
    if len(sources) > 1:
        words = ", nearest first," + words
    if len(sources) > len(named):
        more = len(sources) - len(named)
        rest = sum((source.amount for source in sources[len(named) :]), Decimal(0))
        queues = "source" if more == 1 else "sources"
        words += f" and {more} other {queues} ({gpus(rest)} in all)"
    return words


def explain_fairness(
    standings: list[Standing],
    shown: Collection[str] | None = None,
    free: Decimal | None = None,
) -> list[Verdict]:
    """Each queue's standing in words, borrowers first, then the starved, those waiting, the
    lenders and the rest (by queue name within each). With ``shown``, only the queues it names
    and every borrowing, starved or waiting one (the words of the others are not written).

    ``free`` is how many GPUs of the flavor nobody holds. A queue below its share with work
    waiting is starved only when the flavor is full: with a whole GPU or more free, its work
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
        held = f"{standing.queue} holds {gpus(standing.allocated)}"
        if standing.borrowed > 0:
            within = standing.allocated - standing.borrowed
            source = _sources(standing, by_queue)
            text = f"{held}: {gpus(within)} deserved, {gpus(standing.borrowed)} borrowed{source}."
            text += " Borrowed GPUs are taken back when their owner wants them."
            verdicts.append(Verdict(standing.queue, BORROWING, text))
        elif starved:
            waiting = (
                "1 of its workloads waits"
                if standing.waiting == 1
                else f"{standing.waiting} of its workloads wait"
            )
            if free is not None and free >= 1:
                text = (
                    f"{held} of the {gpus(standing.deserved)} it deserves while {waiting}, "
                    f"though {gpus(free)} of this flavor are free: its work waits for room "
                    "that fits it (whole nodes, an NVLink domain, a gang placed at once) or "
                    "for its own limits, not for its share. Each workload's reason says which."
                )
                verdicts.append(Verdict(standing.queue, WAITING, text))
                continue
            then = (
                "the scheduler reclaims what others borrowed from it first."
                if borrowers  # a starved queue borrows nothing itself
                else "nobody borrows from it now, so its work goes first as GPUs free up."
            )
            text = (
                f"{held} of the {gpus(standing.deserved)} it deserves while {waiting}: "
                f"it is starved, and {then}"
            )
            verdicts.append(Verdict(standing.queue, STARVED, text))
        elif standing.lent > 0:
            verdicts.append(Verdict(standing.queue, LENDING, _lending_text(held, standing)))
        else:
            text = f"{held}, within the {gpus(standing.deserved)} it deserves."
            verdicts.append(Verdict(standing.queue, WITHIN, text))
    order = {BORROWING: 0, STARVED: 1, WAITING: 2, LENDING: 3, WITHIN: 4}
    return sorted(verdicts, key=lambda v: (order[v.kind], v.queue))
