"""Node-level placement and GPU fragmentation (FGD, Weng et al., USENIX ATC'23).

Fragmentation of a node is measured against the pod shapes the pool usually sees (the
"target workload"): for each typical shape, the free GPU capacity on the node that a pod of
that shape could not use is "fragmented"; the node's fragmentation is the popularity-weighted
sum. Placing a pod where it raises that sum the least keeps the pool able to take the work it
usually gets.

The measure follows the paper's reference simulator (hkust-adsl/kubernetes-scheduler-simulator):
each (node, shape) pair falls in one class (see `FragmentKind`); only in the "satisfied" class
(Q3) is part of the free GPU capacity usable -- the GPUs with at least the shape's per-GPU
request -- and everything else on the node counts as fragment. Shapes that ask no GPU (XL/XR)
and shapes whose GPU model the node does not have (no access) see all free GPU capacity as
fragment.

The pool's own figure (the Fragmentation page, the trend each cycle samples) weighs a node's
fragments only over the GPU shapes that node could ever hold (`fitting_node_fragmentation`):
a shape it cannot hold even empty -- more GPUs than it has, more CPU or memory, another GPU
model -- would otherwise count all its free GPUs as fragmented for ever (an idle flavor of
4-GPU nodes read as wholly fragmented while 8-GPU pods that may also use it waited). Placement
and the FGD replays keep the paper's measure over the whole distribution (`node_fragmentation`).

All functions are pure and deterministic; inputs are frozen and hashable so the decision core,
which sees many nodes in the same state, can reuse results.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from types import MappingProxyType

from gpupool.scheduler.types import MILLI

# The name gpupool/simulation imports; the value is types.MILLI (one constant).
MILLI_PER_GPU = MILLI

# gpupool's cost (see `placement_cost`): the fragmentation gradient plus this weight times the
# growth of CPU-stranded GPU. Chosen on the openb trace (docs/benchmarks.md, B2): 0 is FGD's
# gradient alone; 3..30 all gain about 0.4 points over it.
CPU_STRAND_WEIGHT = 10.0
# ... plus this weight times the growth of GPU stranded once CPU-only pods' CPU is counted too
# (`cpu_stranded_milli(..., with_cpu_only=True)`). Small: it mostly breaks ties, steering GPU
# pods onto CPU-poor nodes before CPU-only pods use that CPU up. On openb's cpu250 trace (CPU
# demand above the cluster's CPU) 0.01, 0.1 and 1 gain 1.5 to 1.8 points; alone, 0.1 costs
# default 0.03 points (10 seeds).
CPU_ONLY_STRAND_WEIGHT = 0.1
# ... plus this weight times the growth of the expected idle remainder of the GPUs the pod
# takes (`remainder_waste`): GPU-sharing pods stack where what is left is likely to be filled.
# With scarce fillers left out of the table (`SCARCE_FILLER_RATIO`), 3..10 gain 0.15-0.2
# points on openb default over 0.3 (docs/benchmarks.md, B2).
REMAINDER_WEIGHT = 5.0
# A single-GPU size counts as a filler in `remainder_waste_table` only if its supply -- how often
# it arrives per placement the table's own filling model asks of it (`filler_supply`) -- is at
# least this fraction of the best-supplied size's. On openb this leaves out the 160-milli pods:
# they are the only fit for the 190 milli beside an 810-milli pod, which arrives 20 times as
# often, so counting on them made that gap look nearly free.
SCARCE_FILLER_RATIO = 0.1
# Costs are rounded to a millionth of a milli-GPU, so equal placements compare equal whatever
# order their fragments were summed in (the vectorised simulator sums differently).
COST_DECIMALS = 6


@dataclass(frozen=True, slots=True)
class PodShape:
    """One pod's request as node-level placement sees it.

    `gpu_models` restricts the GPU models the pod may run on (empty: any model).
    """

    gpus: int
    milli: int = MILLI
    cpu_milli: int = 0
    memory_mib: int = 0
    gpu_models: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        """Reject shapes no node could ever serve."""
        if self.gpus < 0:
            raise ValueError(f"gpus: must be >= 0, got {self.gpus}")
        if not 1 <= self.milli <= MILLI:
            raise ValueError(f"milli: must be within 1..{MILLI}, got {self.milli}")
        if self.milli < MILLI and self.gpus != 1:
            raise ValueError("milli: a GPU fraction is only allowed with gpus == 1")
        if self.cpu_milli < 0 or self.memory_mib < 0:
            raise ValueError("cpu_milli/memory_mib: must be >= 0")

    @property
    def gpu_milli_total(self) -> int:
        """Milli-GPU the pod takes in total."""
        return self.gpus * self.milli

    @property
    def is_fraction(self) -> bool:
        """Whether the pod shares one GPU (asks less than a whole GPU)."""
        return self.gpus == 1 and self.milli < MILLI


@dataclass(frozen=True, slots=True)
class NodeState:
    """A node's free resources (hashable, so it can key caches).

    `gpu_model` is the model of the node's GPUs ("" when unknown or the node has none).
    """

    gpu_free_milli: tuple[int, ...]
    cpu_free_milli: int
    memory_free_mib: int
    gpu_model: str = ""

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
            key=lambda item: _shape_order(item[0]),
        )
        return cls(tuple(items))

    @classmethod
    def typical(cls, counts: Mapping[PodShape, float], coverage: float = 0.95) -> ShapeDistribution:
        """The most popular shapes covering `coverage` of the pods, renormalised.

        FGD's reference simulator takes shapes by decreasing count (ties in a fixed order)
        until they cover 95% of the pods, and drops the long tail.
        """
        if not 0 < coverage <= 1:
            raise ValueError(f"coverage: must be within (0, 1], got {coverage}")
        positive = [(shape, float(weight)) for shape, weight in counts.items() if weight > 0]
        total = sum(weight for _, weight in positive)
        if total <= 0:
            return cls(())
        ranked = sorted(positive, key=lambda item: (-item[1], *_shape_order(item[0])))
        kept: dict[PodShape, float] = {}
        covered = 0.0
        for shape, weight in ranked:
            if covered >= coverage * total:
                break
            kept[shape] = weight
            covered += weight
        return cls.from_counts(kept)


def _shape_order(shape: PodShape) -> tuple[int, int, int, int, tuple[str, ...]]:
    """A total order on shapes, so distributions are canonical."""
    return (
        shape.gpus,
        shape.milli,
        shape.cpu_milli,
        shape.memory_mib,
        tuple(sorted(shape.gpu_models)),
    )


class FragmentKind(enum.Enum):
    """How a node looks to one pod shape (the FGD paper's classes, Fig. 5)."""

    Q1_LACK_BOTH = "q1_lack_both"  # neither enough GPU nor CPU/memory
    Q2_LACK_GPU = "q2_lack_gpu"  # CPU/memory enough, GPUs not
    Q3_SATISFIED = "q3_satisfied"  # fits: only GPUs with less free than it asks are fragments
    Q4_LACK_CPU = "q4_lack_cpu"  # GPUs enough, CPU/memory not
    XL_SATISFIED = "xl_satisfied"  # asks no GPU and fits: all free GPU is useless to it
    XR_LACK_CPU = "xr_lack_cpu"  # asks no GPU and does not fit
    NO_ACCESS = "no_access"  # the node's GPU model is not one the shape may use


def accessible(node: NodeState, pod: PodShape) -> bool:
    """Whether the pod's GPU-model restriction allows this node (always true without GPUs)."""
    if pod.gpus == 0 or not pod.gpu_models:
        return True
    return node.gpu_model in pod.gpu_models


def _host_fits(node: NodeState, pod: PodShape) -> bool:
    """Whether CPU and memory are enough for the pod."""
    return pod.cpu_milli <= node.cpu_free_milli and pod.memory_mib <= node.memory_free_mib


def _gpus_fit(node: NodeState, pod: PodShape) -> bool:
    """Whether enough GPUs have at least the pod's per-GPU request free."""
    usable = sum(1 for free in node.gpu_free_milli if free >= pod.milli)
    return usable >= pod.gpus


def classify(node: NodeState, shape: PodShape) -> FragmentKind:
    """The FGD class of the node for a pod of this shape."""
    host_ok = _host_fits(node, shape)
    if shape.gpus == 0:
        return FragmentKind.XL_SATISFIED if host_ok else FragmentKind.XR_LACK_CPU
    if not accessible(node, shape):
        return FragmentKind.NO_ACCESS
    if _gpus_fit(node, shape):
        return FragmentKind.Q3_SATISFIED if host_ok else FragmentKind.Q4_LACK_CPU
    return FragmentKind.Q2_LACK_GPU if host_ok else FragmentKind.Q1_LACK_BOTH


def fits(node: NodeState, pod: PodShape) -> bool:
    """Whether the pod fits on the node: CPU, memory, GPU model and its GPUs."""
    if not _host_fits(node, pod):
        return False
    if pod.gpus == 0:
        return True
    return accessible(node, pod) and _gpus_fit(node, pod)


def _fraction_candidates(node: NodeState, pod: PodShape) -> list[int]:
    """Indices of the GPUs a GPU-sharing pod could take, in index order."""
    return [i for i, free in enumerate(node.gpu_free_milli) if free >= pod.milli]


def _whole_gpus(node: NodeState, pod: PodShape) -> tuple[int, ...]:
    """The lowest-indexed entirely free GPUs, as many as the pod asks."""
    whole = [i for i, free in enumerate(node.gpu_free_milli) if free >= MILLI]
    return tuple(whole[: pod.gpus])


def pick_gpus(
    node: NodeState, pod: PodShape, dist: ShapeDistribution | None = None
) -> tuple[int, ...] | None:
    """The GPU indices the pod would take on this node, or None if it does not fit.

    Whole GPUs: the lowest-indexed free ones. A fraction: without a distribution, the GPU it
    fits most tightly (best fit); with one, the GPU where it costs least (`placement_cost`).
    Ties go to the lowest index.
    """
    if dist is not None:
        best = best_placement(node, pod, dist)
        return None if best is None else best[0]
    if not fits(node, pod):
        return None
    if pod.gpus == 0:
        return ()
    if pod.is_fraction:
        tightest = min(
            (node.gpu_free_milli[i] - pod.milli, i) for i in _fraction_candidates(node, pod)
        )
        return (tightest[1],)
    return _whole_gpus(node, pod)


def take(node: NodeState, pod: PodShape, gpus: tuple[int, ...]) -> NodeState:
    """The node after placing the pod on the given GPUs (ValueError if that over-commits)."""
    if len(gpus) != pod.gpus or len(set(gpus)) != len(gpus):
        raise ValueError(f"gpus: expected {pod.gpus} distinct GPU indices, got {gpus}")
    if pod.cpu_milli > node.cpu_free_milli:
        raise ValueError("cpu_milli: not enough free CPU on the node")
    if pod.memory_mib > node.memory_free_mib:
        raise ValueError("memory_mib: not enough free memory on the node")
    if not accessible(node, pod):
        raise ValueError(f"gpu_models: node's model {node.gpu_model!r} is not allowed")
    free = list(node.gpu_free_milli)
    for index in gpus:
        if not 0 <= index < len(free):
            raise ValueError(f"gpus: index {index} is not on the node")
        if free[index] < pod.milli:
            raise ValueError(f"gpus: GPU {index} has {free[index]} milli free, needs {pod.milli}")
        free[index] -= pod.milli
    return NodeState(
        tuple(free),
        node.cpu_free_milli - pod.cpu_milli,
        node.memory_free_mib - pod.memory_mib,
        node.gpu_model,
    )


def shape_fragment(node: NodeState, shape: PodShape) -> int:
    """Free milli-GPU on the node that a pod of this shape could not use.

    Only when the shape fits (Q3) is part of the free capacity usable: the fragments are the
    GPUs with less free than it asks per GPU (for whole GPUs: any partly used GPU). In every
    other class -- it does not fit, it may not use this GPU model, or it asks no GPU at all --
    every free milli-GPU on the node is a fragment for it.
    """
    if classify(node, shape) is FragmentKind.Q3_SATISFIED:
        return sum(free for free in node.gpu_free_milli if free < shape.milli)
    return node.free_milli


@lru_cache(maxsize=65536)
def node_fragmentation(node: NodeState, dist: ShapeDistribution) -> float:
    """FGD's expected fragmented milli-GPU of the node under the shape distribution."""
    if not dist.shapes:
        return 0.0
    return sum(weight * shape_fragment(node, shape) for shape, weight in dist.shapes)


def empty_node(gpus: int, cpu_milli: int, memory_mib: int, gpu_model: str = "") -> NodeState:
    """A node of this size with nothing on it: every GPU whole, all its CPU and memory free."""
    return NodeState((MILLI,) * gpus, cpu_milli, memory_mib, gpu_model)


@lru_cache(maxsize=4096)
def gpu_shapes_that_fit(dist: ShapeDistribution, empty: NodeState) -> ShapeDistribution:
    """The shapes of the distribution that ask GPUs and fit `empty` (a node with nothing on
    it, `empty_node`), their weights renormalised: the work that could ever run on such a
    node. No shape when none does.

    A shape that asks no GPU cannot use any GPU wherever it goes, and one the node cannot hold
    even empty never will: neither says anything about how the node's free GPUs lie.
    """
    kept = [(shape, weight) for shape, weight in dist.shapes if shape.gpus and fits(empty, shape)]
    if len(kept) == len(dist.shapes):
        return dist
    return ShapeDistribution.from_counts(dict(kept))


def fitting_node_fragmentation(node: NodeState, empty: NodeState, dist: ShapeDistribution) -> float:
    """Expected fragmented milli-GPU of the node for the GPU work that could run on it.

    FGD's measure (`node_fragmentation`: a free GPU is fragmented for a pod that cannot use
    it) over `gpu_shapes_that_fit(dist, empty)`, where `empty` is the node with nothing on
    it: 0 on an idle node, and 0 when no shape of the distribution could ever run there.
    """
    return node_fragmentation(node, gpu_shapes_that_fit(dist, empty))


def fragmentation_gradient(
    node: NodeState, pod: PodShape, gpus: tuple[int, ...], dist: ShapeDistribution
) -> float:
    """How much the node's expected fragmentation grows if the pod takes these GPUs (FGD)."""
    after = take(node, pod, gpus)
    return node_fragmentation(after, dist) - node_fragmentation(node, dist)


@lru_cache(maxsize=256)
def cpu_per_gpu_milli(dist: ShapeDistribution) -> float:
    """CPU milli-cores the workload asks per milli-GPU (GPU shapes only; 0 without any)."""
    cpu = sum(w * shape.cpu_milli for shape, w in dist.shapes if shape.gpus)
    gpu = sum(w * shape.gpu_milli_total for shape, w in dist.shapes if shape.gpus)
    return cpu / gpu if gpu > 0 else 0.0


@lru_cache(maxsize=256)
def workload_cpu_per_gpu_milli(dist: ShapeDistribution) -> float:
    """CPU milli-cores the whole workload asks per milli-GPU, CPU-only shapes included.

    Like `cpu_per_gpu_milli`, but the CPU of the shapes that ask no GPU counts too: the CPU a
    node needs per free milli-GPU when it also takes its share of the CPU-only pods. 0 when no
    shape asks a GPU.
    """
    cpu = sum(w * shape.cpu_milli for shape, w in dist.shapes)
    gpu = sum(w * shape.gpu_milli_total for shape, w in dist.shapes if shape.gpus)
    return cpu / gpu if gpu > 0 else 0.0


def cpu_stranded_milli(
    node: NodeState, dist: ShapeDistribution, *, with_cpu_only: bool = False
) -> float:
    """Free milli-GPU on the node without the CPU the workload usually brings along with it.

    A node whose CPU is used up cannot take GPU pods however many GPUs it has free: with
    `cpu_per_gpu_milli` CPU per milli-GPU, the GPUs beyond what the free CPU can feed are
    stranded. With `with_cpu_only`, the ratio is `workload_cpu_per_gpu_milli` instead (the
    CPU-only pods' CPU counted too).
    """
    ratio = workload_cpu_per_gpu_milli(dist) if with_cpu_only else cpu_per_gpu_milli(dist)
    if ratio <= 0:
        return 0.0
    return max(0.0, node.free_milli - node.cpu_free_milli / ratio)


def _single_gpu_weights(dist: ShapeDistribution) -> dict[int, float]:
    """Weight of each per-GPU size among the distribution's single-GPU shapes."""
    weights: dict[int, float] = {}
    for shape, weight in dist.shapes:
        if shape.gpus == 1:
            weights[shape.milli] = weights.get(shape.milli, 0.0) + weight
    return weights


def _fill_table(sizes: list[tuple[int, float]]) -> list[float]:
    """Expected final idle milli of a GPU with r free when `sizes` (milli, weight) fill it."""
    table = [0.0] * (MILLI + 1)
    for free in range(1, MILLI + 1):
        total = expected = 0.0
        for milli, weight in sizes:
            if milli > free:
                break
            total += weight
            expected += weight * table[free - milli]
        table[free] = expected / total if total > 0 else float(free)
    return table


@lru_cache(maxsize=256)
def filler_supply(dist: ShapeDistribution) -> Mapping[int, float]:
    """Per single-GPU size: its weight over how often the random filling of a GPU places it.

    Starting from one whole GPU, the single-GPU sizes land in proportion to their weight among
    those that fit what is left (the model of `remainder_waste_table`); a size the model
    places far more often than it arrives -- a small pod that is the only fit for the gap
    beside a common large one -- cannot fill the gaps the model counts on it for. Only ratios
    between sizes matter.
    """
    weights = _single_gpu_weights(dist)
    sizes = sorted(weights.items())
    visits = [0.0] * (MILLI + 1)
    visits[MILLI] = 1.0
    placed = dict.fromkeys(weights, 0.0)
    for free in range(MILLI, 0, -1):
        fitting = [(milli, weight) for milli, weight in sizes if milli <= free]
        total = sum(weight for _, weight in fitting)
        if not visits[free] or total <= 0:
            continue
        for milli, weight in fitting:
            share = visits[free] * weight / total
            placed[milli] += share
            visits[free - milli] += share
    return MappingProxyType(
        {milli: weights[milli] / placed[milli] for milli in weights if placed[milli] > 0}
    )


@lru_cache(maxsize=256)
def remainder_waste_table(dist: ShapeDistribution) -> tuple[float, ...]:
    """`remainder_waste` of a GPU with r milli free, for r = 0..1000.

    Single-GPU pods (fractions and whole GPUs) of the distribution keep arriving, each in
    proportion to its weight; one that fits the GPU's remainder lands on it, one that does not
    goes elsewhere. The value is the expected milli the GPU is left with when nothing fits any
    more: r itself when no single-GPU shape fits r, else the weighted mean over the fitting
    shapes m of the value at r - m. Scarce sizes (`filler_supply` below `SCARCE_FILLER_RATIO`
    of the best) are not counted on as fillers. GPU-model restrictions are ignored.
    """
    weights = _single_gpu_weights(dist)
    supply = filler_supply(dist)
    best = max(supply.values(), default=0.0)
    sizes = sorted(
        (milli, weight)
        for milli, weight in weights.items()
        if supply.get(milli, 0.0) >= SCARCE_FILLER_RATIO * best
    )
    return tuple(_fill_table(sizes))


def remainder_waste(free_milli: int, dist: ShapeDistribution) -> float:
    """Expected milli-GPU a GPU with `free_milli` free ends up leaving idle (see the table)."""
    return remainder_waste_table(dist)[free_milli]


def _cost_of(
    node: NodeState, pod: PodShape, gpus: tuple[int, ...], dist: ShapeDistribution
) -> float:
    """gpupool's cost of one concrete placement (see `placement_cost`)."""
    after = take(node, pod, gpus)
    if not dist.shapes:
        return float(after.free_milli)
    growth = node_fragmentation(after, dist) - node_fragmentation(node, dist)
    stranding = cpu_stranded_milli(after, dist) - cpu_stranded_milli(node, dist)
    stranding_all = cpu_stranded_milli(after, dist, with_cpu_only=True) - cpu_stranded_milli(
        node, dist, with_cpu_only=True
    )
    waste = remainder_waste_table(dist)
    remainder = sum(waste[after.gpu_free_milli[i]] - waste[node.gpu_free_milli[i]] for i in gpus)
    cost = (
        growth
        + CPU_STRAND_WEIGHT * stranding
        + CPU_ONLY_STRAND_WEIGHT * stranding_all
        + REMAINDER_WEIGHT * remainder
    )
    return round(cost, COST_DECIMALS)


def _candidates(node: NodeState, pod: PodShape) -> list[tuple[int, ...]]:
    """Every GPU choice worth considering for the pod on the node (it must fit)."""
    if pod.gpus == 0:
        return [()]
    if pod.is_fraction:
        return [(i,) for i in _fraction_candidates(node, pod)]
    return [_whole_gpus(node, pod)]


@lru_cache(maxsize=65536)
def best_placement(
    node: NodeState, pod: PodShape, dist: ShapeDistribution
) -> tuple[tuple[int, ...], float] | None:
    """The cheapest GPU choice for the pod on the node and its cost, or None if it cannot fit.

    A GPU-sharing pod tries every GPU it fits on (as FGD does) and keeps the cheapest, ties to
    the lowest index; whole-GPU pods take the lowest-indexed free GPUs.
    """
    if not fits(node, pod):
        return None
    best: tuple[tuple[int, ...], float] | None = None
    for gpus in _candidates(node, pod):
        cost = _cost_of(node, pod, gpus, dist)
        if best is None or cost < best[1]:
            best = (gpus, cost)
    return best


def placement_cost(node: NodeState, pod: PodShape, dist: ShapeDistribution) -> float | None:
    """gpupool's cost of placing the pod on the node, lower is better; None if it cannot.

    The cost is the growth of the node's expected fragmentation (the fragmentation gradient
    of FGD) plus `CPU_STRAND_WEIGHT` times the growth of its CPU-stranded GPU
    (`cpu_stranded_milli`: CPU-only pods go where CPU is plentiful rather than starve GPUs),
    plus `CPU_ONLY_STRAND_WEIGHT` times the same growth with the CPU-only pods' CPU counted
    (GPU pods take CPU-poor nodes first), plus `REMAINDER_WEIGHT` times the growth of the
    expected idle remainder of the GPUs it takes (`remainder_waste`: a GPU-sharing pod stacks
    where the rest is likely to be filled), for the pod's cheapest GPU choice
    (`best_placement`), in milli-GPU. Without a distribution
    it falls back to best fit: the free milli-GPU left behind. It only looks at the node, and
    equal nodes cost the same: the caller breaks ties (by node name).
    """
    best = best_placement(node, pod, dist)
    return None if best is None else best[1]
