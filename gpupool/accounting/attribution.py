"""Where every hour of a flavor's healthy capacity went: four lines that add up to capacity.

Pure functions on plain numbers (no Django; the decision core's guarantee scaling), so the
roll-up, the reports and their tests share them. For one flavor and one accounting hour, in
GPU-hours:

- **used within guarantee**: usage covered by a guarantee, min(allocated, guarantee);
- **reserved idle**: guarantee left unused, charged to the queue that holds it;
- **used above guarantee**: usage beyond the guarantees (not "borrowed", which is usage above
  the deserved share in the scheduler's terms);
- **pool idle**: the rest of the healthy capacity.

Pool idle may also be shared out in proportion to use: each queue's ``pool_idle_share`` is the
hour's pool idle times its part of the hour's usage (an hour nobody used keeps its idle
unshared). The share is a second view of the pool idle line, not a fifth line.

Guarantees nest (DESIGN section 2): a child's guarantee is carved out of its nearest guaranteed
ancestor's, and the top-level ones out of the pool. Usage fills its own queue's guarantee first,
then the part of each guaranteed ancestor's guarantee that no child holds, nearest first; what a
level cannot hold moves up, and what no level holds is used above guarantee. Where several
queues' usage competes for one ancestor's unheld part, it is shared in proportion to what each
brings. Each holder's unused part is its reserved idle.

When the top-level guarantees exceed the healthy capacity (failed GPUs), the guarantees are
scaled as the decision core scales them (``scheduler.quota.scale_guarantees``): the top-level
ones by capacity / total guaranteed, and a group of nested ones only where it no longer fits
its scaled parent; so the reserved idle shrinks in the same proportion as the scheduler's
promises. Usage
is an hour's average, so usage outside guarantees plus unused guarantees can exceed the
capacity inside one hour (work that left a guarantee idle for half the hour and then used it);
the reserved idle is then scaled down to the idle capacity, and pool idle is zero. An hour whose
usage exceeds the recorded capacity (a GPU that failed while work still ran on it) counts the
usage as the capacity. So no line is ever negative and the four add up to the capacity exactly:
amounts are rounded down to ``GPU_HOURS`` and pool idle takes the remainder.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import ROUND_DOWN, ROUND_HALF_EVEN, Decimal

from gpupool.scheduler.quota import scale_guarantees
from gpupool.scheduler.types import QueueInfo, QuotaInfo

GPU_HOURS = Decimal("0.0001")  # the resolution of every GPU-hour amount
PRICE = Decimal("0.0001")  # the resolution of an hour's (time-weighted) price
ZERO = Decimal(0)


def down(value: Decimal) -> Decimal:
    """``value`` rounded down to the GPU-hour resolution."""
    return value.quantize(GPU_HOURS, rounding=ROUND_DOWN)


def nearest(value: Decimal, step: Decimal = GPU_HOURS) -> Decimal:
    """``value`` rounded to the nearest ``step`` (halves to even)."""
    return value.quantize(step, rounding=ROUND_HALF_EVEN)


class Steps:
    """A value that changes at given instants (a price, a guarantee, a capacity): a step
    function of time, each value in force from its instant until the next one.

    Instants are integer microseconds since the epoch. Before the first change the value is
    ``before``, or the first change's value when ``before`` is None.
    """

    __slots__ = ("_at", "_before", "_values")

    def __init__(self, changes: Sequence[tuple[int, Decimal]], before: Decimal | None = None):
        ordered = sorted(changes, key=lambda change: change[0])
        self._at = [at for at, _ in ordered]
        self._values = [value for _, value in ordered]
        if before is not None:
            self._before = before
        else:
            self._before = self._values[0] if self._values else ZERO

    def at(self, instant: int) -> Decimal:
        """The value in force at ``instant``."""
        index = bisect_right(self._at, instant) - 1
        return self._values[index] if index >= 0 else self._before

    def changes_within(self, start: int, end: int) -> bool:
        """Whether the value changes inside ``(start, end)``."""
        index = bisect_right(self._at, start)
        return index < len(self._at) and self._at[index] < end

    def average(self, start: int, end: int) -> Decimal:
        """The time-weighted mean of the value over ``[start, end)``."""
        if end <= start:
            return self.at(start)
        if not self.changes_within(start, end):
            return self.at(start)
        total = ZERO
        cursor = start
        value = self.at(start)
        index = bisect_right(self._at, start)
        while index < len(self._at) and self._at[index] < end:
            total += value * (self._at[index] - cursor)
            cursor = self._at[index]
            value = self._values[index]
            index += 1
        total += value * (end - cursor)
        return total / (end - start)


@dataclass(frozen=True, slots=True)
class QueueLines:
    """One queue's part of one flavor's hour, in GPU-hours."""

    allocated: Decimal
    guarantee: Decimal  # in force this hour, after scaling to the healthy capacity
    used_within_guarantee: Decimal
    reserved_idle: Decimal
    used_above_guarantee: Decimal
    pool_idle_share: Decimal  # its part of the pool idle, in proportion to its usage


@dataclass(frozen=True, slots=True)
class FlavorLines:
    """One flavor's hour: its healthy capacity and the four lines, which add up to it."""

    capacity: Decimal
    guaranteed: Decimal  # the top-level guarantees before scaling
    scale: Decimal  # 1, or capacity / guaranteed when the guarantees exceed the capacity
    used: Decimal
    used_within_guarantee: Decimal
    reserved_idle: Decimal
    used_above_guarantee: Decimal
    pool_idle: Decimal
    pool_idle_shared: Decimal  # the part of the pool idle shared out in proportion to use
    queues: Mapping[int, QueueLines]


