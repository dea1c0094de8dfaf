"""What each queue holds now, borrows and lends, per flavor, and where each borrower's
borrowed GPUs come from: read off the scheduler's own quota tree (``quota.QuotaTree``, with
the usage of the running work added), so the numbers are the ones the cycle decides with.

- **allocated**: the usage of the queue's subtree.
- **borrowed**: allocated above the queue's deserved share (none without a quota).
- **lent**: the part of the queue's deserved share that queues outside its subtree use now.
- **lenders**: where the borrowed GPUs come from, nearest first (``Source``).

The figures count GPUs, nearest first, in *cohorts*: the queues that have a quota of the
flavor and count against the same nearest ancestor with one (the *holder*; the pool when
there is none), the grouping the guarantee rules use. The holder's *share* is its deserved
quota (the pool's: its healthy capacity). What the members use beyond their deserved shares
(the sum of their ``borrowed``) comes, in this order, from

1. the holder's *unassigned* share, the part of it no member deserves;
2. the members' idle deserved shares (*lent within the cohort*): ``min(used, share)`` less
   what the members use within their deserved shares and less the unassigned share;
3. past the holder's share, from the holder borrowing in its own cohort, and so on upwards.

What a holder lends to its own siblings comes out of its idle share: its unassigned share
first, then its members' idle deserved shares, which then count as lent by them too. So a
queue's ``lent`` is what its siblings borrow of it plus its part of what its ancestors lend.
The members' lending is split in proportion to what each may lend now (its idle deserved less
its guarantee and anything beyond its lending limit: ``deserved - claim`` in the tree's
terms), in milli-GPU, the remainders going to the largest fractions (ties by name); only
when a cohort uses more than that do the idle guaranteed (or limited) GPUs count as lent,
last, in proportion to them: the scheduler lends them to nobody, but GPUs are counted where
they are used.

At every holder the figures reconcile (``reconcile``)::

    sum(members' borrowed) + shortfall = sum(members' lent within the cohort)
                                         + unassigned used + holder's borrowed

where the holder's borrowed is its ``borrowed`` (the pool's: its use beyond its healthy GPUs)
and ``shortfall`` is what the members use *within* their deserved shares beyond the holder's
share (only where the members' deserved shares add up to more than it, e.g. failed GPUs).

A borrower's ``lenders`` split each of those amounts among the borrowers of the cohort in
proportion to what each borrows: at its own cohort its sisters' lending and the unassigned
share, then the part its holder borrows at the holder's cohort, and so on up to the pool. So
each source is a queue of the borrower's own part of the tree, a sibling of it or of one of
its ancestors, and what a source lends within a cohort is what the borrowers there get of
it (to the milli-GPU of rounding).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from gpupool.scheduler.quota import QuotaTree

POOL = ""  # the holder that stands for the pool


@dataclass(frozen=True, slots=True)
class Source:
    """Part of a queue's borrowed GPUs (milli-GPU) and where it comes from: the idle deserved
    share of ``queue`` (a sibling of the borrower or of one of its ancestors), or with
    ``unassigned`` the share of ``queue`` that none of its children deserves (``queue`` ""
    : the pool's GPUs no queue deserves; without ``unassigned``: usage beyond the pool's
    healthy GPUs)."""

    queue: str
    amount: int
    unassigned: bool = False


@dataclass(frozen=True, slots=True)
class QueueShare:
    """One queue's holding of one flavor now, in milli-GPU, and for a borrower where its
    borrowed GPUs come from, nearest first (they add up to ``borrowed``)."""

    allocated: int
    borrowed: int
    lent: int
    lenders: tuple[Source, ...] = ()


@dataclass(frozen=True, slots=True)
class Cohort:
    """One holder's cohort of one flavor (milli-GPU): its share, its members, what each uses
    beyond its deserved share and lends within the cohort, and where the rest comes from."""

    holder: str
    share: int
    members: tuple[str, ...]
    borrowed: dict[str, int]  # member -> used beyond its deserved share
    lent_within: dict[str, int]  # member -> lent to the other members
    unassigned_used: int
    beyond: int  # what the members use beyond the holder's share, beyond their deserved
    shortfall: int  # what the members use within their deserved shares beyond the share
    holder_borrowed: int
    lends: int  # what the holder lends to its own siblings


def queue_shares(tree: QuotaTree) -> dict[str, dict[str, QueueShare]]:
    """Per queue, per flavor it has a quota of or uses: allocated, borrowed, lent and, for a
    borrower, its sources nearest first."""
    flavors: set[str] = set(tree.pool)
    for name, queue in tree.queues.items():
        flavors.update(queue.quota)
        flavors.update(flavor for flavor, used in tree.usage[name].items() if used)
    shares: dict[str, dict[str, QueueShare]] = {name: {} for name in sorted(tree.queues)}
    for flavor in sorted(flavors):
        cohorts, lent = _cohorts(tree, flavor)
        sources = _sources(cohorts)
        for name in shares:
            quota = tree.quota(name, flavor)
            used = tree.usage[name].get(flavor, 0)
            if quota is None and not used:
                continue
            borrowed = 0 if quota is None else max(0, used - quota.deserved)
            shares[name][flavor] = QueueShare(
                used, borrowed, lent.get(name, 0), sources.get(name, ())
            )
    return shares


def reconcile(cohort: Cohort) -> tuple[int, int]:
    """Both sides of the cohort's identity: members' borrowed + shortfall, and lent within +
    unassigned used + the holder's borrowed."""
    left = sum(cohort.borrowed.values()) + cohort.shortfall
    right = sum(cohort.lent_within.values()) + cohort.unassigned_used + cohort.holder_borrowed
    return left, right


