"""Replay of an inflated openb trace through one placement policy, and its metrics.

Tasks arrive one at a time and never leave; a task is placed on the node its policy picks or,
if no node fits, dropped. After each task we record the arrived GPU demand, the allocated GPU
and the cluster's fragmented GPU (FGD's measure against the trace's typical shapes). The
paper's curves are then read off at whole percentages of arrived load, as its analysis
scripts do (`merge_alloc_discrete.py`): the mean over the tasks whose arrived load rounds to
k%, or to k-1..k+1% when none does.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np

from gpupool.scheduler.fragmentation import PodShape, ShapeDistribution
from gpupool.scheduler.types import MILLI
from gpupool.simulation.placement.array_cluster import (
    ArrayCluster,
    FloatArray,
    FragmentationTable,
    IntArray,
    task_shape,
)
from gpupool.simulation.placement.openb import (
    InflatedTrace,
    OpenbNode,
    OpenbTask,
    gpu_capacity_milli,
)
from gpupool.simulation.placement.policies import make_placement_policy

TYPICAL_COVERAGE = 0.95  # FGD's podPopularityThreshold


def fgd_shape(task: OpenbTask) -> PodShape:
    """A task as FGD's target workload keys it: CPU, GPU count and share, GPU models."""
    return PodShape(
        gpus=task.num_gpu,
        milli=task.gpu_milli if task.num_gpu else MILLI,
        cpu_milli=task.cpu_milli,
        gpu_models=task.gpu_spec if task.num_gpu else frozenset(),
    )


def typical_shapes(
    tasks: Iterable[OpenbTask], key: Callable[[OpenbTask], PodShape] = fgd_shape
) -> ShapeDistribution:
    """FGD's target workload: the trace's most popular shapes covering 95% of its tasks."""
    counts = Counter(key(task) for task in tasks)
    return ShapeDistribution.typical(dict(counts), TYPICAL_COVERAGE)


@dataclass(frozen=True, slots=True)
class ReplayResult:
    """Per-task record of one replay."""

    policy: str
    seed: int
    capacity_milli: int
    arrived_milli: IntArray  # cumulative requested milli-GPU after each task
    allocated_milli: IntArray  # allocated milli-GPU after each task
    fragmented_milli: FloatArray  # cluster's fragmented milli-GPU after each task
    placed: int
    dropped: int
    elapsed_s: float

    def curve(self, values: FloatArray, low: int = 0, high: int = 130) -> dict[int, float]:
        """`values` (one per task) read off at arrived load low..high %, the paper's way."""
        arrive = np.round(self.arrived_milli / self.capacity_milli * 100)
        result = {}
        for k in range(low, high + 1):
            chosen = arrive == k
            if not chosen.any():
                chosen = (arrive >= k - 1) & (arrive <= k + 1)
                if not chosen.any():
                    continue
            result[k] = float(values[chosen].mean())
        return result

    def allocation_curve(self) -> dict[int, float]:
        """Allocated GPU as % of capacity, by arrived load %."""
        ratio = np.round(self.allocated_milli / self.capacity_milli * 100, 2)
        return {k: round(v, 2) for k, v in self.curve(ratio).items()}

    def fragmentation_rate_curve(self) -> dict[int, float]:
        """Fragmented idle GPU as % of idle GPU, by arrived load %."""
        idle = self.capacity_milli - self.allocated_milli
        rate = np.round(100 * self.fragmented_milli / np.maximum(idle, 1), 2)
        return self.curve(rate)

    def fragmented_share_curve(self) -> dict[int, float]:
        """Fragmented GPU as % of the cluster's capacity, by arrived load %."""
        return self.curve(100 * self.fragmented_milli / self.capacity_milli)


def gpupool_distribution(tasks: Iterable[OpenbTask]) -> ShapeDistribution:
    """The shape distribution the gpupool policy is given: the trace's typical shapes."""
    return typical_shapes(tasks)


def replay_placements(
    nodes: list[OpenbNode],
    trace_tasks: list[OpenbTask],
    inflated: InflatedTrace,
    policy_name: str,
    limit: int | None = None,
    on_task: Callable[[int], None] | None = None,
    on_place: Callable[[int, PodShape, tuple[int, ...]], None] | None = None,
) -> ReplayResult:
    """Place the inflated trace's tasks one at a time with the named policy; record the metrics.

    `on_task(i)` is called after every task, `on_place(node, shape, gpus)` after every
    placement (analyses that need to know what went where, e.g. `packing`).
    """
    started = time.perf_counter()
    cluster = ArrayCluster(nodes)
    rank = np.array(inflated.node_rank, dtype=np.int64)
    measure_dist = typical_shapes(trace_tasks)
    measure = FragmentationTable(cluster, measure_dist)
    tables = [measure]

    def gpupool_table() -> FragmentationTable:
        dist = gpupool_distribution(trace_tasks)
        if dist == measure_dist:
            return measure
        table = FragmentationTable(cluster, dist)
        tables.append(table)
        return table

    policy = make_placement_policy(
        policy_name, cluster, rank, inflated.seed, measure, gpupool_table
    )
    tasks = inflated.tasks if limit is None else inflated.tasks[:limit]
    count = len(tasks)
    arrived = np.zeros(count, dtype=np.int64)
    allocated = np.zeros(count, dtype=np.int64)
    fragmented = np.zeros(count, dtype=np.float64)
    total_arrived = placed = 0
    shapes: dict[tuple[int, int, int, int, frozenset[str]], PodShape] = {}
    for i, task in enumerate(tasks):
        total_arrived += task.total_gpu_milli
        key = (task.cpu_milli, task.memory_mib, task.num_gpu, task.gpu_milli, task.gpu_spec)
        shape = shapes.get(key)
        if shape is None:
            shape = shapes[key] = task_shape(task)
        feasible = cluster.feasible(shape)
        choice = policy.choose(shape, feasible) if len(feasible) else None
        if choice is not None:
            index, gpus = choice
            cluster.place(index, shape, gpus)
            for table in tables:
                table.refresh(index)
            policy.placed(index)
            placed += 1
            if on_place is not None:
                on_place(index, shape, gpus)
        arrived[i] = total_arrived
        allocated[i] = cluster.allocated_milli
        fragmented[i] = measure.total
        if on_task is not None:
            on_task(i)
    return ReplayResult(
        policy=policy_name,
        seed=inflated.seed,
        capacity_milli=gpu_capacity_milli(nodes),
        arrived_milli=arrived,
        allocated_milli=allocated,
        fragmented_milli=fragmented,
        placed=placed,
        dropped=count - placed,
        elapsed_s=time.perf_counter() - started,
    )
