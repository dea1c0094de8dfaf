"""``gpupool snapshot [--out FILE] [--at TIME]``: the live pool as a scenario file.

Reads the database through the control loop's own snapshot builder
(``gpupool.control.snapshot``): flavors, nodes, queues, classes, this period's budgets, the
pending, admitted and running workloads with their placements and the loop's fields, and the
preemptions the contracts still count. It writes them in the scenario format (DESIGN section
5) with the default policy, so that ``gpupool plan FILE --explain`` shows what a cycle decides
on this pool and why. Workloads are named ``namespace/name``.
"""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime
from typing import Any, TextIO

from gpupool.cli.arguments import output_file
from gpupool.control.queries import snapshot_time
from gpupool.control.snapshot import SnapshotError, build_snapshot
from gpupool.scheduler.scenario import ScenarioError, parse_time, snapshot_to_dict
from gpupool.scheduler.types import PolicyInfo

HELP = "Write the live pool as a scenario file, to replay a decision with `gpupool plan FILE`"

EXIT_INVALID = 2


def cycle_time(text: str) -> datetime:
    """An ISO 8601 time with a zone (``2026-11-29T10:00:00Z``)."""
    try:
        return datetime.fromtimestamp(parse_time(text.strip(), "time"), tz=UTC)
    except ScenarioError as error:
        raise argparse.ArgumentTypeError(str(error).removeprefix("time: ")) from None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """--out, --at."""
    parser.add_argument(
        "--out",
        type=output_file,
        metavar="FILE",
        help="write the scenario here (default: standard output)",
    )
    parser.add_argument(
        "--at",
        type=cycle_time,
        metavar="TIME",
        help="the cycle's time, ISO 8601 with a zone (default: the pool's clock, as the pages' "
        "snapshot); it picks the budget "
        "period and the preemption history, the rest is the pool as it is, so it may not be "
        "before a running workload's start",
    )


def run(options: dict[str, Any], stdout: TextIO, stderr: TextIO) -> int:
    """Build the snapshot and write it; exit 2 when the pool cannot be snapshotted."""
    now = options.get("at") or snapshot_time()
    policy = PolicyInfo()
    try:
        database = build_snapshot(now=now, policy=policy)
    except SnapshotError as error:
        stderr.write(f"cannot snapshot the pool: {error}\n")
        return EXIT_INVALID
    scenario = snapshot_to_dict(database.snapshot, policy, database.now)
    text = json.dumps(scenario, indent=1) + "\n"
    out = options.get("out")
    if out is None:
        stdout.write(text)
        return 0
    out.write_text(text)
    snapshot = database.snapshot
    pending = sum(1 for w in snapshot.workloads if w.state == "pending")
    stdout.write(
        f"wrote {out}: {len(snapshot.nodes)} nodes, {len(snapshot.queues)} queues, "
        f"{len(snapshot.workloads) - pending} workloads holding GPUs, {pending} pending, "
        f"at {scenario['now']}\n"
    )
    return 0