def scaled_as_the_core_does(
    capacity: Decimal, guarantees: Mapping[int, Decimal], parents: Mapping[int, int | None]
) -> dict[int, Decimal]:
    """``guarantees`` (queue id to GPU-hours) scaled to ``capacity`` by the decision core's own
    rule (``scale_guarantees``), counted in units of ``GPU_HOURS``."""
    units = Decimal(1) / GPU_HOURS
    flavor = "flavor"
    needed: set[int] = set()
    for queue in guarantees:  # the guaranteed queues and their ancestors
        seen: int | None = queue
        while seen is not None and seen not in needed:
            needed.add(seen)
            seen = parents.get(seen)
    tree = [
        QueueInfo(
            name=str(queue),
            parent=None if parents.get(queue) is None else str(parents[queue]),
            quota=(
                {flavor: QuotaInfo(int(guarantees[queue] * units), 0, 0)}
                if queue in guarantees
                else {}
            ),
        )
        for queue in sorted(needed)
    ]
    scaled = scale_guarantees(tree, {flavor: int(down(capacity) * units)})
    return {
        queue: (
            Decimal(scaled[(str(queue), flavor)].scaled) * GPU_HOURS
            if (str(queue), flavor) in scaled
            else amount
        )
        for queue, amount in guarantees.items()
    }


def _nearest_guaranteed(
    queue: int, parents: Mapping[int, int | None], held: set[int]
) -> int | None:
    """The nearest strict ancestor of ``queue`` that holds a guarantee, or None (the pool)."""
    seen = {queue}
    parent = parents.get(queue)
    while parent is not None and parent not in held and parent not in seen:
        seen.add(parent)
        parent = parents.get(parent)
    return parent if parent in held else None


