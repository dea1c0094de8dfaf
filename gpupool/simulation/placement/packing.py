"""How much of a B2 replay's idle GPU a better pairing of the same pods could recover.

At the end of an openb replay nearly all idle GPU sits in the gaps of GPUs shared by
GPU-sharing pods (`gpu_milli < 1000`). `packing_bound` asks: if the pods this run accepted
were packed perfectly -- into as few GPUs as any packing can, ignoring CPU, memory, GPU models
and node boundaries -- and every GPU that frees were then filled completely, what allocation
ratio would the run reach? That is an upper bound for any placement that accepts the same
pods, so it separates what pairing can still gain from what only a different set of accepted
pods could.

The fewest GPUs is bounded from below by the LP relaxation of bin packing (the cutting-stock
LP of Gilmore and Gomory, Operations Research 9(6), 1961), solved by column generation: a
master LP over packing patterns, and an unbounded-knapsack DP that prices the next pattern
from the master's duals. The LP optimum is a lower bound on the integer one, so the bound
errs on the generous side.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from gpupool.scheduler.fragmentation import PodShape
from gpupool.scheduler.types import MILLI
from gpupool.simulation.placement.openb import OpenbTask

PRICING_TOLERANCE = 1e-9


@dataclass
class SharingLedger:
    """Collects which GPU-sharing pods each GPU holds; pass it as `replay_placements`'s
    `on_place`."""

    by_gpu: dict[tuple[int, int], list[int]] = field(default_factory=lambda: defaultdict(list))
    other_milli: int = 0  # whole-GPU and multi-GPU pods

    def __call__(self, node: int, shape: PodShape, gpus: tuple[int, ...]) -> None:
        if shape.gpus == 1 and shape.milli < MILLI:
            self.by_gpu[(node, gpus[0])].append(shape.milli)
        else:
            self.other_milli += shape.gpus * shape.milli

    def pods(self) -> Counter[int]:
        """The accepted GPU-sharing pods, by size."""
        return Counter(milli for pods in self.by_gpu.values() for milli in pods)

    def idle_milli(self) -> int:
        """The idle milli-GPU on the GPUs that sharing pods hold."""
        return sum(MILLI - sum(pods) for pods in self.by_gpu.values())


def _best_pattern(sizes: list[int], values: list[float]) -> tuple[float, list[int]]:
    """Unbounded knapsack over one GPU: the pattern of pod counts with the highest value."""
    best = [0.0] * (MILLI + 1)
    last: list[int] = [-1] * (MILLI + 1)
    for room in range(1, MILLI + 1):
        best[room], last[room] = best[room - 1], -1
        for i, size in enumerate(sizes):
            if size <= room and best[room - size] + values[i] > best[room]:
                best[room], last[room] = best[room - size] + values[i], i
    counts = [0] * len(sizes)
    room = MILLI
    while room > 0:
        if last[room] < 0:
            room -= 1
        else:
            counts[last[room]] += 1
            room -= sizes[last[room]]
    return best[MILLI], counts


def min_gpus_lp(pods: Mapping[int, int]) -> float:
    """LP lower bound on the GPUs that can hold these sharing pods (size -> count)."""
    try:
        from scipy.optimize import linprog
    except ImportError as error:  # pragma: no cover - scipy comes with the dev tools
        raise RuntimeError("the packing bound needs scipy: pip install -e '.[dev]'") from error

    sizes = sorted(size for size, count in pods.items() if count > 0)
    if not sizes:
        return 0.0
    if sizes[0] <= 0 or sizes[-1] >= MILLI:
        raise ValueError(f"sharing pod sizes must lie in 1..{MILLI - 1} milli: {sizes}")
    demand = np.array([pods[size] for size in sizes], dtype=float)
    patterns = [
        [MILLI // size if j == i else 0 for j in range(len(sizes))] for i, size in enumerate(sizes)
    ]
    while True:
        matrix = np.array(patterns, dtype=float).T
        master = linprog(
            np.ones(len(patterns)), A_ub=-matrix, b_ub=-demand, bounds=(0, None), method="highs"
        )
        if master.status != 0:
            raise RuntimeError(f"packing LP failed: {master.message}")
        duals = [-float(d) for d in master.ineqlin.marginals]
        value, counts = _best_pattern(sizes, duals)
        if value <= 1 + PRICING_TOLERANCE or counts in patterns:
            return float(master.fun)
        patterns.append(counts)


@dataclass(frozen=True)
class PackingBound:
    """One replay's allocation against the best packing of the sharing pods it accepted."""

    capacity_milli: int
    allocated_milli: int
    sharing_gpus: int
    sharing_idle_milli: int
    best_gpus: float  # LP lower bound on the GPUs the same sharing pods need
    best_idle_milli: float

    @property
    def allocation_pct(self) -> float:
        return 100 * self.allocated_milli / self.capacity_milli

    @property
    def upper_pct(self) -> float:
        """Allocation if the same pods were packed perfectly and the GPUs freed filled fully."""
        recovered = self.sharing_idle_milli - self.best_idle_milli
        return 100 * (self.allocated_milli + recovered) / self.capacity_milli


