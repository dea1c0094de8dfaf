"""``gpupool snapshot [--out FILE] [--at TIME]``: the live pool as a scenario file.

Reads the database through the control loop's own snapshot builder
(``gpupool.control.snapshot``): flavors, nodes, queues, classes, this period's budgets, the
pending, admitted and running workloads with their placements and the loop's fields, and the
preemptions the contracts still count. It writes them in the scenario format (DESIGN section
5) with the default policy, so that ``gpupool plan FILE --explain`` shows what a cycle decides
on this pool and why. Workloads are named ``namespace/name``.

**The cycle's own view.** A cycle plans on more than the database: what the cluster adds
(``control.sync``'s overlay: the pods a gang still lacks, ``missing_pods``; each pod set's
``allowed_nodes`` from its pods' node selector, affinity and tolerations; workloads whose
pods no node could hold, left out), what other schedulers' pods hold (``foreign_gpus``),
runtimes learned from history, and budgets accrued since the last record. Without ``--at`` the
file is the snapshot a dry-run cycle of a fresh loop on the configured backend plans on
(``ControlLoop.run_cycle(dry_run=True)``: it syncs and plans, writes nothing), so the file
replays to the decisions of the cycle that would run now. Before, it was the database alone:
a gang with pods still to come, or pods no node's labels match, read as admitted. Where the
cluster cannot be read (no backend configured, the API unreachable), or with ``--at`` (the
cluster is seen only as it is now), the file is the database alone, and a warning says what
it lacks.
"""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime
from typing import Any, TextIO

from django.core.exceptions import ImproperlyConfigured

from gpupool.cli.arguments import output_file
from gpupool.clusters.base import ClusterUnavailable
from gpupool.control.backends import backend_from_settings
from gpupool.control.estimates import Planned
from gpupool.control.loop import ControlLoop
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
        help="the cycle's time, ISO 8601 with a zone (default: the cluster's clock, with what "
        "the cluster adds to the database as a cycle sees it); it picks the budget "
        "period and the preemption history, the rest is the pool as it is, so it may not be "
        "before a running workload's start; with it, the file is the database alone (the "
        "cluster is seen only as it is now)",
    )


# What a file written from the database alone lacks (the warning's words).
DATABASE_ALONE = (
    "the file is the database alone: pods a gang still lacks (missing_pods), node "
    "selectors' allowed_nodes, other schedulers' GPUs and learned runtimes are left out, "
    "so its plan may differ from the cycle's"
)


def live_cycle() -> tuple[Planned | None, str]:
    """What a dry-run cycle of a fresh loop on the configured backend plans on (it syncs and
    plans, and writes nothing); or None and why the cluster could not be read."""
    try:
        backend = backend_from_settings()
    except (ImproperlyConfigured, ClusterUnavailable) as error:
        return None, str(error)
    loop = ControlLoop(backend)
    try:
        result = loop.run_cycle(dry_run=True)
    finally:
        loop.close()
    if result.status != "dry-run" or loop.latest is None:
        return None, result.error or f"the dry-run cycle ended {result.status}"
    return loop.latest, ""


def run(options: dict[str, Any], stdout: TextIO, stderr: TextIO) -> int:
    """Build the snapshot and write it; exit 2 when the pool cannot be snapshotted."""
    policy = PolicyInfo()  # the loop's (``ControlLoop``'s default)
    at = options.get("at")
    planned: Planned | None = None
    alone = "with --at"
    if at is None:
        planned, why = live_cycle()
        alone = f"the cluster cannot be read ({why})"
    if planned is not None:
        snapshot, moment = planned.snapshot, planned.now
    else:
        try:
            database = build_snapshot(now=at or snapshot_time(), policy=policy)
        except SnapshotError as error:
            stderr.write(f"cannot snapshot the pool: {error}\n")
            return EXIT_INVALID
        snapshot, moment = database.snapshot, database.now
        stderr.write(f"warning: {alone}; {DATABASE_ALONE}\n")
    scenario = snapshot_to_dict(snapshot, policy, moment)
    text = json.dumps(scenario, indent=1) + "\n"
    out = options.get("out")
    if out is None:
        stdout.write(text)
        return 0
    out.write_text(text)
    pending = sum(1 for w in snapshot.workloads if w.state == "pending")
    stdout.write(
        f"wrote {out}: {len(snapshot.nodes)} nodes, {len(snapshot.queues)} queues, "
        f"{len(snapshot.workloads) - pending} workloads holding GPUs, {pending} pending, "
        f"at {scenario['now']}\n"
    )
    return 0
