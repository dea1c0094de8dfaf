"""Dominant Resource Fairness across leaf queues (Ghodsi et al., NSDI'11).

A queue's dominant share is the largest, over resources (each GPU flavor, CPU, memory), of
its usage divided by the pool's capacity of that resource, divided by the queue's weight.
Resources of which the pool has none are ignored. Under ``policy.queue_order``
"dominant-share" (the default) allocation serves the queue with the smallest share next and
recomputes its share after each admission (progressive filling); ties go to the queue's
name.
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
    """Per-queue usage vectors and their weighted dominant shares."""

    def __init__(self, capacity: Mapping[str, int], weights: Mapping[str, float]) -> None:
        self.capacity = {name: amount for name, amount in capacity.items() if amount > 0}
        self.weights = dict(weights)
        self.usage: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))

    def add(self, queue: str, vector: Mapping[str, int], sign: int = 1) -> None:
        """Add (or remove) a usage vector to a queue."""
        usage = self.usage[queue]
        for resource, amount in vector.items():
            usage[resource] += sign * amount

    def share(self, queue: str) -> float:
        """The queue's weighted dominant share."""
        usage = self.usage.get(queue)
        if not usage:
            return 0.0
        dominant = max(
            (usage.get(resource, 0) / total for resource, total in self.capacity.items()),
            default=0.0,
        )
        return dominant / self.weights.get(queue, 1.0)
