"""``gpupool bench cycle``: benchmark B1, the cost of one scheduling cycle at scale.

Builds the seeded synthetic pool of BENCHMARKS.md B1 (``--nodes``, default 5,000; pending
and running work scale alike), runs ``plan()`` once to warm up and then ``--runs`` times,
and reports the median wall time, every run's wall and process CPU time (``runs_s``,
``runs_cpu_s``; CPU is the fair figure on a loaded machine), the whole command's CPU
(``cpu_s``: snapshot, warm-up and runs), and the process's peak RSS, and
whether the core ran compiled (``native_core``: ``make native``) or as plain Python. The
garbage collector is paused around each ``plan()`` (``gpupool.runtime.gc_paused``), as the
product's callers of the core run it.
"""

from __future__ import annotations

import argparse
import json
import platform
import resource
import statistics
import sys
import time
from typing import Any, TextIO

from gpupool.cli.arguments import positive_int
from gpupool.runtime import gc_paused
from gpupool.scheduler import NATIVE, plan
from gpupool.simulation.scale_pool import synthetic_snapshot

HELP = "Benchmarks: B1 (one plan() at scale) and B1-loop (whole control-loop cycles)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``cycle`` with --nodes, --runs, --seed and --json."""
    which = parser.add_subparsers(dest="benchmark", metavar="BENCHMARK")
    which.required = True
    cycle = which.add_parser("cycle", help="B1: time plan() on the synthetic pool")
    cycle.add_argument("--nodes", type=positive_int, default=5000, help="nodes in the pool (5000)")
    cycle.add_argument(
        "--runs", type=positive_int, default=5, help="timed runs after a warm-up (5)"
    )
    cycle.add_argument("--seed", type=int, default=7, help="snapshot seed (7)")
    cycle.add_argument("--json", action="store_true", help="print JSON (default: a summary)")
    loop = which.add_parser(
        "loop",
        help="B1-loop: whole control-loop cycles on the B1 pool, simulated cluster, this "
        "database (which must be empty)",
    )
    loop.add_argument("--nodes", type=positive_int, default=5000, help="nodes in the pool (5000)")
    loop.add_argument(
        "--runs", type=positive_int, default=3, help="first cycles timed, each afresh (3)"
    )
    loop.add_argument(
        "--steady", type=positive_int, default=5, help="steady-state cycles timed after (5)"
    )
    loop.add_argument("--seed", type=int, default=7, help="pool seed (7)")
    loop.add_argument("--json", action="store_true", help="print JSON (default: a summary)")


def peak_rss_mib() -> float:
    """This process's peak resident set size, in MiB (ru_maxrss is KiB on Linux)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1024 * 1024) if sys.platform == "darwin" else peak / 1024


YARDSTICK_ADDITIONS = 2_000_000


def yardstick_s() -> float:
    """Seconds this machine takes, now, for a plain Python loop of 10 million additions (the
    best of three runs of 2 million, times five): the benchmarks print it beside their figures
    so that runs on machines of different speeds, or on one whose speed drifts (a shared
    host), can be compared by the ratio (``docs/benchmarks.md``, B1-loop). A loop in a
    function, on local names: not comparable with one typed at a prompt (global names)."""
    best = float("inf")
    for _ in range(3):
        started = time.process_time()
        total = 0
        for i in range(YARDSTICK_ADDITIONS):
            total += i
        best = min(best, time.process_time() - started)
    return round(best * 10_000_000 / YARDSTICK_ADDITIONS, 3)


def bench_cycle(nodes: int, runs: int, seed: int) -> dict[str, Any]:
    """Build the snapshot, time plan() and report B1's figures."""
    started = time.perf_counter()
    snapshot, policy, now = synthetic_snapshot(nodes, seed)
    build_s = time.perf_counter() - started
    started = time.perf_counter()
    with gc_paused():
        result = plan(snapshot, policy, now)
    cold_s = time.perf_counter() - started
    wall: list[float] = []
    cpu: list[float] = []
    for _ in range(runs):
        started, cpu_started = time.perf_counter(), time.process_time()
        with gc_paused():
            again = plan(snapshot, policy, now)
        wall.append(time.perf_counter() - started)
        cpu.append(time.process_time() - cpu_started)
        if again != result:
            raise RuntimeError("plan() is not deterministic on the benchmark snapshot")
    return {
        "benchmark": "B1 cycle",
        "seed": seed,
        "nodes": len(snapshot.nodes),
        "gpus": sum(node.gpus for node in snapshot.nodes),
        "running": sum(1 for w in snapshot.workloads if w.state == "running"),
        "pending": sum(1 for w in snapshot.workloads if w.state == "pending"),
        "admitted": len(result.admit),
        "evicted": len(result.evict),
        "left_pending": len(result.pending),
        "runs": runs,
        "median_s": round(statistics.median(wall), 4) if wall else None,
        "runs_s": [round(value, 4) for value in wall],
        "median_cpu_s": round(statistics.median(cpu), 4) if cpu else None,
        "runs_cpu_s": [round(value, 4) for value in cpu],
        "cpu_s": round(time.process_time(), 3),
        "cold_s": round(cold_s, 4),
        "build_s": round(build_s, 3),
        "peak_rss_mib": round(peak_rss_mib(), 1),
        "yardstick_s": yardstick_s(),
        "python": platform.python_version(),
        "native_core": NATIVE,
    }


def run(options: dict[str, Any], stdout: TextIO, stderr: TextIO) -> int:
    """Run the chosen benchmark and print its figures."""
    if options["benchmark"] == "loop":
        return _run_loop(options, stdout, stderr)
    if options["nodes"] < 1 or options["runs"] < 1:
        stderr.write("bench cycle: --nodes and --runs must be >= 1\n")
        return 2
    figures = bench_cycle(options["nodes"], options["runs"], options["seed"])
    if options.get("json"):
        stdout.write(json.dumps(figures) + "\n")
    else:
        stdout.write(
            f"B1 cycle: {figures['nodes']} nodes, {figures['running']} running, "
            f"{figures['pending']} pending: median {figures['median_s']} s "
            f"(cpu {figures['median_cpu_s']} s), peak RSS {figures['peak_rss_mib']} MiB, "
            f"{'compiled' if NATIVE else 'plain Python'} core\n"
        )
    return 0


def _run_loop(options: dict[str, Any], stdout: TextIO, stderr: TextIO) -> int:
    """B1-loop (``gpupool.control.bench``)."""
    from django.core.exceptions import ValidationError

    from gpupool.control.bench import bench_loop, figures_line

    try:
        figures = bench_loop(options["nodes"], options["runs"], options["steady"], options["seed"])
    except ValidationError as error:
        stderr.write(f"bench loop: {'; '.join(error.messages)} (use an empty database)\n")
        return 2
    except ImportError as error:
        stderr.write(f"bench loop needs the simulated cluster backend: {error}\n")
        return 2
    if options.get("json"):
        stdout.write(json.dumps(figures) + "\n")
    else:
        stdout.write(figures_line(figures) + "\n")
    return 0
