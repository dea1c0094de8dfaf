"""Hierarchical Dominant Resource Fairness over the queue tree (Ghodsi et al., NSDI'11).

A queue's dominant share is the largest, over resources (each GPU flavor, CPU, memory), of
its usage -- its whole subtree's, for an inner queue -- divided by the pool's capacity of that
resource, divided by the queue's weight. Resources of which the pool has none are ignored.
Under ``policy.queue_order`` "dominant-share" (the default) allocation starts at the root and
picks the child with the smallest share, then that child's child with the smallest share,
down to a leaf, which admits its next workload; shares are recomputed after each admission
(progressive filling), ties go to the queue's name. So orgs share the pool by weight, then
teams share their org's part, as KAI's hierarchical queues and Volcano's drf plugin in its
hierarchical mode (HDRF) do. ``path_key`` turns that walk into one comparable key per leaf:
the (share, name) pairs along its path from the top, compared lexicographically. On a flat
tree it is the leaf's own (share, name).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping

CPU = "cpu"
MEMORY = "memory"


def gpu_resource(flavor: str) -> str:
    """The DRF resource name of a GPU flavor."""
    return f"gpu:{flavor}"


class DominantShares:
    """Per-queue usage vectors (a subtree's for an inner queue) and weighted dominant shares."""

    def __init__(
        self,
        capacity: Mapping[str, int],
        weights: Mapping[str, float],
        parents: Mapping[str, str | None] | None = None,
    ) -> None:
        self.capacity = {name: amount for name, amount in capacity.items() if amount > 0}
        self.weights = dict(weights)
        self.usage: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        self._shares: dict[str, float] = {}
        self._version: dict[str, int] = {}  # per queue, bumped whenever its usage changes
        parents = parents or {}
        # Each queue's path from itself up to (not including) the root, and from the top down.
        self._up: dict[str, tuple[str, ...]] = {}
        for name in parents:
            path = [name]
            parent = parents.get(name)
            while parent is not None and parents.get(parent) is not None:
                path.append(parent)
                parent = parents.get(parent)
            if parent is None and parents.get(name) is None:
                path = []  # the root itself has no share of its own
            self._up[name] = tuple(path)
        self._down = {name: tuple(reversed(path)) for name, path in self._up.items()}

    def add(self, queue: str, vector: Mapping[str, int], sign: int = 1) -> None:
        """Add (or remove) a usage vector to a leaf queue and every queue above it."""
        version = self._version
        for node in self._up.get(queue) or (queue,):
            usage = self.usage[node]
            for resource, amount in vector.items():
                usage[resource] += sign * amount
            self._shares.pop(node, None)
            version[node] = version.get(node, 0) + 1

    def share(self, queue: str) -> float:
        """The queue's weighted dominant share (of its subtree's usage)."""
        known = self._shares.get(queue)
        if known is not None:
            return known
        usage = self.usage.get(queue)
        dominant = 0.0
        if usage:
            dominant = max(
                (usage.get(resource, 0) / total for resource, total in self.capacity.items()),
                default=0.0,
            )
        value = self._shares[queue] = dominant / self.weights.get(queue, 1.0)
        return value

    def stamp(self, leaf: str) -> tuple[int, ...]:
        """How often the usage of each queue on the leaf's path (below the root) has changed:
        a key computed from that path is still current while this is unchanged."""
        version = self._version
        return tuple([version.get(node, 0) for node in self._up.get(leaf) or (leaf,)])

    def path_key(self, leaf: str) -> tuple[tuple[float, str], ...]:
        """The leaf's place in the hierarchical order: (share, name) from the top down."""
        shares = self._shares
        key: list[tuple[float, str]] = []
        for node in self._down.get(leaf) or (leaf,):
            known = shares.get(node)
            key.append((self.share(node) if known is None else known, node))
        return tuple(key)