def attribute_hour(
    *,
    capacity: Decimal,
    guarantees: Mapping[int, Decimal],
    allocated: Mapping[int, Decimal],
    parents: Mapping[int, int | None],
) -> FlavorLines:
    """Attribute one flavor's hour of healthy ``capacity`` to the four lines.

    ``guarantees`` and ``allocated`` map queue ids to GPU-hours this hour (guarantees as held,
    before scaling); ``parents`` is the queue tree (id to parent id, None for the root).
    """
    held = {queue for queue, amount in guarantees.items() if amount > 0}
    holder_of = {queue: _nearest_guaranteed(queue, parents, held) for queue in held}
    guaranteed = sum((guarantees[q] for q in held if holder_of[q] is None), ZERO)
    scale = Decimal(1)
    effective = {q: guarantees[q] for q in held}
    if guaranteed > capacity:
        scale = capacity / guaranteed
        effective = scaled_as_the_core_does(capacity, effective, parents)
    held_by_children: dict[int, Decimal] = {}
    for queue in held:
        parent = holder_of[queue]
        if parent is not None:
            held_by_children[parent] = held_by_children.get(parent, ZERO) + effective[queue]
    own_room = {q: max(effective[q] - held_by_children.get(q, ZERO), ZERO) for q in held}

    def depth(queue: int) -> int:
        steps, holder = 0, holder_of[queue]
        while holder is not None:
            steps, holder = steps + 1, holder_of[holder]
        return steps

    # Usage enters at its own queue when that holds a guarantee, else at the nearest holder.
    arriving: dict[int | None, dict[int, Decimal]] = {}
    for queue, amount in allocated.items():
        if amount <= 0:
            continue
        entry = queue if queue in held else _nearest_guaranteed(queue, parents, held)
        arriving.setdefault(entry, {})[queue] = amount
    within: dict[int, Decimal] = {}
    reserved: dict[int, Decimal] = {}
    for holder in sorted(held, key=lambda q: (-depth(q), q)):
        incoming = arriving.pop(holder, {})
        total = sum(incoming.values(), ZERO)
        room = own_room[holder]
        take = min(room, total)
        taken = ZERO
        passing: dict[int, Decimal] = {}
        for queue, amount in sorted(incoming.items()):
            share = amount if take == total else down(amount * take / total)
            within[queue] = within.get(queue, ZERO) + share
            taken += share
            if amount > share:
                passing[queue] = amount - share
        reserved[holder] = room - taken
        upward = arriving.setdefault(holder_of[holder], {})
        for queue, amount in passing.items():
            upward[queue] = upward.get(queue, ZERO) + amount

    used = sum((a for a in allocated.values() if a > 0), ZERO)
    capacity = max(capacity, used)
    idle_room = capacity - used
    total_reserved = sum(reserved.values(), ZERO)
    if total_reserved > idle_room:
        reserved = {q: down(r * idle_room / total_reserved) for q, r in reserved.items()}
        total_reserved = sum(reserved.values(), ZERO)

    pool_idle = capacity - used - total_reserved
    queues: dict[int, QueueLines] = {}
    for queue in sorted(set(allocated) | held):
        amount = max(allocated.get(queue, ZERO), ZERO)
        inside = within.get(queue, ZERO)
        queues[queue] = QueueLines(
            allocated=amount,
            guarantee=effective.get(queue, ZERO),
            used_within_guarantee=inside,
            reserved_idle=reserved.get(queue, ZERO),
            used_above_guarantee=amount - inside,
            pool_idle_share=down(pool_idle * amount / used) if used > 0 else ZERO,
        )
    used_within = sum((lines.used_within_guarantee for lines in queues.values()), ZERO)
    return FlavorLines(
        capacity=capacity,
        guaranteed=guaranteed,
        scale=scale,
        used=used,
        used_within_guarantee=used_within,
        reserved_idle=total_reserved,
        used_above_guarantee=used - used_within,
        pool_idle=pool_idle,
        pool_idle_shared=sum((lines.pool_idle_share for lines in queues.values()), ZERO),
        queues=queues,
    )


@dataclass(frozen=True, slots=True)
class ActiveSplit:
    """How much of a queue's (or a flavor's) use the GPUs really worked, line by line, in
    GPU-hours; each ``_idle`` part is the line less its ``_active`` part (idle allocated)."""

    used_active: Decimal
    used_idle: Decimal
    used_within_guarantee_active: Decimal
    used_within_guarantee_idle: Decimal
    used_above_guarantee_active: Decimal
    used_above_guarantee_idle: Decimal

    def __add__(self, other: ActiveSplit) -> ActiveSplit:
        return ActiveSplit(*(a + b for a, b in zip(self.amounts(), other.amounts(), strict=True)))

    def amounts(self) -> tuple[Decimal, ...]:
        """The six amounts, in the order of ``ACTIVE_SPLIT``."""
        return (
            self.used_active,
            self.used_idle,
            self.used_within_guarantee_active,
            self.used_within_guarantee_idle,
            self.used_above_guarantee_active,
            self.used_above_guarantee_idle,
        )


ACTIVE_SPLIT = tuple(ActiveSplit.__slots__)
NO_SPLIT = ActiveSplit(ZERO, ZERO, ZERO, ZERO, ZERO, ZERO)


def split_active(lines: QueueLines, active: Decimal) -> ActiveSplit:
    """Split a queue's two used lines into the part its GPUs worked and the part they sat
    idle, given ``active`` GPU-hours of its ``allocated`` ones (capped at them).

    Whether the guaranteed or the borrowed GPUs did the work is not observable, so the active
    GPU-hours are shared between the two lines in proportion to their size (rounded down on
    the guaranteed line, the rest on the other, never above either): each part is
    non-negative, active plus idle is the line, and the split adds up to ``allocated``."""
    used = lines.allocated
    worked = min(max(active, ZERO), used)
    within, above = lines.used_within_guarantee, lines.used_above_guarantee
    if used <= 0:
        return NO_SPLIT
    above_active = min(worked - down(within * worked / used), above)
    within_active = worked - above_active
    return ActiveSplit(
        used_active=worked,
        used_idle=used - worked,
        used_within_guarantee_active=within_active,
        used_within_guarantee_idle=within - within_active,
        used_above_guarantee_active=above_active,
        used_above_guarantee_idle=above - above_active,
    )


def split_flavor(lines: FlavorLines, active: Mapping[int, Decimal]) -> dict[int, ActiveSplit]:
    """Each queue's split of one flavor's hour (``active``: queue id to active GPU-hours)."""
    return {
        queue: split_active(part, active.get(queue, ZERO)) for queue, part in lines.queues.items()
    }
