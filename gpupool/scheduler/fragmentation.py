"""Node-level placement and GPU fragmentation (FGD, Weng et al., USENIX ATC'23).

Fragmentation of a node is measured against the pod shapes the pool usually sees: for each
typical shape, the free GPU capacity on the node that a pod of that shape could not use is
"fragmented"; the node's fragmentation is the popularity-weighted sum. Placing a pod where it
raises that sum the least keeps the pool able to take the work it usually gets.

All functions are pure and deterministic; inputs are frozen and hashable so the decision core,
which sees many nodes in the same state, can reuse results.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache

MILLI_PER_GPU = 1000


@dataclass(frozen=True, slots=True)
class PodShape:
    """One pod's request as node-level placement sees it."""

    gpus: int
    milli: int = MILLI_PER_GPU
    cpu_milli: int = 0
    memory_mib: int = 0

    def __post_init__(self) -> None:
        """Reject shapes no node could ever serve."""
        if self.gpus < 0:
            raise ValueError(f"gpus: must be >= 0, got {self.gpus}")
        if not 1 <= self.milli <= MILLI_PER_GPU:
            raise ValueError(f"milli: must be within 1..{MILLI_PER_GPU}, got {self.milli}")
        if self.milli < MILLI_PER_GPU and self.gpus != 1:
            raise ValueError("milli: a GPU fraction is only allowed with gpus == 1")
        if self.cpu_milli < 0 or self.memory_mib < 0:
            raise ValueError("cpu_milli/memory_mib: must be >= 0")

    @property
    def gpu_milli_total(self) -> int:
        """Milli-GPU the pod takes in total."""
        return self.gpus * self.milli


@dataclass(frozen=True, slots=True)
class NodeState:
    """A node's free resources (hashable, so it can key caches)."""

    gpu_free_milli: tuple[int, ...]
    cpu_free_milli: int
    memory_free_mib: int

    @property
    def free_milli(self) -> int:
        """Free milli-GPU on the node, over all its GPUs."""
        return sum(self.gpu_free_milli)


@dataclass(frozen=True, slots=True)
class ShapeDistribution:
    """Popularity of pod shapes in the recent workload (FGD's 'target workload')."""

    shapes: tuple[tuple[PodShape, float], ...]

    @classmethod
    def from_counts(cls, counts: Mapping[PodShape, float]) -> ShapeDistribution:
        """Normalise counts (or weights) into a distribution, in a canonical order."""
        total = float(sum(weight for weight in counts.values() if weight > 0))
        if total <= 0:
            return cls(())
        items = sorted(
            ((shape, weight / total) for shape, weight in counts.items() if weight > 0),
            key=lambda item: (
                item[0].gpus,
                item[0].milli,
                item[0].cpu_milli,
                item[0].memory_mib,
            ),
        )
        return cls(tuple(items))


def _whole_free(node: NodeState) -> list[int]:
    """Indices of the node's GPUs that are entirely free."""
    return [i for i, free in enumerate(node.gpu_free_milli) if free >= MILLI_PER_GPU]


def fits(node: NodeState, pod: PodShape) -> bool:
    """Whether the pod fits on the node: CPU, memory, and its GPUs (whole or a fraction)."""
    if pod.cpu_milli > node.cpu_free_milli or pod.memory_mib > node.memory_free_mib:
        return False
    if pod.gpus == 0:
        return True
    if pod.milli < MILLI_PER_GPU:
        return any(free >= pod.milli for free in node.gpu_free_milli)
    return len(_whole_free(node)) >= pod.gpus


def pick_gpus(node: NodeState, pod: PodShape) -> tuple[int, ...] | None:
    """The GPU indices the pod would take on this node, or None if it does not fit.

    Whole GPUs: the lowest-indexed free ones. A fraction: the GPU it fits most tightly
    (best fit), ties to the lowest index, which keeps whole GPUs free for whole-GPU pods.
    """
    if not fits(node, pod):
        return None
    if pod.gpus == 0:
        return ()
    if pod.milli < MILLI_PER_GPU:
        best = min(
            (free - pod.milli, index)
            for index, free in enumerate(node.gpu_free_milli)
            if free >= pod.milli
        )
        return (best[1],)
    return tuple(_whole_free(node)[: pod.gpus])


def take(node: NodeState, pod: PodShape, gpus: tuple[int, ...]) -> NodeState:
    """The node after placing the pod on the given GPUs (ValueError if that over-commits)."""
    if len(gpus) != pod.gpus or len(set(gpus)) != len(gpus):
        raise ValueError(f"gpus: expected {pod.gpus} distinct GPU indices, got {gpus}")
    if pod.cpu_milli > node.cpu_free_milli:
        raise ValueError("cpu_milli: not enough free CPU on the node")
    if pod.memory_mib > node.memory_free_mib:
        raise ValueError("memory_mib: not enough free memory on the node")
    free = list(node.gpu_free_milli)
    for index in gpus:
        if not 0 <= index < len(free):
            raise ValueError(f"gpus: index {index} is not on the node")
        if free[index] < pod.milli:
            raise ValueError(f"gpus: GPU {index} has {free[index]} milli free, needs {pod.milli}")
        free[index] -= pod.milli
    return NodeState(
        tuple(free), node.cpu_free_milli - pod.cpu_milli, node.memory_free_mib - pod.memory_mib
    )


def shape_fragment(node: NodeState, shape: PodShape) -> int:
    """Free milli-GPU on the node that a pod of this shape could not use.

    If the pod cannot be placed at all (CPU, memory or GPUs short), every free milli-GPU on
    the node is a fragment for it; if it can, the fragments are the partly-used GPUs it cannot
    use (for a fraction: GPUs with less free than it asks; for whole GPUs: any partly-used GPU).
    A pod that asks no GPU and fits leaves no fragment.
    """
    total = node.free_milli
    if not fits(node, shape):
        return total
    if shape.gpus == 0:
        return 0
    return sum(free for free in node.gpu_free_milli if free < shape.milli)


@lru_cache(maxsize=65536)
def node_fragmentation(node: NodeState, dist: ShapeDistribution) -> float:
    """FGD's expected fragmented milli-GPU of the node under the shape distribution."""
    if not dist.shapes:
        return 0.0
    return sum(weight * shape_fragment(node, shape) for shape, weight in dist.shapes)


@lru_cache(maxsize=65536)
def placement_cost(node: NodeState, pod: PodShape, dist: ShapeDistribution) -> float | None:
    """gpupool's cost of placing the pod on the node, lower is better; None if it cannot.

    The cost is the growth of the node's expected fragmentation (the fragmentation gradient
    of FGD). Without a distribution it falls back to best fit: the free milli-GPU left behind.
    """
    gpus = pick_gpus(node, pod)
    if gpus is None:
        return None
    after = take(node, pod, gpus)
    if not dist.shapes:
        return float(after.free_milli)
    return node_fragmentation(after, dist) - node_fragmentation(node, dist)
