"""The simulated cluster as numpy arrays, and FGD's fragmentation measure vectorised over nodes.

`ArrayCluster` holds every node's free GPU milli (one row per node, padded to the largest node with
zero-free slots, which no pod can use and which add nothing to any sum), CPU and memory.
`FragmentationTable` keeps, per node and per typical shape, the two numbers FGD's measure
needs -- how many GPUs have at least the shape's per-GPU request free, and the free milli on
the other GPUs -- so the fragmentation of a node after a hypothetical placement is a few
array operations over all nodes at once. Its values equal `gpupool.scheduler.fragmentation`'s
scalar functions (tests/simulation/test_vectorised.py checks this on random nodes).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from gpupool.scheduler.fragmentation import (
    NodeState,
    PodShape,
    ShapeDistribution,
)
from gpupool.scheduler.types import MILLI
from gpupool.simulation.placement.openb import OpenbNode, OpenbTask

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]


def task_shape(task: OpenbTask) -> PodShape:
    """The placement shape of a trace task."""
    return PodShape(
        gpus=task.num_gpu,
        milli=task.gpu_milli if task.num_gpu else MILLI,
        cpu_milli=task.cpu_milli,
        memory_mib=task.memory_mib,
        gpu_models=task.gpu_spec if task.num_gpu else frozenset(),
    )


class ArrayCluster:
    """Free resources of every node, updated in place as tasks are placed."""

    def __init__(self, nodes: list[OpenbNode]) -> None:
        """Start with every node empty."""
        self.nodes = nodes
        self.size = len(nodes)
        width = max(node.gpus for node in nodes)
        self.gpu_free: IntArray = np.zeros((self.size, width), dtype=np.int64)
        for i, node in enumerate(nodes):
            self.gpu_free[i, : node.gpus] = MILLI
        self.gpu_capacity: IntArray = np.array([n.gpus * MILLI for n in nodes])
        self.cpu_capacity: IntArray = np.array([n.cpu_milli for n in nodes], dtype=np.int64)
        self.memory_capacity: IntArray = np.array([n.memory_mib for n in nodes], dtype=np.int64)
        self.cpu_free = self.cpu_capacity.copy()
        self.memory_free = self.memory_capacity.copy()
        self.free_total: IntArray = self.gpu_free.sum(axis=1)
        self.whole_free: IntArray = (self.gpu_free >= MILLI).sum(axis=1)
        self.max_free: IntArray = self.gpu_free.max(axis=1)
        self.models = [node.model for node in nodes]
        self._model_masks: dict[frozenset[str], BoolArray] = {}
        self.allocated_milli = 0

    def model_mask(self, models: frozenset[str]) -> BoolArray:
        """Nodes whose GPU model is one of `models` (all nodes when empty)."""
        mask = self._model_masks.get(models)
        if mask is None:
            if models:
                mask = np.array([model in models for model in self.models])
            else:
                mask = np.ones(self.size, dtype=bool)
            self._model_masks[models] = mask
        return mask

    def feasible(self, shape: PodShape) -> IntArray:
        """Indices of the nodes the shape fits on (CPU, memory, GPU model, GPUs)."""
        mask = (self.cpu_free >= shape.cpu_milli) & (self.memory_free >= shape.memory_mib)
        if shape.gpus:
            mask &= self.model_mask(shape.gpu_models)
            if shape.is_fraction:
                mask &= self.max_free >= shape.milli
            else:
                mask &= self.whole_free >= shape.gpus
        return np.flatnonzero(mask)

    def state(self, index: int) -> NodeState:
        """The node as the scalar placement API sees it."""
        gpus = self.nodes[index].gpus
        return NodeState(
            tuple(int(v) for v in self.gpu_free[index, :gpus]),
            int(self.cpu_free[index]),
            int(self.memory_free[index]),
            self.models[index],
        )

    def place(self, index: int, shape: PodShape, gpus: tuple[int, ...]) -> None:
        """Take the shape's resources on the node (the caller checked it fits)."""
        for gpu in gpus:
            self.gpu_free[index, gpu] -= shape.milli
        row = self.gpu_free[index]
        self.cpu_free[index] -= shape.cpu_milli
        self.memory_free[index] -= shape.memory_mib
        self.free_total[index] = row.sum()
        self.whole_free[index] = (row >= MILLI).sum()
        self.max_free[index] = row.max()
        self.allocated_milli += shape.gpu_milli_total


@dataclass(frozen=True, slots=True)
class Hypothesis:
    """Nodes after a hypothetical placement: what FGD's measure needs, one row per node."""

    nodes: IntArray
    cpu_free: IntArray
    memory_free: IntArray
    free_total: IntArray
    count_ge: IntArray  # (nodes, shapes)
    small_sum: IntArray  # (nodes, shapes)


