"""B3's policies on several synthetic draws: one markdown row per (load, seed).

    python benchmarks/synthetic_sweep.py --loads 0.8,0.9 --seeds 1-4

Each draw is `simulate synthetic --load L --seed S` with the other spec fields at their
defaults, replayed with kueue-like and gpupool (no alone baselines). Cells are
"kueue-like / gpupool". About two minutes a draw on a 2-core machine.
"""

from __future__ import annotations

import argparse
import sys

from gpupool.cli.arguments import parse_seeds
from gpupool.simulation.datasets import MissingTraceData
from gpupool.simulation.queueing.metrics import PolicyMetrics
from gpupool.simulation.queueing.philly import GPUS_PER_NODE, NODES, load_jobs, run_philly, window
from gpupool.simulation.queueing.synthetic_trace import SyntheticSpec, synthetic_jobs

COMPARED_POLICIES = ("kueue-like", "gpupool")


def row(load: float, seed: int, jobs: int, pair: tuple[PolicyMetrics, PolicyMetrics]) -> str:
    """One table row: the two policies' figures side by side."""
    k, g = pair

    def both(fmt: str, attribute: str, scale: float = 1.0) -> str:
        return " / ".join(format(getattr(m, attribute) * scale, fmt) for m in (k, g))

    hours = 1 / 3600
    cells = [
        f"{load:g}",
        str(seed),
        f"{jobs:,}",
        both(".2f", "jct_mean_s", hours),
        both(".2f", "wait_mean_s", hours),
        both(".2f", "wait_p99_s", hours),
        both(".1%", "utilisation"),
        both(".0f", "preemptions"),
        both(".3%", "gpu_hours_lost_fraction"),
        both(".2%", "share_deviation"),
    ]
    return "| " + " | ".join(cells) + " |"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--loads", default="0.8,0.9", help="comma-separated loads")
    parser.add_argument("--seeds", type=parse_seeds, default=[1, 2, 3, 4])
    args = parser.parse_args(argv)
    try:
        population = window(load_jobs())
    except MissingTraceData as error:
        print(f"synthetic_sweep: {error}", file=sys.stderr)
        return 2
    print(
        "| load | seed | jobs | JCT mean (h) | wait mean (h) | wait p99 (h) | utilisation "
        "| preemptions | GPU-h lost | share deviation |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for load in (float(x) for x in args.loads.split(",")):
        for seed in args.seeds:
            spec = SyntheticSpec(load=load, seed=seed)
            jobs = synthetic_jobs(spec, population, NODES * GPUS_PER_NODE)
            run = run_philly(COMPARED_POLICIES, days=spec.days, jobs=jobs, alone=False)
            metrics = (run.metrics[COMPARED_POLICIES[0]], run.metrics[COMPARED_POLICIES[1]])
            print(row(load, seed, run.jobs, metrics), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
