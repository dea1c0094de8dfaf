"""What each queue holds now, borrows and lends, per flavor: read off the scheduler's own
quota tree (``quota.QuotaTree``, with the usage of the running work added), so the numbers
are the ones the cycle decides with.

- **allocated**: the usage of the queue's subtree.
- **borrowed**: allocated above the queue's deserved share (none without a quota).
- **lent**: the part of the queue's deserved share that others use now.

Lending happens inside a *cohort*: the queues that have a quota of the flavor and count
against the same nearest ancestor with one (the *holder*; the pool when there is none), the
same grouping the guarantee rules use. The holder's own share (its deserved quota; the pool's
healthy capacity) is used first by each member up to its deserved share; what members use
beyond that comes from the holder's share that no member deserves, then from the members'
idle deserved shares (those are lent), and past the holder's share from the holder borrowing
in its own cohort. So a cohort lends ``min(used, share) - used within deserved - unassigned``,
split among the members in proportion to what each may lend now (its idle deserved less its
guarantee and anything beyond its lending limit: ``deserved - claim`` in the tree's terms),
in milli-GPU, the remainders going to the largest fractions (ties by name).
"""

from __future__ import annotations

from dataclasses import dataclass

from gpupool.scheduler.quota import QuotaTree


@dataclass(frozen=True, slots=True)
class QueueShare:
    """One queue's holding of one flavor now, in milli-GPU."""

    allocated: int
    borrowed: int
    lent: int


def queue_shares(tree: QuotaTree) -> dict[str, dict[str, QueueShare]]:
    """Per queue, per flavor it has a quota of or uses: allocated, borrowed and lent."""
    flavors: set[str] = set(tree.pool)
    for name, queue in tree.queues.items():
        flavors.update(queue.quota)
        flavors.update(flavor for flavor, used in tree.usage[name].items() if used)
    shares: dict[str, dict[str, QueueShare]] = {name: {} for name in sorted(tree.queues)}
    for flavor in sorted(flavors):
        lent = _lent(tree, flavor)
        for name in shares:
            quota = tree.quota(name, flavor)
            used = tree.usage[name].get(flavor, 0)
            if quota is None and not used:
                continue
            borrowed = 0 if quota is None else max(0, used - quota.deserved)
            shares[name][flavor] = QueueShare(used, borrowed, lent.get(name, 0))
    return shares


def _holder(tree: QuotaTree, name: str, flavor: str) -> str:
    """The nearest ancestor with a quota of the flavor ("" stands for the pool)."""
    for ancestor in tree.path[name][1:]:
        if tree.quota(ancestor, flavor) is not None:
            return ancestor
    return ""


def _lent(tree: QuotaTree, flavor: str) -> dict[str, int]:
    """How much of each queue's deserved share of the flavor others use now."""
    cohorts: dict[str, list[str]] = {}
    for name in sorted(tree.queues):
        if tree.quota(name, flavor) is not None:
            cohorts.setdefault(_holder(tree, name, flavor), []).append(name)
    lent: dict[str, int] = {}
    for holder, members in sorted(cohorts.items()):
        holder_quota = tree.quota(holder, flavor) if holder else None
        share = holder_quota.deserved if holder_quota is not None else tree.pool.get(flavor, 0)
        used = within = deserved = 0
        lendable: dict[str, int] = {}
        for member in members:
            quota = tree.quota(member, flavor)
            assert quota is not None
            member_used = tree.usage[member].get(flavor, 0)
            used += member_used
            within += min(member_used, quota.deserved)
            deserved += quota.deserved
            if member_used < quota.deserved:
                lendable[member] = max(0, quota.deserved - tree.claim(member, flavor))
        unassigned = max(0, share - deserved)
        total = min(max(0, min(used, share) - within - unassigned), sum(lendable.values()))
        lent.update(_split(total, lendable))
    return lent


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