class FragmentationTable:
    """FGD's per-node fragmentation under one shape distribution, kept current as nodes change."""

    def __init__(self, cluster: ArrayCluster, dist: ShapeDistribution) -> None:
        """Index the shapes and compute every node's fragmentation."""
        self.cluster = cluster
        self.dist = dist
        shapes = [shape for shape, _ in dist.shapes]
        self.weights: FloatArray = np.array([w for _, w in dist.shapes], dtype=np.float64)
        self.milli: IntArray = np.array([s.milli for s in shapes], dtype=np.int64)
        self.gpus: IntArray = np.array([s.gpus for s in shapes], dtype=np.int64)
        self.cpu: IntArray = np.array([s.cpu_milli for s in shapes], dtype=np.int64)
        self.memory: IntArray = np.array([s.memory_mib for s in shapes], dtype=np.int64)
        usable = np.ones((cluster.size, len(shapes)), dtype=bool)
        for t, shape in enumerate(shapes):
            if shape.gpus == 0:
                usable[:, t] = False
            elif shape.gpu_models:
                usable[:, t] = cluster.model_mask(shape.gpu_models)
        self.usable: BoolArray = usable
        free = cluster.gpu_free[:, None, :]
        milli = self.milli[None, :, None]
        self.count_ge: IntArray = (free >= milli).sum(axis=2)
        self.small_sum: IntArray = np.where(free < milli, free, 0).sum(axis=2)
        self.frag: FloatArray = self.evaluate(self.current(np.arange(cluster.size)))
        self.total = float(self.frag.sum())

    def current(self, nodes: IntArray) -> Hypothesis:
        """The given nodes as they are now."""
        c = self.cluster
        return Hypothesis(
            nodes,
            c.cpu_free[nodes],
            c.memory_free[nodes],
            c.free_total[nodes],
            self.count_ge[nodes],
            self.small_sum[nodes],
        )

    def evaluate(self, h: Hypothesis) -> FloatArray:
        """Expected fragmented milli-GPU of each node of the hypothesis."""
        satisfied = (
            self.usable[h.nodes]
            & (h.count_ge >= self.gpus)
            & (h.cpu_free[:, None] >= self.cpu)
            & (h.memory_free[:, None] >= self.memory)
        )
        frag = np.where(satisfied, h.small_sum, h.free_total[:, None])
        result: FloatArray = frag.astype(np.float64) @ self.weights
        return result

    def refresh(self, index: int) -> None:
        """Recompute one node's rows after it changed."""
        row = self.cluster.gpu_free[index][None, :]
        milli = self.milli[:, None]
        self.count_ge[index] = (row >= milli).sum(axis=1)
        self.small_sum[index] = np.where(row < milli, row, 0).sum(axis=1)
        old = self.frag[index]
        self.frag[index] = self.evaluate(self.current(np.array([index])))[0]
        self.total += float(self.frag[index] - old)

    def after_host(self, nodes: IntArray, shape: PodShape) -> Hypothesis:
        """The nodes after a pod that takes only CPU and memory, or whole GPUs."""
        c = self.cluster
        count_ge = self.count_ge[nodes]
        if shape.gpus:
            # Whole GPUs go from 1000 free to 0: each shape sees `gpus` fewer usable GPUs,
            # and the sums of the GPUs below its request do not change.
            count_ge = count_ge - np.where(self.gpus > 0, shape.gpus, 0)
        return Hypothesis(
            nodes,
            c.cpu_free[nodes] - shape.cpu_milli,
            c.memory_free[nodes] - shape.memory_mib,
            c.free_total[nodes] - shape.gpu_milli_total,
            count_ge,
            self.small_sum[nodes],
        )

    def after_fraction(self, nodes: IntArray, free: IntArray, shape: PodShape) -> Hypothesis:
        """The nodes after a GPU-sharing pod takes a GPU that had `free` milli (per node)."""
        c = self.cluster
        left = free - shape.milli
        before_ge = free[:, None] >= self.milli
        after_ge = left[:, None] >= self.milli
        count_ge = self.count_ge[nodes] - before_ge + after_ge
        small_sum = (
            self.small_sum[nodes]
            - np.where(before_ge, 0, free[:, None])
            + np.where(after_ge, 0, left[:, None])
        )
        return Hypothesis(
            nodes,
            c.cpu_free[nodes] - shape.cpu_milli,
            c.memory_free[nodes] - shape.memory_mib,
            c.free_total[nodes] - shape.milli,
            count_ge,
            small_sum,
        )


def fraction_options(
    cluster: ArrayCluster, nodes: IntArray, shape: PodShape
) -> list[tuple[IntArray, IntArray]]:
    """Distinct free values a GPU-sharing pod could land on, per node: (nodes, free) pairs.

    GPUs with the same free milli lead to the same node state, so each node contributes one
    option per distinct free value that fits the pod.
    """
    ordered = -np.sort(-cluster.gpu_free[nodes], axis=1)
    options = []
    for slot in range(ordered.shape[1]):
        free = ordered[:, slot]
        keep = free >= shape.milli
        if slot:
            keep &= free != ordered[:, slot - 1]
        if not keep.any():
            if not (free >= shape.milli).any():
                break
            continue
        options.append((nodes[keep], free[keep]))
    return options