def _holder(tree: QuotaTree, name: str, flavor: str) -> str:
    """The nearest ancestor with a quota of the flavor (POOL stands for the pool)."""
    for ancestor in tree.path[name][1:]:
        if tree.quota(ancestor, flavor) is not None:
            return ancestor
    return POOL


def cohorts_of(tree: QuotaTree, flavor: str) -> dict[str, Cohort]:
    """Every cohort of the flavor, by holder (POOL: the pool's), holders before members."""
    return _cohorts(tree, flavor)[0]


def _cohorts(tree: QuotaTree, flavor: str) -> tuple[dict[str, Cohort], dict[str, int]]:
    """The flavor's cohorts, top down, and how much of each queue's deserved share queues
    outside its subtree use now."""
    members_of: dict[str, list[str]] = {}
    for name in sorted(tree.queues):
        if tree.quota(name, flavor) is not None:
            members_of.setdefault(_holder(tree, name, flavor), []).append(name)
    lent: dict[str, int] = {}
    cohorts: dict[str, Cohort] = {}
    order = [POOL]
    index = 0
    while index < len(order):
        holder = order[index]
        index += 1
        members = members_of.get(holder)
        if not members:
            continue
        order.extend(members)
        cohort = _cohort(tree, flavor, holder, members, lent.get(holder, 0), lent)
        cohorts[holder] = cohort
    return cohorts, lent


def _cohort(
    tree: QuotaTree, flavor: str, holder: str, members: list[str], lends: int, lent: dict[str, int]
) -> Cohort:
    """One cohort's figures; each member's lending (within the cohort and its part of what the
    holder lends, ``lends``) is written to ``lent``."""
    if holder == POOL:
        share = tree.pool.get(flavor, 0)
    else:
        holder_quota = tree.quota(holder, flavor)
        assert holder_quota is not None
        share = holder_quota.deserved
    used = within = deserved = 0
    borrowed: dict[str, int] = {}
    lendable: dict[str, int] = {}
    idle: dict[str, int] = {}
    for member in members:
        quota = tree.quota(member, flavor)
        assert quota is not None
        member_used = tree.usage[member].get(flavor, 0)
        used += member_used
        within += min(member_used, quota.deserved)
        deserved += quota.deserved
        if member_used > quota.deserved:
            borrowed[member] = member_used - quota.deserved
        elif member_used < quota.deserved:
            idle[member] = quota.deserved - member_used
            lendable[member] = min(
                idle[member], max(0, quota.deserved - tree.claim(member, flavor))
            )
    excess = sum(borrowed.values())
    unassigned = max(0, share - deserved)
    unassigned_used = min(excess, unassigned)
    total_within = max(0, min(used, share) - within - unassigned)
    beyond = excess - unassigned_used - total_within
    shortfall = max(0, within - share)
    if holder == POOL:
        holder_borrowed = max(0, used - share)
    else:
        holder_quota = tree.quota(holder, flavor)
        assert holder_quota is not None
        holder_borrowed = max(0, tree.usage[holder].get(flavor, 0) - holder_quota.deserved)
    lent_within = _split_tiers(total_within, lendable, idle)
    left_lendable = {m: max(0, amount - lent_within.get(m, 0)) for m, amount in lendable.items()}
    left_idle = {m: amount - lent_within.get(m, 0) for m, amount in idle.items()}
    outward = lends - min(lends, unassigned - unassigned_used)
    lent_out = _split_tiers(outward, left_lendable, left_idle)
    for member in members:
        amount = lent_within.get(member, 0) + lent_out.get(member, 0)
        if amount:
            lent[member] = amount
    return Cohort(
        holder,
        share,
        tuple(members),
        borrowed,
        lent_within,
        unassigned_used,
        beyond,
        shortfall,
        holder_borrowed,
        lends,
    )


