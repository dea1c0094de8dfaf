"""``gpupool plan SCENARIO.json``: plan one cycle of a scenario file (DESIGN section 5).

Prints the plan as JSON. ``--explain`` prints readable tables instead (admissions, running
elastic gangs grown, evictions, and every pending workload with its reason, position and
estimated start). ``--dry-run WORKLOAD.json`` asks whether a hypothetical workload would fit
now, layer by layer (quota, capacity, placement). A malformed scenario or dry-run workload is
refused, exit status 2 and no plan, with a message naming the field (the workload file's own
paths for the latter; docs/scheduler.md "Limits and errors"). The core runs with the garbage
collector paused (``gpupool.runtime.gc_paused``).
"""

from __future__ import annotations

import argparse
import io
import json
from typing import Any, TextIO

from gpupool.runtime import gc_paused
from gpupool.scheduler import plan
from gpupool.scheduler.estimate import dry_run, estimate_starts
from gpupool.scheduler.scenario import (
    Scenario,
    ScenarioError,
    dump_plan,
    format_time,
    load_hypothetical_workload,
    load_scenario,
)
from gpupool.scheduler.types import Admission, Plan

HELP = "Plan one scheduling cycle for a scenario file and print the plan (JSON or --explain)"

EXIT_INVALID = 2


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """SCENARIO, --explain, --dry-run."""
    parser.add_argument("scenario", metavar="SCENARIO.json", help="snapshot in the scenario format")
    parser.add_argument(
        "--explain", action="store_true", help="print readable tables instead of JSON"
    )
    parser.add_argument(
        "--dry-run",
        metavar="WORKLOAD.json",
        help="a workload object (scenario format): would it fit now? quota, capacity, placement",
    )


def run(options: dict[str, Any], stdout: TextIO, stderr: TextIO) -> int:
    """Load, validate, plan, print; exit 2 on a malformed scenario or dry-run workload."""
    try:
        loaded = load_scenario(options["scenario"])
    except ScenarioError as error:
        stderr.write(f"invalid scenario: {error}\n")
        return EXIT_INVALID
    if options.get("dry_run"):
        try:
            candidate = load_hypothetical_workload(options["dry_run"], loaded)
        except ScenarioError as error:
            stderr.write(f"invalid dry-run workload: {error}\n")
            return EXIT_INVALID
        with gc_paused():
            answer = dry_run(loaded.snapshot, loaded.policy, loaded.now, candidate)
        stdout.write(
            json.dumps(
                {
                    "workload": answer.workload,
                    "first_failure": answer.first_failure,
                    "layers": [
                        {
                            "layer": layer.layer,
                            "passes": layer.passes,
                            "detail": layer.detail,
                            "facts": dict(layer.facts),
                        }
                        for layer in answer.layers
                    ],
                },
                indent=1,
            )
            + "\n"
        )
        return 0
    with gc_paused():
        result = plan(loaded.snapshot, loaded.policy, loaded.now)
    if options.get("explain"):
        stdout.write(explain_tables(loaded, result))
    else:
        stdout.write(dump_plan(result) + "\n")
    return 0


def explain_tables(loaded: Scenario, result: Plan) -> str:
    """The plan as rich tables, rendered to plain text."""
    from rich.console import Console
    from rich.table import Table

    # Each replay step is a full plan(); 50 steps bound --explain on large pools.
    with gc_paused():
        starts = estimate_starts(loaded.snapshot, loaded.policy, loaded.now, max_steps=50)
    queues = {w.name: w.queue for w in loaded.snapshot.workloads}
    buffer = io.StringIO()
    console = Console(file=buffer, width=140, color_system=None, force_terminal=False)

    admitted = Table(title=f"Admitted ({len(result.admit)})")
    admitted.add_column("workload")
    admitted.add_column("queue")
    admitted.add_column("placement")
    for admission in result.admit:
        admitted.add_row(admission.workload, queues[admission.workload], _where(admission))
    console.print(admitted)

    if result.grow:
        # Running elastic gangs that add pods this cycle: the pods added, and where.
        running = {w.name: len(w.placement) for w in loaded.snapshot.workloads}
        grown = Table(title=f"Grown ({len(result.grow)})")
        for column in ("workload", "queue", "pods added", "placement"):
            grown.add_column(column)
        for growth in result.grow:
            name = growth.workload
            added = len(growth.pod_refs)
            pods = f"{added} ({running[name]} -> {running[name] + added})"
            grown.add_row(name, queues[name], pods, _where(growth))
        console.print(grown)

    evicted = Table(title=f"Evicted ({len(result.evict)})")
    for column in ("workload", "queue", "reason", "for"):
        evicted.add_column(column)
    for eviction in result.evict:
        evicted.add_row(
            eviction.workload, queues[eviction.workload], eviction.reason, eviction.preemptor or ""
        )
    console.print(evicted)

    pending = Table(title=f"Pending ({len(result.pending)})")
    for column in ("workload", "queue", "position", "reason", "estimated start", "why"):
        pending.add_column(column)
    for item in result.pending:
        start = starts.get(item.workload)
        pending.add_row(
            item.workload,
            queues[item.workload],
            str(item.position),
            item.reason,
            format_time(start) if start is not None else "unknown",
            item.detail,
        )
    console.print(pending)
    return buffer.getvalue()


def _where(admission: Admission) -> str:
    """An admission's (or growth's) pods as ``node:gpus`` (``@milli`` on a shared flavor)."""
    return "; ".join(
        f"{pod.node}:{','.join(map(str, pod.gpus))}" + (f"@{pod.milli}m" if pod.milli else "")
        for pod in admission.placement
    )
