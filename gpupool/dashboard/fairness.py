"""The fairness explainer of the Queues page: each team queue's standing in one flavor, in
plain words with its numbers ("team-b holds 18 GPUs: 12 deserved, 6 borrowed from team-c,
which is idle"), and who is starved and who borrows. Pure: the page passes the numbers in
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


# A borrower's verdict names at most this many of the queues it borrows from (the largest
# lenders first), then counts the rest: on B5's year 150 queues lend at once, and a sentence
# naming them all, for each of 60 borrowers, made the Queues page 500 kB.
LENDERS_NAMED = 3


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
    lenders = sorted((s for s in standings if s.lent > 0), key=lambda s: (-s.lent, s.queue))
    lending = {lender.queue for lender in lenders}
    lends = {  # the words of the lenders a borrower may name
        lender.queue: f"{lender.queue} (lends {gpus(lender.lent)})"
        for lender in lenders[: LENDERS_NAMED + 1]
    }
    lent_in_all = sum((lender.lent for lender in lenders), Decimal(0))
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
            others = [lender for lender in lenders[: LENDERS_NAMED + 1] if lender is not standing]
            count = len(lenders) - (standing.queue in lending)
            if count == 1:
                source = f"from {_lender_words(others[0])}"
            elif count:
                named = others[:LENDERS_NAMED]
                source = "from the idle shares of " + ", ".join(lends[n.queue] for n in named)
                if count > len(named):
                    rest = lent_in_all - sum((n.lent for n in named), Decimal(0))
                    if standing.queue in lending:
                        rest -= standing.lent
                    more = count - len(named)
                    queues = "queue" if more == 1 else "queues"
                    source += f" and {more} other {queues} (lending {gpus(rest)} in all)"

            else:
                source = "from the pool's unclaimed GPUs"
            text = f"{held}: {gpus(within)} deserved, {gpus(standing.borrowed)} borrowed {source}."
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
            text = (
                f"{held} of the {gpus(standing.deserved)} it deserves and lends "
                f"{gpus(standing.lent)} to busier teams while it does not need them."
            )
            verdicts.append(Verdict(standing.queue, LENDING, text))
        else:
            text = f"{held}, within the {gpus(standing.deserved)} it deserves."
            verdicts.append(Verdict(standing.queue, WITHIN, text))
    order = {BORROWING: 0, STARVED: 1, WAITING: 2, LENDING: 3, WITHIN: 4}
    return sorted(verdicts, key=lambda v: (order[v.kind], v.queue))
