"""Deserved shares: what each queue gets of each flavor when the whole pool is contended.

A queue's **deserved share** of a flavor is the number of GPUs it holds under a fair split of
the pool's healthy GPUs of that flavor, made down the queue tree, when every leaf queue wants
more than it can get. At each parent, the parent's share (the pool's healthy capacity at the
top) is split among its children:

1. every child gets its deserved quota (its *floor*); when the floors exceed the parent's
   share, guarantees come first and the rest of the floors shrink in proportion (guarantees
   too, in proportion, when they alone exceed it, as the core scales them);
2. what remains goes to the children by weight, water-filling: each child's share is
   ``clamp(L x weight, floor, cap)`` for the one level ``L`` at which the shares add up to the
   parent's share, so capacity goes first to the children with the least per unit of weight;
3. a child never gets more than its *cap*: its capability, and no more than its own children
   can hold. When every child is at its cap, the rest stays idle.

A leaf queue without a quota entry for a flavor may use none of it (cap 0); an inner queue
without one passes its children's floors, guarantees and caps through. This is the split the
core's cycle converges to under saturation: each queue keeps (by reclaim) its deserved quota,
and idle capacity beyond the deserved quotas goes to the queues with the smallest usage per
unit of weight (weighted DRF order, fair-sharing reclaim) up to their capability
(``docs/scheduler.md``; ``docs/governance.md`` works an example by hand).

Pure: plain data in, plain data out; no Django.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from gpupool.scheduler.types import MILLI, NodeInfo, QueueInfo

# Shares are reported in GPUs, to the milli-GPU the core counts in.
PRECISION = 3


@dataclass(frozen=True)
class QueueShape:
    """A queue as a share split sees it: its place, weight and per-flavor quota in GPUs
    (flavor -> (guarantee, deserved, capability))."""

    name: str
    parent: str | None
    tenant: str | None = None
    weight: float = 1.0
    quota: Mapping[str, tuple[float, float, float]] = field(default_factory=dict)


@dataclass(frozen=True)
class PoolShape:
    """The queue tree with its quotas and the pool's healthy GPUs per flavor."""

    queues: tuple[QueueShape, ...]
    capacity: Mapping[str, float]

    def with_quota(
        self, queue: str, flavor: str, guarantee: float, deserved: float, capability: float
    ) -> PoolShape:
        """The same pool with one queue's quota of one flavor set (``KeyError``: no queue)."""
        if not any(q.name == queue for q in self.queues):
            raise KeyError(queue)
        return replace(
            self,
            queues=tuple(
                replace(q, quota={**q.quota, flavor: (guarantee, deserved, capability)})
                if q.name == queue
                else q
                for q in self.queues
            ),
        )


def pool_shape(queues: Iterable[QueueInfo], nodes: Iterable[NodeInfo]) -> PoolShape:
    """The share split's view of the core's queues and nodes (healthy GPUs as the core
    counts them: not on cordoned nodes, MIG instances for MIG flavors)."""
    capacity: dict[str, float] = defaultdict(float)
    for node in nodes:
        capacity[node.flavor] += node.healthy_gpus
    return PoolShape(
        queues=tuple(
            QueueShape(
                name=q.name,
                parent=q.parent,
                tenant=q.tenant,
                weight=q.weight,
                quota={
                    flavor: (
                        quota.guarantee / MILLI,
                        quota.deserved / MILLI,
                        quota.capability / MILLI,
                    )
                    for flavor, quota in q.quota.items()
                },
            )
            for q in queues
        ),
        capacity=dict(capacity),
    )


@dataclass(frozen=True)
class _Bounds:
    """What a child brings to its parent's split: guarantee <= floor <= cap, and its weight."""

    guarantee: float
    floor: float
    cap: float
    weight: float


def split(total: float, children: Mapping[str, _Bounds]) -> dict[str, float]:
    """``total`` GPUs split among ``children`` by the rules of the module's docstring."""
    if total <= 0 or not children:
        return dict.fromkeys(children, 0.0)
    caps = sum(b.cap for b in children.values())
    if caps <= total:
        return {name: b.cap for name, b in children.items()}
    guarantees = sum(b.guarantee for b in children.values())
    if guarantees >= total:
        return {name: b.guarantee * total / guarantees for name, b in children.items()}
    floors = sum(b.floor for b in children.values())
    if floors >= total:
        scale = (total - guarantees) / (floors - guarantees)
        return {name: b.guarantee + (b.floor - b.guarantee) * scale for name, b in children.items()}

    def filled(level: float) -> float:
        return sum(_clamp(level * b.weight, b.floor, b.cap) for b in children.values())

    # T(level) is continuous, piecewise linear and non-decreasing, with kinks where a child
    # leaves its floor or reaches its cap: find the kinks around ``total`` and interpolate.
    kinks = sorted(
        {0.0} | {x for b in children.values() for x in (b.floor / b.weight, b.cap / b.weight)}
    )
    low = 0.0
    for high in kinks:
        if filled(high) >= total:
            below, above = filled(low), filled(high)
            level = (
                high if above == below else low + (total - below) * (high - low) / (above - below)
            )
            break
        low = high
    else:  # unreachable: the caps exceed the total, so the last kink fills past it
        level = low
    return {name: _clamp(level * b.weight, b.floor, b.cap) for name, b in children.items()}