def _split_tiers(total: int, first: dict[str, int], whole: dict[str, int]) -> dict[str, int]:
    """``total`` split in proportion to ``first`` up to its sum, the rest in proportion to
    ``whole - first`` (never past ``whole``)."""
    if total <= 0:
        return {}
    head = min(total, sum(first.values()))
    parts = _split(head, first)
    rest = {name: whole[name] - first.get(name, 0) for name in whole}
    tail = _split(min(total - head, sum(rest.values())), rest)
    for name, part in tail.items():
        parts[name] = parts.get(name, 0) + part
    return parts


def _sources(cohorts: dict[str, Cohort]) -> dict[str, tuple[Source, ...]]:
    """Each borrower's sources, nearest first: at each cohort up its path, the unassigned
    share and the members' lending within the cohort, in proportion to what it borrows there;
    what passes beyond the pool's share last."""
    holder_of = {member: holder for holder, c in cohorts.items() for member in c.members}
    found: dict[str, tuple[Source, ...]] = {}
    for cohort in cohorts.values():
        excess = sum(cohort.borrowed.values())
        for borrower, amount in sorted(cohort.borrowed.items()):
            exact: list[tuple[str, Fraction, bool]] = []
            part = Fraction(amount, excess)  # of each source of the current cohort
            level: Cohort | None = cohort
            while level is not None and part:
                if level.unassigned_used:
                    exact.append((level.holder, part * level.unassigned_used, True))
                lenders = sorted(level.lent_within.items(), key=lambda item: (-item[1], item[0]))
                for lender, lent in lenders:
                    exact.append((lender, part * lent, False))
                if not level.beyond:
                    break
                if level.holder == POOL:
                    exact.append((POOL, part * level.beyond, False))
                    break
                carried = part * level.beyond  # of the borrower's, borrowed by the holder
                upper = cohorts.get(holder_of[level.holder])
                upper_excess = 0 if upper is None else sum(upper.borrowed.values())
                if upper is None or not upper_excess:
                    break
                part = carried / upper_excess
                level = upper
            found[borrower] = _rounded(exact, amount)
    return found


def _rounded(exact: list[tuple[str, Fraction, bool]], total: int) -> tuple[Source, ...]:
    """The sources in whole milli-GPU adding up to what they cover of ``total`` (largest
    remainders first, ties by order), those that round to nothing left out."""
    floors = [int(value) for _, value, _ in exact]
    covered = min(total, round(sum((value for _, value, _ in exact), Fraction(0))))
    ranked = sorted(range(len(exact)), key=lambda i: (-(exact[i][1] - floors[i]), i))
    for i in ranked[: max(0, covered - sum(floors))]:
        floors[i] += 1
    return tuple(
        Source(name, amount, unassigned)
        for (name, _, unassigned), amount in zip(exact, floors, strict=True)
        if amount
    )


def _split(total: int, weights: dict[str, int]) -> dict[str, int]:
    """``total`` split in proportion to ``weights`` in whole units (largest remainders first,
    ties by name), so the parts add up to ``total``."""
    whole = sum(weights.values())
    if total <= 0 or whole <= 0:
        return {}
    parts: dict[str, int] = {}
    remainders: list[tuple[int, str]] = []
    for name in sorted(weights):
        amount = total * weights[name]
        parts[name] = amount // whole
        remainders.append((-(amount % whole), name))
    left = total - sum(parts.values())
    for _, name in sorted(remainders)[:left]:
        parts[name] += 1
    return {name: part for name, part in parts.items() if part}