def packing_bound(ledger: SharingLedger, capacity_milli: int) -> PackingBound:
    """The bound for a replay whose placements `ledger` recorded."""
    pods = ledger.pods()
    total = sum(size * count for size, count in pods.items())
    best = min_gpus_lp(pods)
    return PackingBound(
        capacity_milli=capacity_milli,
        allocated_milli=ledger.other_milli + total,
        sharing_gpus=len(ledger.by_gpu),
        sharing_idle_milli=ledger.idle_milli(),
        best_gpus=best,
        best_idle_milli=best * MILLI - total,
    )


@dataclass
class RunOutLedger:
    """When a replay used its last untouched GPU, and which gangs it had dropped before.

    Pass `place` as `replay_placements`'s `on_place` and `task` as its `on_task`. Until the
    last untouched (fresh) GPU is taken, every one-GPU task that fits must be placed; after
    it, only GPU-sharing pods that fit a gap can be. A whole-GPU gang dropped before that
    moment (no node had enough fresh GPUs with the CPU and memory) is the lever over *when*
    it comes that can only help: had the gang been placed, the fresh GPUs would have run out
    that many GPUs sooner, at no idle, and the pods that took the last of them would have
    found no room.
    """

    tasks: Sequence[OpenbTask]
    total_gpus: int
    # milli-GPU used on every GPU a pod has taken, in the order they were first taken
    used: dict[tuple[int, int], int] = field(default_factory=dict)
    arrived_milli: int = 0
    run_out_load: float | None = None  # arrived load (fraction of capacity) at the last fresh GPU
    gangs_dropped_gpus: int = 0  # GPUs of whole-GPU gangs dropped before that
    _placed: bool = False

    def place(self, node: int, shape: PodShape, gpus: tuple[int, ...]) -> None:
        self._placed = True
        for gpu in gpus:
            self.used[(node, gpu)] = self.used.get((node, gpu), 0) + shape.milli

    def task(self, index: int) -> None:
        task = self.tasks[index]
        self.arrived_milli += task.total_gpu_milli
        placed, self._placed = self._placed, False
        if self.run_out_load is not None:
            return
        if not placed and task.num_gpu > 1 and task.gpu_milli == MILLI:
            self.gangs_dropped_gpus += task.num_gpu
        if len(self.used) == self.total_gpus:
            self.run_out_load = self.arrived_milli / (self.total_gpus * MILLI)

    def last_fresh_idle_milli(self, count: int) -> int:
        """Idle milli, at the end of the run, of the last `count` GPUs taken fresh.

        With the dropped gangs placed, these are the GPUs the fresh supply would have lacked:
        their idle is what placing the gangs could save, at most, if nothing else moved.
        """
        last = list(self.used.values())[max(0, len(self.used) - count) :] if count else []
        return sum(MILLI - used for used in last)
