"""The openb trace (Alibaba GPU-sharing cluster, FGD paper): loaders and workload inflation.

The trace (`datasets.OPENB`) is a node list and one pod list per trace variant; the README's
"Trace data" section says where it is published. `inflate` builds the task sequence of the
paper's protocol: the trace's tasks shuffled by the seed, then random copies appended (or
random tasks removed) until the requested GPU reaches 130% of the cluster's capacity.
"""

from __future__ import annotations

import csv
import random
from dataclasses import dataclass
from pathlib import Path

from gpupool.scheduler.types import MILLI
from gpupool.simulation.datasets import OPENB

INFLATION_RATIO = 1.3
GPU_NODE_LIST = "openb_node_list_gpu_node.csv"  # the 1,213 GPU nodes of every paper run
POD_LIST_PREFIX = "openb_pod_list_"  # + trace name + .csv

# The 17 traces of the paper's experiments (those with results in fgd_expected_results/).
PAPER_TRACES = (
    "default",
    "cpu050",
    "cpu100",
    "cpu200",
    "cpu250",
    "gpushare40",
    "gpushare60",
    "gpushare80",
    "gpushare100",
    "gpuspec10",
    "gpuspec20",
    "gpuspec25",
    "gpuspec33",
    "multigpu20",
    "multigpu30",
    "multigpu40",
    "multigpu50",
)


@dataclass(frozen=True, slots=True)
class OpenbNode:
    """One node of the cluster: capacity and GPU model."""

    name: str
    cpu_milli: int
    memory_mib: int
    gpus: int
    model: str


@dataclass(frozen=True, slots=True)
class OpenbTask:
    """One task (pod) of a trace: what it requests."""

    name: str
    cpu_milli: int
    memory_mib: int
    num_gpu: int
    gpu_milli: int
    gpu_spec: frozenset[str]

    @property
    def total_gpu_milli(self) -> int:
        """Milli-GPU the task requests in total."""
        return self.num_gpu * self.gpu_milli


def available_traces() -> list[str]:
    """Names of the pod lists present in the data directory (``default``, ``cpu050``, ...)."""
    prefix = POD_LIST_PREFIX
    return sorted(p.stem[len(prefix) :] for p in OPENB.directory().glob(f"{prefix}*.csv"))


def load_nodes(path: Path | None = None) -> list[OpenbNode]:
    """The GPU nodes of the cluster used in all paper experiments (1,213 nodes)."""
    path = path or OPENB.file(GPU_NODE_LIST)
    with path.open(newline="") as handle:
        return [
            OpenbNode(
                name=row["sn"],
                cpu_milli=int(row["cpu_milli"]),
                memory_mib=int(row["memory_mib"]),
                gpus=int(row["gpu"]),
                model=row["model"],
            )
            for row in csv.DictReader(handle)
        ]


def load_tasks(trace: str = "default", path: Path | None = None) -> list[OpenbTask]:
    """The tasks of one trace, in file order; a missing ``gpu_spec`` column means any model."""
    path = path or OPENB.file(f"{POD_LIST_PREFIX}{trace}.csv")
    tasks = []
    with path.open(newline="") as handle:
        for row in csv.DictReader(handle):
            num_gpu = int(row["num_gpu"])
            spec = row.get("gpu_spec") or ""
            tasks.append(
                OpenbTask(
                    name=row["name"],
                    cpu_milli=int(row["cpu_milli"]),
                    memory_mib=int(row["memory_mib"]),
                    num_gpu=num_gpu,
                    gpu_milli=int(row["gpu_milli"]) if num_gpu else 0,
                    gpu_spec=frozenset(s for s in spec.split("|") if s),
                )
            )
    return tasks


def gpu_capacity_milli(nodes: list[OpenbNode]) -> int:
    """The cluster's GPU capacity in milli-GPU."""
    return sum(node.gpus for node in nodes) * MILLI


@dataclass(frozen=True, slots=True)
class InflatedTrace:
    """One seeded run's input: the task sequence and the node order that breaks ties."""

    tasks: tuple[OpenbTask, ...]
    node_rank: tuple[int, ...]  # node_rank[i]: position of node i in the tie-break order
    seed: int


def inflate(
    tasks: list[OpenbTask],
    nodes: list[OpenbNode],
    seed: int,
    ratio: float = INFLATION_RATIO,
) -> InflatedTrace:
    """The paper's protocol: shuffle, then tune the requested GPU to `ratio` x capacity.

    As in the reference simulator (`TunePodsByNodeTotalResource`): the tasks are sorted by
    name and shuffled; if they request less than the target, copies of random trace tasks are
    appended while the next copy's per-GPU request still fits under it; if more, random tasks
    are removed until it is met. The simulator then prefixes every node name with a random
    permutation index, so "ties to the lowest node name" is a seeded random order: `node_rank`.
    """
    rng = random.Random(seed)
    ordered = sorted(tasks, key=lambda task: task.name)
    by_name = list(ordered)
    rng.shuffle(ordered)
    target = ratio * gpu_capacity_milli(nodes)
    requested = sum(task.total_gpu_milli for task in ordered)
    if requested < target:
        copies = 0
        while True:
            task = by_name[rng.randrange(len(by_name))]
            if requested + task.gpu_milli > target:
                break
            ordered.append(_copy(task, copies))
            requested += task.total_gpu_milli
            copies += 1
    else:
        while requested > target and ordered:
            removed = ordered.pop(rng.randrange(len(ordered)))
            requested -= removed.total_gpu_milli
    permutation = list(range(len(nodes)))
    rng.shuffle(permutation)
    by_node_name = sorted(range(len(nodes)), key=lambda i: nodes[i].name)
    rank = [0] * len(nodes)
    for position, index in enumerate(by_node_name):
        rank[index] = permutation[position]
    return InflatedTrace(tasks=tuple(ordered), node_rank=tuple(rank), seed=seed)


def _copy(task: OpenbTask, number: int) -> OpenbTask:
    """A copy of a task under a new name."""
    return OpenbTask(
        name=f"{task.name}-tuned-{number}",
        cpu_milli=task.cpu_milli,
        memory_mib=task.memory_mib,
        num_gpu=task.num_gpu,
        gpu_milli=task.gpu_milli,
        gpu_spec=task.gpu_spec,
    )
