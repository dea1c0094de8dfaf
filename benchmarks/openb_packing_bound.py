"""B2: how far better pairing of the same pods could lift a policy's allocation (an upper bound).

    python benchmarks/openb_packing_bound.py --trace default --seeds 42-51 --policy gpupool

Replays each seed, records which GPU-sharing pods every GPU holds at the end, and prints one
row per replay: the allocation ratio at the end of the run (130% arrived load), the idle milli
on shared GPUs, the LP lower bound on that idle if the same sharing pods were packed perfectly
(`gpupool.simulation.placement.packing`), and the allocation that packing would reach with
every freed GPU filled completely. Then the other lever, when the fresh GPUs run out: the
arrived load at which the last untouched GPU was taken, the GPUs of whole-GPU gangs dropped
before that, and the idle on the last that many fresh GPUs -- what placing those gangs could
save, at most, if nothing else moved. Needs scipy (a dev dependency).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from gpupool.cli.arguments import parse_seeds
from gpupool.scheduler.fragmentation import PodShape
from gpupool.simulation.datasets import MissingTraceData
from gpupool.simulation.placement.openb import gpu_capacity_milli, inflate, load_nodes, load_tasks
from gpupool.simulation.placement.packing import RunOutLedger, SharingLedger, packing_bound
from gpupool.simulation.placement.replay import replay_placements

PlaceHook = Callable[[int, PodShape, tuple[int, ...]], None]


def _each(*hooks: PlaceHook) -> PlaceHook:
    """One `on_place` hook that calls every one of `hooks`."""

    def call(node: int, shape: PodShape, gpus: tuple[int, ...]) -> None:
        for hook in hooks:
            hook(node, shape, gpus)

    return call


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", default="default")
    parser.add_argument("--seeds", type=parse_seeds, default=[42])
    parser.add_argument("--policy", action="append", dest="policies")
    args = parser.parse_args(argv)
    policies = args.policies or ["gpupool"]
    try:
        nodes = load_nodes()
        tasks = load_tasks(args.trace)
    except MissingTraceData as error:
        print(f"openb_packing_bound: {error}", file=sys.stderr)
        return 2
    capacity = gpu_capacity_milli(nodes)
    print(f"trace {args.trace}: allocation at the end of the run (130% arrived load)\n")
    print(
        "| policy | seed | allocation | idle on shared GPUs | best packing's idle (LP) | "
        "allocation with the best packing | fresh GPUs gone at | gangs dropped before | "
        "their GPUs' idle |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    total_gpus = sum(node.gpus for node in nodes)
    uppers: dict[str, list[float]] = {}
    for seed in args.seeds:
        inflated = inflate(tasks, nodes, seed)
        for policy in policies:
            ledger = SharingLedger()
            run_out = RunOutLedger(inflated.tasks, total_gpus)
            on_place = _each(ledger, run_out.place)
            replay_placements(
                nodes, tasks, inflated, policy, on_task=run_out.task, on_place=on_place
            )
            bound = packing_bound(ledger, capacity)
            uppers.setdefault(policy, []).append(bound.upper_pct)
            gone = "never" if run_out.run_out_load is None else f"{100 * run_out.run_out_load:.1f}%"
            saved = run_out.last_fresh_idle_milli(run_out.gangs_dropped_gpus)
            print(
                f"| {policy} | {seed} | {bound.allocation_pct:.2f}% | "
                f"{bound.sharing_idle_milli:,} | {bound.best_idle_milli:,.0f} | "
                f"{bound.upper_pct:.2f}% | {gone} | {run_out.gangs_dropped_gpus} GPUs | "
                f"{saved:,} ({100 * saved / capacity:.2f} pts) |",
                flush=True,
            )
    for policy, values in uppers.items():
        print(
            f"\n{policy}: best packing reaches {min(values):.2f}-{max(values):.2f}%, "
            f"mean {sum(values) / len(values):.2f}%"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
