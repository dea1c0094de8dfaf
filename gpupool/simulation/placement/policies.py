"""Placement policies for trace replay, each from its published definition.

Every policy scores the feasible nodes of one task at a time and takes the best; ties go to
the node first in the run's tie-break order (the reference simulator's "lowest node name"
over randomly prefixed names). Scores are vectorised over nodes with numpy.

* `random` -- a uniformly random feasible node (the simulator's RandomScore) and, for a
  GPU-sharing pod, a random GPU on it that fits (the paper runs Random with `-gpusel random`);
  the other policies but fgd and gpupool put a sharing pod on its tightest GPU.
* `k8s-default` -- kube-scheduler's NodeResourcesLeastAllocated + BalancedAllocation, equal
  weights, over CPU, memory and GPU (GPU as an extended resource).
* `bestfit` -- the FGD simulator's BestFitScore: least free CPU and GPU left, normalised.
* `fgd` -- FGD: `int(100 * sigmoid(-delta / 1000))` of the fragmentation growth `delta`;
  a GPU-sharing pod takes the GPU with the best such score on the chosen node.
* `gpupool` -- the product's own `gpupool.scheduler.fragmentation.placement_cost`.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from typing import Protocol

import numpy as np

from gpupool.scheduler.fragmentation import (
    COST_DECIMALS,
    CPU_ONLY_STRAND_WEIGHT,
    CPU_STRAND_WEIGHT,
    REMAINDER_WEIGHT,
    PodShape,
    ShapeDistribution,
    best_placement,
    cpu_per_gpu_milli,
    node_fragmentation,
    pick_gpus,
    remainder_waste_table,
    take,
    workload_cpu_per_gpu_milli,
)
from gpupool.scheduler.types import MILLI
from gpupool.simulation.placement.array_cluster import (
    ArrayCluster,
    FloatArray,
    FragmentationTable,
    IntArray,
    fraction_options,
)

MAX_SPEC_CPU = 128_000  # the FGD simulator's normalisers for BestFit
MAX_SPEC_GPU = 8_000
DEFAULT_CPU_REQUEST = 100  # kube-scheduler's non-zero defaults
DEFAULT_MEMORY_REQUEST_MIB = 200


class PlacementPolicy(Protocol):
    """Chooses a node and GPUs for one task among the feasible nodes."""

    name: str

    def choose(self, shape: PodShape, nodes: IntArray) -> tuple[int, tuple[int, ...]] | None:
        """The node and GPU indices for the task, or None to drop it."""
        ...

    def placed(self, index: int) -> None:
        """Told after the task was placed on a node (to update cached state)."""
        ...


def _first_in_order(nodes: IntArray, score: FloatArray | IntArray, rank: IntArray) -> int:
    """The node with the highest score; ties to the lowest tie-break rank."""
    best = score.max()
    tied = nodes[score == best]
    return int(tied[np.argmin(rank[tied])])


class _Base:
    """Shared plumbing: the cluster, the tie-break ranks, best-fit GPU choice."""

    name = ""

    def __init__(self, cluster: ArrayCluster, rank: IntArray) -> None:
        """Keep the cluster and the tie-break order."""
        self.cluster = cluster
        self.rank = rank

    def gpus_for(self, index: int, shape: PodShape) -> tuple[int, ...]:
        """Best-fit GPU choice on the node (the FGD simulator's default for other policies)."""
        gpus = pick_gpus(self.cluster.state(index), shape)
        if gpus is None:  # pragma: no cover - the node was filtered as feasible
            raise RuntimeError(f"task does not fit on node {index}")
        return gpus

    def placed(self, index: int) -> None:
        """Nothing cached by default."""


class RandomPolicy(_Base):
    """A uniformly random feasible node and, for a GPU-sharing pod, a random GPU on it that
    fits -- the FGD paper's Random (its simulator run with ``-gpusel random``), seeded."""

    name = "random"

    def __init__(self, cluster: ArrayCluster, rank: IntArray, seed: int) -> None:
        """Seed the policy's own random stream."""
        super().__init__(cluster, rank)
        self.rng = random.Random(seed)

    def choose(self, shape: PodShape, nodes: IntArray) -> tuple[int, tuple[int, ...]] | None:
        """Any feasible node, uniformly; a sharing pod on any GPU of it that fits, uniformly."""
        index = int(nodes[self.rng.randrange(len(nodes))])
        if not shape.is_fraction:
            return index, self.gpus_for(index, shape)
        free = self.cluster.gpu_free[index, : self.cluster.nodes[index].gpus]
        fitting = np.flatnonzero(free >= shape.milli)
        return index, (int(fitting[self.rng.randrange(len(fitting))]),)


class KubernetesDefaultPolicy(_Base):
    """kube-scheduler's default spread: LeastAllocated + BalancedAllocation (weights 1, 1)."""

    name = "k8s-default"

    def choose(self, shape: PodShape, nodes: IntArray) -> tuple[int, tuple[int, ...]] | None:
        """Score requested-after fractions of CPU, memory and GPU; highest total wins."""
        c = self.cluster
        cpu_request = shape.cpu_milli or DEFAULT_CPU_REQUEST
        memory_request = shape.memory_mib or DEFAULT_MEMORY_REQUEST_MIB
        capacities = (c.cpu_capacity[nodes], c.memory_capacity[nodes], c.gpu_capacity[nodes])
        requested = (
            c.cpu_capacity[nodes] - c.cpu_free[nodes] + cpu_request,
            c.memory_capacity[nodes] - c.memory_free[nodes] + memory_request,
            c.gpu_capacity[nodes] - c.free_total[nodes] + shape.gpu_milli_total,
        )
        least = np.zeros(len(nodes), dtype=np.int64)
        fractions = []
        for capacity, used in zip(capacities, requested, strict=True):
            least += np.where(used > capacity, 0, (capacity - used) * 100 // capacity)
            fractions.append(np.minimum(used / capacity, 1.0))
        least //= len(capacities)
        stacked = np.vstack(fractions)
        deviation = np.sqrt(((stacked - stacked.mean(axis=0)) ** 2).mean(axis=0))
        balanced = ((1.0 - deviation) * 100).astype(np.int64)
        index = _first_in_order(nodes, least + balanced, self.rank)
        return index, self.gpus_for(index, shape)


class BestFitPolicy(_Base):
    """The FGD simulator's BestFitScore: 0.5 x CPU left / 128 cores + 0.5 x GPU left / 8 GPUs."""

    name = "bestfit"

    def choose(self, shape: PodShape, nodes: IntArray) -> tuple[int, tuple[int, ...]] | None:
        """Least resources left after the task wins (integer scores, as the simulator's)."""
        c = self.cluster
        cpu_left = (c.cpu_free[nodes] - shape.cpu_milli) / MAX_SPEC_CPU * 0.5
        gpu_left = (c.free_total[nodes] - shape.gpu_milli_total) / MAX_SPEC_GPU * 0.5
        score = np.trunc((1.0 - (cpu_left + gpu_left)) * 100).astype(np.int64)
        index = _first_in_order(nodes, score, self.rank)
        return index, self.gpus_for(index, shape)


def fgd_score(delta: FloatArray) -> IntArray:
    """FGD's node score: `int(100 * sigmoid(-delta / 1000))` of the fragmentation growth."""
    sigmoid = 1.0 / (1.0 + np.exp(delta / 1000.0))
    return np.trunc(sigmoid * 100.0).astype(np.int64)


def _scalar_fgd_score(delta: float) -> int:
    """`fgd_score` for one value."""
    return int(1.0 / (1.0 + math.exp(delta / 1000.0)) * 100.0)


def _delta_per_node(
    table: FragmentationTable,
    shape: PodShape,
    nodes: IntArray,
    reduce: Callable[[FloatArray, FloatArray], FloatArray],
    worst: float,
) -> FloatArray:
    """Fragmentation growth of each node for the task, reduced over its GPU choices."""
    before = table.frag[nodes]
    if not shape.is_fraction:
        after = table.evaluate(table.after_host(nodes, shape))
        result: FloatArray = after - before
        return result
    best: FloatArray = np.full(len(nodes), worst)
    position = np.full(table.cluster.size, -1, dtype=np.int64)
    position[nodes] = np.arange(len(nodes))
    for option_nodes, free in fraction_options(table.cluster, nodes, shape):
        after = table.evaluate(table.after_fraction(option_nodes, free, shape))
        where = position[option_nodes]
        best[where] = reduce(best[where], after - table.frag[option_nodes])
    return best


class FGDPolicy(_Base):
    """Fragmentation Gradient Descent as its reference simulator scores it."""

    name = "fgd"

    def __init__(self, cluster: ArrayCluster, rank: IntArray, table: FragmentationTable) -> None:
        """Score against the given (shared, kept-current) fragmentation table."""
        super().__init__(cluster, rank)
        self.table = table

    def choose(self, shape: PodShape, nodes: IntArray) -> tuple[int, tuple[int, ...]] | None:
        """Highest integer FGD score; a GPU-sharing pod keeps its best GPU's score."""
        if shape.is_fraction:
            # The best integer score of a node comes from its smallest growth.
            delta = _delta_per_node(self.table, shape, nodes, np.minimum, math.inf)
        else:
            delta = _delta_per_node(self.table, shape, nodes, np.minimum, math.inf)
        index = _first_in_order(nodes, fgd_score(delta), self.rank)
        return index, self.gpus_for(index, shape)

    def gpus_for(self, index: int, shape: PodShape) -> tuple[int, ...]:
        """A GPU-sharing pod takes the GPU with the highest FGD score, ties to the lowest index."""
        if not shape.is_fraction:
            return super().gpus_for(index, shape)
        node = self.cluster.state(index)
        dist = self.table.dist
        before = node_fragmentation(node, dist)
        best_gpu, best_score = -1, -1
        for gpu, free in enumerate(node.gpu_free_milli):
            if free < shape.milli:
                continue
            after = node_fragmentation(take(node, shape, (gpu,)), dist)
            score = _scalar_fgd_score(after - before)
            if score > best_score:
                best_gpu, best_score = gpu, score
        return (best_gpu,)


class GpupoolPolicy(_Base):
    """gpupool's placement: the lowest `placement_cost`, vectorised over nodes."""

    name = "gpupool"

    def __init__(self, cluster: ArrayCluster, rank: IntArray, table: FragmentationTable) -> None:
        """Score against the given fragmentation table (the product's shape distribution)."""
        super().__init__(cluster, rank)
        self.table = table
        self.waste: FloatArray = np.array(remainder_waste_table(table.dist), dtype=np.float64)

    def _option_costs(self, shape: PodShape, nodes: IntArray) -> FloatArray:
        """Fragmentation growth plus the remainder term, for the best GPU choice per node."""
        table, waste = self.table, self.waste
        if not shape.is_fraction:
            after = table.evaluate(table.after_host(nodes, shape))
            growth: FloatArray = after - table.frag[nodes]
            if shape.gpus:
                remainder = shape.gpus * (waste[0] - waste[MILLI])
                growth = growth + REMAINDER_WEIGHT * remainder
            return growth
        best: FloatArray = np.full(len(nodes), math.inf)
        position = np.full(table.cluster.size, -1, dtype=np.int64)
        position[nodes] = np.arange(len(nodes))
        for option_nodes, free in fraction_options(table.cluster, nodes, shape):
            after = table.evaluate(table.after_fraction(option_nodes, free, shape))
            remainder = waste[free - shape.milli] - waste[free]
            cost = (after - table.frag[option_nodes]) + REMAINDER_WEIGHT * remainder
            where = position[option_nodes]
            best[where] = np.minimum(best[where], cost)
        return best

    def costs(self, shape: PodShape, nodes: IntArray) -> FloatArray:
        """`placement_cost` of the task on each node, vectorised."""
        cost = self._option_costs(shape, nodes)
        c = self.cluster
        free, cpu = c.free_total[nodes], c.cpu_free[nodes]
        free_after = free - shape.gpu_milli_total
        cpu_after = cpu - shape.cpu_milli
        dist = self.table.dist
        for ratio, weight in (
            (cpu_per_gpu_milli(dist), CPU_STRAND_WEIGHT),
            (workload_cpu_per_gpu_milli(dist), CPU_ONLY_STRAND_WEIGHT),
        ):
            if ratio > 0:
                before = np.maximum(0.0, free - cpu / ratio)
                after = np.maximum(0.0, free_after - cpu_after / ratio)
                cost = cost + weight * (after - before)
        return np.round(cost, COST_DECIMALS)

    def choose(self, shape: PodShape, nodes: IntArray) -> tuple[int, tuple[int, ...]] | None:
        """The cheapest node; the GPUs are the product's own `best_placement` choice."""
        cost = self.costs(shape, nodes)
        index = _first_in_order(nodes, -cost, self.rank)
        best = best_placement(self.cluster.state(index), shape, self.table.dist)
        if best is None:  # pragma: no cover - the node was filtered as feasible
            raise RuntimeError(f"task does not fit on node {index}")
        return index, best[0]


PLACEMENT_POLICIES = ("random", "k8s-default", "bestfit", "fgd", "gpupool")


def make_placement_policy(
    name: str,
    cluster: ArrayCluster,
    rank: IntArray,
    seed: int,
    measure: FragmentationTable,
    gpupool_table: Callable[[], FragmentationTable],
) -> PlacementPolicy:
    """Build a policy by name; `measure` is FGD's own table, shared with the fgd policy."""
    if name == "random":
        return RandomPolicy(cluster, rank, seed)
    if name == "k8s-default":
        return KubernetesDefaultPolicy(cluster, rank)
    if name == "bestfit":
        return BestFitPolicy(cluster, rank)
    if name == "fgd":
        return FGDPolicy(cluster, rank, measure)
    if name == "gpupool":
        return GpupoolPolicy(cluster, rank, gpupool_table())
    raise ValueError(f"policy: unknown {name!r}; choose from {', '.join(PLACEMENT_POLICIES)}")


__all__ = ["PLACEMENT_POLICIES", "PlacementPolicy", "ShapeDistribution", "make_placement_policy"]
