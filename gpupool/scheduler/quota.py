"""Hierarchical quota: guarantee / deserved / capability with borrowing and lending limits.

Each queue of the tree has, per flavor, a usage (its whole subtree's, in milli-GPU). What a
queue may still take is:

- up to its ``deserved`` unconditionally (nominal quota is always its own; if others borrowed
  it, reclaim gets it back), and beyond that
- whatever its parent could hold minus what its siblings *claim*, never past ``capability``.

A sibling claims its usage, and when below its deserved share also the part of its idle
deserved it does not lend: its guarantee (never lent) and anything beyond its lending limit.
The root stands for the pool's healthy capacity. This is Kueue's cohort borrowing generalised
to a tree (Kueue: nominalQuota / borrowingLimit / lendingLimit; Volcano: guarantee /
deserved / capability). Claims are kept incrementally, so a check costs the tree's depth.

Guarantees are honoured as far as capacity allows (``scale_guarantees``): where failed GPUs
or cordoned nodes leave the pool's healthy GPUs short of the guarantees they back, the tree
holds them scaled down in proportion, so no queue is promised more than exists.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from gpupool.scheduler.types import QueueInfo, QuotaInfo

UNLIMITED = 1 << 62


@dataclass(frozen=True, slots=True)
class QuotaShortfall:
    """Why a request does not pass quota: the first flavor that lacks room."""

    queue: str
    flavor: str
    asked: int
    available: int
    borrowing_capped: bool
    never: bool = False


@dataclass(frozen=True, slots=True)
class ScaledGuarantee:
    """A queue's guarantee of a flavor scaled down to what backs it (milli-GPU).

    ``backed_by`` is the nearest ancestor with a quota for the flavor, whose guarantee backs
    this one, or None for the pool's healthy GPUs; ``backing`` is what it now holds and
    ``guaranteed`` the total of the guarantees it backs, as configured.
    """

    queue: str
    flavor: str
    guarantee: int
    scaled: int
    backed_by: str | None
    backing: int
    guaranteed: int


def guarantee_groups(queues: Sequence[QueueInfo], flavor: str) -> dict[str | None, list[str]]:
    """The queues with a quota for ``flavor``, grouped by the nearest ancestor that has one
    (None: none has, so the pool backs them), each group in the order of ``queues``.

    A queue that backs a group comes before that group's members in the dict's order
    (parents before children), so a walk in order meets each backing guarantee first.
    """
    by_name = {queue.name: queue for queue in queues}
    holder_of: dict[str, str | None] = {}
    for queue in queues:
        if flavor not in queue.quota:
            continue
        holder = queue.parent
        seen = {queue.name}
        while holder is not None and flavor not in by_name[holder].quota and holder not in seen:
            seen.add(holder)
            holder = by_name[holder].parent
        holder_of[queue.name] = holder if holder is not None and holder not in seen else None
    members: dict[str | None, list[str]] = defaultdict(list)
    for name, holder in holder_of.items():
        members[holder].append(name)
    groups: dict[str | None, list[str]] = {}
    order: list[str | None] = [None]
    index = 0
    while index < len(order):
        holder = order[index]
        index += 1
        if holder in members:
            groups[holder] = members[holder]
            order.extend(members[holder])
    return groups


def _apportion(amounts: list[tuple[str, int]], capacity: int) -> dict[str, int]:
    """Split ``capacity`` in proportion to ``amounts`` (largest remainders, ties by name)."""
    total = sum(amount for _, amount in amounts)
    shares: dict[str, int] = {}
    remainders: list[tuple[int, str]] = []
    for name, amount in amounts:
        share, remainder = divmod(amount * capacity, total)
        shares[name] = share
        remainders.append((-remainder, name))
    for _, name in sorted(remainders)[: capacity - sum(shares.values())]:
        shares[name] += 1
    return shares


def scale_guarantees(
    queues: Sequence[QueueInfo], pool: Mapping[str, int]
) -> dict[tuple[str, str], ScaledGuarantee]:
    """The guarantees that no longer fit what backs them, scaled down in proportion.

    Per flavor, the guarantees backed by the pool (those with no ancestor that has a quota
    for the flavor) share its healthy GPUs, and those under a queue with a quota share that
    queue's guarantee. A group that fits keeps its guarantees; one that does not gets, each,
    guarantee x backing / total guaranteed, rounded down to the milli-GPU, and the milli-GPU
    left over go one each to the largest remainders (ties by name), so the group's sum is
    exactly what backs it. Groups are scaled parents first, so a guarantee scaled down scales
    the ones it backs in turn. Keyed by (queue, flavor); guarantees that keep their value are
    not listed.
    """
    by_name = {queue.name: queue for queue in queues}
    flavors = sorted({flavor for queue in queues for flavor in queue.quota})
    scaled: dict[tuple[str, str], ScaledGuarantee] = {}
    for flavor in flavors:
        for holder, names in guarantee_groups(queues, flavor).items():
            if holder is None:
                backing = max(pool.get(flavor, 0), 0)
            else:
                known = scaled.get((holder, flavor))
                backing = by_name[holder].quota[flavor].guarantee if known is None else known.scaled
            amounts = [(name, by_name[name].quota[flavor].guarantee) for name in names]
            guaranteed = sum(amount for _, amount in amounts)
            if guaranteed <= backing:
                continue
            for name, share in _apportion(amounts, backing).items():
                guarantee = by_name[name].quota[flavor].guarantee
                if share < guarantee:
                    scaled[(name, flavor)] = ScaledGuarantee(
                        name, flavor, guarantee, share, holder, backing, guaranteed
                    )
    return scaled


def _with_scaled_guarantees(
    queue: QueueInfo, scaled: Mapping[tuple[str, str], ScaledGuarantee]
) -> QueueInfo:
    """The queue with each of its scaled guarantees in place of the configured one."""
    quota: dict[str, QuotaInfo] = {}
    for flavor, levels in queue.quota.items():
        entry = scaled.get((queue.name, flavor))
        quota[flavor] = (
            levels if entry is None else QuotaInfo(entry.scaled, levels.deserved, levels.capability)
        )
    return dataclasses.replace(queue, quota=quota)


class QuotaTree:
    """Usage and headroom of every queue of the tree, per flavor.

    The guarantees it holds are the ones the pool can back (``scale_guarantees``);
    ``scaled`` lists those scaled down.
    """

    def __init__(self, queues: tuple[QueueInfo, ...], pool: Mapping[str, int]) -> None:
        self.scaled = scale_guarantees(queues, pool)
        if self.scaled:
            queues = tuple(_with_scaled_guarantees(queue, self.scaled) for queue in queues)
        self.queues = {q.name: q for q in queues}
        self.pool = dict(pool)
        self.children: dict[str, list[str]] = defaultdict(list)
        for queue in queues:
            if queue.parent is not None:
                self.children[queue.parent].append(queue.name)
        # None for a pool with no queue yet (a fresh install): nothing to plan but nodes.
        self.root: str | None = next((q.name for q in queues if q.parent is None), None)
        self.path: dict[str, tuple[str, ...]] = {name: self._path(name) for name in self.queues}
        self.usage: dict[str, dict[str, int]] = {name: defaultdict(int) for name in self.queues}
        self.claims: dict[str, dict[str, int]] = {name: defaultdict(int) for name in self.queues}
        self._version: dict[str, int] = defaultdict(int)  # per flavor, bumped on each change
        self._available: dict[tuple[str, str], tuple[int, int]] = {}
        for queue in queues:
            if queue.parent is not None:
                for flavor in queue.quota:
                    self.claims[queue.parent][flavor] += self._claim(queue.name, flavor, 0)

    def _path(self, name: str) -> tuple[str, ...]:
        path = [name]
        parent = self.queues[name].parent
        while parent is not None:
            path.append(parent)
            parent = self.queues[parent].parent
        return tuple(path)

    def scaled_on_path(self, name: str, flavors: Sequence[str]) -> ScaledGuarantee | None:
        """The first guarantee of one of ``flavors`` scaled down on the queue's path, the
        queue's own first, then its ancestors' (flavors in name order)."""
        if not self.scaled:
            return None
        for node in self.path[name]:
            for flavor in sorted(flavors):
                entry = self.scaled.get((node, flavor))
                if entry is not None:
                    return entry
        return None

    def is_leaf(self, name: str) -> bool:
        """Whether the queue receives workloads (has no children)."""
        return name not in self.children

    def quota(self, name: str, flavor: str) -> QuotaInfo | None:
        """The queue's quota entry for the flavor, if any."""
        return self.queues[name].quota.get(flavor)

    def claim(self, name: str, flavor: str) -> int:
        """What the queue holds of its parent's capacity: usage plus unlent idle deserved."""
        return self._claim(name, flavor, self.usage[name][flavor])

    def _claim(self, name: str, flavor: str, used: int) -> int:
        quota = self.queues[name].quota.get(flavor)
        if quota is None or used >= quota.deserved:
            return used
        idle = quota.deserved - max(used, quota.guarantee)
        limit = self.queues[name].lending_limit
        lendable = idle if limit is None or limit >= idle else limit
        return quota.deserved - lendable

    def add(self, name: str, flavor: str, delta: int) -> None:
        """Change a leaf queue's usage (and its ancestors') by ``delta`` milli-GPU."""
        self._version[flavor] += 1
        for node in self.path[name]:
            usage = self.usage[node]
            used = usage[flavor]
            usage[flavor] = used + delta
            queue = self.queues[node]
            if queue.parent is None:
                continue
            quota = queue.quota.get(flavor)
            if quota is None or (used >= quota.deserved and used + delta >= quota.deserved):
                change = delta  # above deserved (or no quota) a queue claims just its usage
            else:
                change = self._claim(node, flavor, used + delta) - self._claim(node, flavor, used)
            self.claims[queue.parent][flavor] += change

    def available(self, name: str, flavor: str) -> int:
        """The most the queue's subtree may take on top of its usage right now."""
        memo = (name, flavor)
        known = self._available.get(memo)
        version = self._version[flavor]
        if known is not None and known[0] == version:
            return known[1]
        room = self._compute_available(name, flavor)
        self._available[memo] = (version, room)
        return room

    def _compute_available(self, name: str, flavor: str) -> int:
        used = self.usage[name][flavor]
        quota = self.quota(name, flavor)
        parent = self.queues[name].parent
        if quota is None and self.is_leaf(name):
            return 0
        if parent is None:
            room = self.pool.get(flavor, 0) - used
            return room if quota is None else min(room, quota.capability - used)
        parent_total = self.usage[parent][flavor] + self.available(parent, flavor)
        siblings = self.claims[parent][flavor] - self.claim(name, flavor)
        from_parent = parent_total - siblings - used
        if quota is None:
            return from_parent
        # A queue's deserved share is its own whatever its siblings borrowed (reclaim gets it
        # back), but no capability on its path is ever passed: capability is a hard cap.
        above = self.capability_room(parent, flavor)
        return min(quota.capability - used, max(quota.deserved - used, from_parent), above)

    def capability_room(self, name: str, flavor: str) -> int:
        """Room under the tightest capability on the queue's path (a leaf with no quota for
        the flavor has none)."""
        room = UNLIMITED
        for node in self.path[name]:
            quota = self.queues[node].quota.get(flavor)
            if quota is not None:
                room = min(room, quota.capability - self.usage[node][flavor])
        if self.is_leaf(name) and flavor not in self.queues[name].quota:
            return 0
        return room

    def never_fits(self, name: str, need: Mapping[str, int]) -> QuotaShortfall | None:
        """A flavor of which the request exceeds a capability on the path even when idle.

        (A request larger than the pool itself is a capacity question, not a quota one.)
        """
        for flavor, amount in sorted(need.items()):
            if amount <= 0:
                continue
            limit = UNLIMITED
            for node in self.path[name]:
                quota = self.quota(node, flavor)
                if quota is not None:
                    limit = min(limit, quota.capability)
            if self.quota(name, flavor) is None:
                limit = 0
            if amount > limit:
                return QuotaShortfall(name, flavor, amount, limit, True, never=True)
        return None

    def check(self, name: str, need: Mapping[str, int]) -> QuotaShortfall | None:
        """None if the leaf queue may take ``need`` now, else the first shortfall."""
        for flavor, amount in sorted(need.items()):
            if amount <= 0:
                continue
            room = self.available(name, flavor)
            if amount > room:
                capped = self.capability_room(name, flavor) < amount
                return QuotaShortfall(name, flavor, amount, max(room, 0), capped)
        return None

    def within_deserved(self, name: str, need: Mapping[str, int]) -> bool:
        """Whether the leaf queue, and every queue above it with a quota for a flavor asked,
        stays within its deserved share after taking ``need`` (a leaf with no quota for the
        flavor has no share of it): then no queue on its path is above its deserved share
        for what it took (``over_deserved_by`` stays 0), the test by which reclaim picks the
        queues it takes from (``victims.ReclaimSearch.candidates``)."""
        for flavor, amount in need.items():
            if amount <= 0:
                continue
            if self.quota(name, flavor) is None:
                return False
            for node in self.path[name]:
                quota = self.queues[node].quota.get(flavor)
                if quota is not None and self.usage[node][flavor] + amount > quota.deserved:
                    return False
        return True

    def borrow_level(self, name: str, need: Mapping[str, int]) -> int:
        """How far up the tree the leaf queue must borrow to take ``need``: 0 when it stays
        within its own deserved share, else the index on its path of the nearest ancestor
        whose deserved share still holds it (queues without quota for a flavor stand for
        their parent and are skipped), or the path's length when only the pool does. The
        largest over the flavors asked."""
        level = 0
        path = self.path[name]
        for flavor, amount in need.items():
            if amount <= 0:
                continue
            found = len(path)
            for index, node in enumerate(path):
                quota = self.queues[node].quota.get(flavor)
                if quota is not None and self.usage[node][flavor] + amount <= quota.deserved:
                    found = index
                    break
            level = max(level, found)
        return level

    def entitled_level(
        self, name: str, need: Mapping[str, int], released: Mapping[str, int] | None = None
    ) -> int | None:
        """Where on the leaf's path the request falls within a deserved share it may take
        back when lent: 0 for the leaf's own; for a leaf with no deserved share of its own,
        the index of the nearest ancestor that has one (it reclaims for that ancestor, as
        Kueue's hierarchical cohorts let a queue reclaim once its request fits an ancestor's
        nominal quota). None when the request does not fit there. ``released`` is usage the
        leaf would give up first (its own work it may preempt). The largest over flavors."""
        level = 0
        path = self.path[name]
        for flavor, amount in need.items():
            if amount <= 0:
                continue
            freed = released.get(flavor, 0) if released else 0
            found: int | None = None
            for index, node in enumerate(path):
                quota = self.queues[node].quota.get(flavor)
                if quota is None and index == 0:
                    return None  # a leaf may use none of a flavor it has no quota for
                if quota is None or quota.deserved <= 0:
                    continue  # no share of its own: judged at the nearest ancestor's
                if self.usage[node][flavor] - freed + amount <= quota.deserved:
                    found = index
                break
            if found is None:
                return None
            level = max(level, found)
        return level

    def over_deserved_by(self, name: str, flavor: str) -> int:
        """How far the queue's subtree is above its deserved share (0 if not, or no quota)."""
        quota = self.quota(name, flavor)
        if quota is None:
            return 0
        return max(0, self.usage[name][flavor] - quota.deserved)