def _clamp(value: float, low: float, high: float) -> float:
    return min(max(value, low), high)


def deserved_shares(pool: PoolShape) -> dict[tuple[str, str], float]:
    """Every queue's deserved share of every flavor the pool has or a queue has quota of, in
    GPUs: ``{(queue, flavor): GPUs}`` (the module's docstring defines it)."""
    by_name = {q.name: q for q in pool.queues}
    children: dict[str | None, list[str]] = defaultdict(list)
    for q in pool.queues:
        children[q.parent if q.parent in by_name else None].append(q.name)
    flavors = sorted(set(pool.capacity) | {f for q in pool.queues for f in q.quota})
    shares: dict[tuple[str, str], float] = {}
    for flavor in flavors:
        bounds = _tree_bounds(flavor, by_name, children)
        # Top down: the pool's capacity to the roots, each queue's share to its children.
        stack: list[tuple[str | None, float]] = [(None, pool.capacity.get(flavor, 0.0))]
        while stack:
            parent, total = stack.pop()
            kids = {name: bounds[name] for name in children.get(parent, [])}
            for name, amount in split(total, kids).items():
                shares[(name, flavor)] = round(amount, PRECISION)
                stack.append((name, amount))
    return shares


def _tree_bounds(
    flavor: str, by_name: Mapping[str, QueueShape], children: Mapping[str | None, list[str]]
) -> dict[str, _Bounds]:
    """Every queue's bounds for ``flavor``, children before parents."""
    bounds: dict[str, _Bounds] = {}
    order: list[str] = []
    stack = list(children.get(None, []))
    while stack:  # parents before children; reversed below
        name = stack.pop()
        order.append(name)
        stack.extend(children.get(name, []))
    for name in reversed(order):
        queue = by_name[name]
        quota = queue.quota.get(flavor)
        kids = [bounds[child] for child in children.get(name, [])]
        if kids:
            cap = sum(k.cap for k in kids)
            floor = sum(k.floor for k in kids)
            guarantee = sum(k.guarantee for k in kids)
            if quota is not None:
                cap = min(quota[2], cap)
                floor = min(quota[1], cap)
                guarantee = min(quota[0], floor)
        elif quota is not None:
            guarantee, floor, cap = quota
        else:
            guarantee = floor = cap = 0.0
        bounds[name] = _Bounds(guarantee, floor, cap, queue.weight)
    return bounds


@dataclass(frozen=True)
class ShareChange:
    """How a change moves one queue's deserved share of one flavor, in GPUs."""

    queue: str
    tenant: str | None
    flavor: str
    before: float
    after: float

    @property
    def change(self) -> float:
        """After minus before."""
        return round(self.after - self.before, PRECISION)


def share_changes(before: PoolShape, after: PoolShape) -> list[ShareChange]:
    """The deserved shares that differ between two pools, by flavor then queue."""
    old, new = deserved_shares(before), deserved_shares(after)
    tenants = {q.name: q.tenant for q in after.queues}
    changes = []
    for queue, flavor in sorted(set(old) | set(new), key=lambda key: (key[1], key[0])):
        was, now = old.get((queue, flavor), 0.0), new.get((queue, flavor), 0.0)
        if was != now:
            changes.append(ShareChange(queue, tenants.get(queue), flavor, was, now))
    return changes


@dataclass(frozen=True)
class ParentCap:
    """A queue whose deserved quota of a flavor its deserved share cannot reach because its
    parent's deserved quota is less than its children's together: the parent's share is
    split among them (rule 1 of the module's docstring), so the raise is absorbed."""

    queue: str
    parent: str
    flavor: str
    deserved: float  # the queue's own deserved quota (within its capability)
    parent_deserved: float  # the parent's (within what its children can hold)
    children_deserved: float  # its children's together
    share: float  # the queue's deserved share, below ``deserved``


def capped_by_parent(pool: PoolShape, queue: str, flavor: str) -> ParentCap | None:
    """Whether ``queue``'s deserved share of ``flavor`` falls short of its deserved quota
    because its parent's deserved quota is less than its children's together (None: it does
    not, or the queue has no parent; ``KeyError``: no such queue). Nothing refuses such a
    tree (only guarantees must fit their parent's): the share is simply capped."""
    by_name = {q.name: q for q in pool.queues}
    parent = by_name[queue].parent
    if parent not in by_name:
        return None
    children: dict[str | None, list[str]] = defaultdict(list)
    for q in pool.queues:
        children[q.parent if q.parent in by_name else None].append(q.name)
    bounds = _tree_bounds(flavor, by_name, children)
    together = sum(bounds[child].floor for child in children[parent])
    share = deserved_shares(pool).get((queue, flavor), 0.0)
    own = bounds[queue].floor
    if together <= bounds[parent].floor or share >= round(own, PRECISION):
        return None
    return ParentCap(
        queue=queue,
        parent=parent,
        flavor=flavor,
        deserved=round(own, PRECISION),
        parent_deserved=round(bounds[parent].floor, PRECISION),
        children_deserved=round(together, PRECISION),
        share=share,
    )
