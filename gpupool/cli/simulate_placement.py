"""The ``simulate openb`` mode of ``manage.py gpupool`` (benchmark B2): placement quality on the
openb trace, the FGD paper's protocol.

Registered in ``gpupool.cli.subcommands.simulate.MODES`` as an argument builder and a runner
``(options, stdout, stderr) -> exit status``.
"""

from __future__ import annotations

import argparse
import json
from typing import Any, TextIO

from gpupool.cli.arguments import output_file, parse_seeds, positive_int
from gpupool.simulation.datasets import OPENB
from gpupool.simulation.placement.openb import GPU_NODE_LIST, PAPER_TRACES, available_traces
from gpupool.simulation.placement.policies import PLACEMENT_POLICIES


def add_openb_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``simulate openb``."""
    parser.add_argument(
        "--trace",
        action="append",
        help="pod list to replay (default: default); repeatable; 'paper' = the paper's 17",
    )
    parser.add_argument(
        "--policy",
        action="append",
        choices=PLACEMENT_POLICIES,
        help="repeatable (default: all five)",
    )
    parser.add_argument("--seed", action="append", type=int, help="repeatable (default: 42)")
    parser.add_argument("--seeds", type=parse_seeds, help="e.g. 42-51; added to --seed")
    parser.add_argument(
        "--limit", type=positive_int, help="replay only the first N tasks of each run"
    )
    parser.add_argument("--json", action="store_true", help="print JSON only")
    parser.add_argument(
        "--report", type=output_file, help="write a self-contained HTML report here"
    )


def run_openb_mode(options: dict[str, Any], stdout: TextIO, stderr: TextIO) -> int:
    """Benchmark B2: allocation ratio and fragmentation per policy on openb traces."""
    from gpupool.simulation.placement.experiment import run_openb as sweep

    traces: list[str] = []
    for name in options.get("trace") or ["default"]:
        traces.extend(PAPER_TRACES if name == "paper" else [name])
    OPENB.file(GPU_NODE_LIST)  # the cluster first: without it, every trace is unknown
    known = set(available_traces())
    unknown = [t for t in traces if t not in known]
    if unknown:
        stderr.write(
            f"simulate openb: unknown trace(s) {', '.join(unknown)}; have {sorted(known)}\n"
        )
        return 2
    policies = list(dict.fromkeys(options.get("policy") or PLACEMENT_POLICIES))
    seeds = list(dict.fromkeys((options.get("seed") or []) + (options.get("seeds") or []))) or [42]
    limit = options.get("limit")
    if options.get("json"):
        runs = sweep(traces, policies, seeds, limit=limit)
    else:
        runs = _with_progress(traces, policies, seeds, limit, stderr)
    documents = [run.to_json() for run in runs]
    output = documents[0] if len(documents) == 1 else {"runs": documents}
    if options.get("json"):
        stdout.write(json.dumps(output, indent=2) + "\n")
    else:
        _print_table(documents, stdout)
    report = options.get("report")
    if report is not None:
        from gpupool.simulation.report import write_placement_report

        write_placement_report(runs, report)
        if not options.get("json"):
            stdout.write(f"report written to {report}\n")
    return 0


def _with_progress(
    traces: list[str], policies: list[str], seeds: list[int], limit: int | None, stderr: TextIO
) -> list[Any]:
    """Run the sweep with a rich progress bar on stderr."""
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    from gpupool.simulation.placement.experiment import planned_tasks
    from gpupool.simulation.placement.experiment import run_openb as sweep

    total = planned_tasks(traces, seeds, limit) * len(policies)
    console = Console(file=stderr)
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total} tasks"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
    )
    finished = {"tasks": 0}
    with Progress(*columns, console=console) as progress:
        bar = progress.add_task("openb", total=total)

        def on_task(i: int) -> None:
            if i % 200 == 199:
                progress.update(bar, completed=finished["tasks"] + i + 1)

        def on_run(trace: str, policy: str, seed: int, result: Any) -> None:
            finished["tasks"] += len(result.arrived_milli)
            progress.update(
                bar, completed=finished["tasks"], description=f"{trace} {policy} {seed}"
            )

        return sweep(traces, policies, seeds, limit=limit, on_task=on_task, on_run=on_run)


def _print_table(documents: list[dict[str, Any]], stdout: TextIO) -> None:
    """One terminal table per trace: per policy ours and the paper's figures."""
    from rich.console import Console

    from gpupool.simulation.report import placement_table, rich_table

    console = Console(file=stdout)
    for document in documents:
        console.print(rich_table(placement_table(document)))
