"""Benchmark B2: openb traces x placement policies x seeds, summarised for JSON and reports."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gpupool.simulation.placement.openb import inflate, load_nodes, load_tasks
from gpupool.simulation.placement.paper import paper_results
from gpupool.simulation.placement.replay import ReplayResult, replay_placements

LOADS = {"1.0": 100, "1.3": 130}


def _fraction(curve: dict[int, float], load: int) -> float | None:
    """A curve's value at an arrived load, as a fraction; None if the run stopped short of it."""
    return round(curve[load] / 100, 5) if load in curve else None


def summarise(result: ReplayResult) -> dict[str, Any]:
    """One replay in the B2 JSON layout (fractions)."""
    allocation = result.allocation_curve()
    fragmentation = result.fragmentation_rate_curve()
    return {
        "allocation_ratio": {key: _fraction(allocation, k) for key, k in LOADS.items()},
        "fragmentation_rate": {"1.0": _fraction(fragmentation, 100)},
        "dropped": result.dropped,
        "elapsed_s": round(result.elapsed_s, 2),
    }


def _mean_summary(summaries: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Seed means of summaries."""

    def mean(path: tuple[str, str]) -> float | None:
        values = [s[path[0]][path[1]] for s in summaries]
        if any(v is None for v in values):
            return None
        return round(float(np.mean(values)), 5)

    return {
        "allocation_ratio": {key: mean(("allocation_ratio", key)) for key in LOADS},
        "fragmentation_rate": {"1.0": mean(("fragmentation_rate", "1.0"))},
        "dropped": round(float(np.mean([s["dropped"] for s in summaries])), 1),
        "elapsed_s": round(float(np.mean([s["elapsed_s"] for s in summaries])), 2),
    }


@dataclass
class TraceRun:
    """All replays of one trace: results by policy, in seed order."""

    trace: str
    seeds: list[int]
    policies: list[str]
    results: dict[str, list[ReplayResult]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The B2 JSON object: per policy the seed mean; per seed too when several."""
        policies: dict[str, Any] = {}
        for name in self.policies:
            summaries = [summarise(r) for r in self.results[name]]
            entry = _mean_summary(summaries)
            if len(summaries) > 1:
                entry["seeds"] = {
                    str(r.seed): s for r, s in zip(self.results[name], summaries, strict=True)
                }
            policies[name] = entry
        document: dict[str, Any] = {
            "trace": self.trace,
            "seed": self.seeds[0] if len(self.seeds) == 1 else self.seeds,
            "policies": policies,
        }
        paper = paper_results(self.trace)
        if paper:
            document["paper"] = paper
        return document

    def mean_curves(self, policy: str) -> tuple[dict[int, float], dict[int, float]]:
        """Seed-mean allocation and fragmentation-rate curves (in %) of one policy."""
        allocation: dict[int, list[float]] = {}
        fragmentation: dict[int, list[float]] = {}
        for result in self.results[policy]:
            for k, v in result.allocation_curve().items():
                allocation.setdefault(k, []).append(v)
            for k, v in result.fragmentation_rate_curve().items():
                fragmentation.setdefault(k, []).append(v)
        return (
            {k: float(np.mean(v)) for k, v in sorted(allocation.items())},
            {k: float(np.mean(v)) for k, v in sorted(fragmentation.items())},
        )


def run_openb(
    traces: Sequence[str],
    policies: Sequence[str],
    seeds: Sequence[int],
    limit: int | None = None,
    on_task: Callable[[int], None] | None = None,
    on_run: Callable[[str, str, int, ReplayResult], None] | None = None,
) -> list[TraceRun]:
    """Replay every trace with every policy and seed; the policies of a seed share its
    inflated trace."""
    nodes = load_nodes()
    runs = []
    for trace in traces:
        tasks = load_tasks(trace)
        run = TraceRun(trace=trace, seeds=list(seeds), policies=list(policies))
        for seed in seeds:
            inflated = inflate(tasks, nodes, seed)
            for policy in policies:
                result = replay_placements(
                    nodes, tasks, inflated, policy, limit=limit, on_task=on_task
                )
                run.results.setdefault(policy, []).append(result)
                if on_run is not None:
                    on_run(trace, policy, seed, result)
        runs.append(run)
    return runs


def planned_tasks(traces: Sequence[str], seeds: Sequence[int], limit: int | None) -> int:
    """How many task placements a sweep will make per policy (for progress bars)."""
    nodes = load_nodes()
    total = 0
    for trace in traces:
        tasks = load_tasks(trace)
        for seed in seeds:
            count = len(inflate(tasks, nodes, seed).tasks)
            total += count if limit is None else min(count, limit)
    return total
