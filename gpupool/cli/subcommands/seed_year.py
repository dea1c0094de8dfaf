"""``gpupool seed-year``: load a seeded year of a busy pool into an empty database (B5).

By default B5's sizes: 200 tenants, 400 queues, 500,000 workloads, 5,000,000 usage intervals
and 50,000 preemption events over the 365 days before ``--end`` (the start of this hour), in a
pool sized so that its GPUs are 60% used. ``gpupool.accounting.bulk.year`` says how the year is
made; the pool, tree, quotas and users go in through their actions and the history in bulk
(COPY on PostgreSQL) through ``gpupool.accounting.bulk.actions``. Then the usage is rolled up
(``do_roll_up_usage``), as the beat would have done all year, so the reports answer at once.

It prints what it loaded and how long each step took (JSON with ``--json``), and the users it
made for the load benchmark (``benchmarks/b5_api_load.py``): ``b5-admin``, ``b5-finance``,
and a lead and a member of the largest tenant, all with ``--password``.

The work still running at the year's end is placed on the pool's nodes (``placements``), so
that the pool's snapshot builds and plans. ``--placements-only`` adds just those placements to
a year loaded before seed-year placed its running work (and records a finished cycle, so the
pages read the pool anew), without reseeding.
"""

from __future__ import annotations

import argparse
import json
import time
from datetime import UTC
from typing import Any, TextIO

from django.core.exceptions import ValidationError
from django.db import connection
from django.utils import timezone

from gpupool.accounting.actions import do_roll_up_usage
from gpupool.accounting.bulk.actions import do_load_year, do_place_running_work
from gpupool.accounting.bulk.year import YearShape, plan_year
from gpupool.cli.arguments import positive_float, positive_int
from gpupool.cli.subcommands.snapshot import cycle_time

HELP = "Load a seeded year of a busy pool (B5: 500,000 workloads) into an empty database"

EXIT_INVALID = 2
DEFAULT_PASSWORD = "b5-password"  # noqa: S105 - benchmark accounts on a throwaway database


def non_negative_int(text: str) -> int:
    """A count, 0 or more (``--preemptions``)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {value}")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Sizes (B5's by default), --seed, --end, --no-roll-up, --password, --json."""
    shape = YearShape()
    parser.add_argument("--seed", type=int, default=7, help="random seed (default: 7)")
    parser.add_argument(
        "--end",
        type=cycle_time,
        metavar="TIME",
        help="when the year ends, ISO 8601 with a zone (default: the start of this hour)",
    )
    for name, kind, help_text in (
        ("tenants", positive_int, "tenants"),
        ("queues", positive_int, "queues, root and organizations included"),
        ("workloads", positive_int, "workloads"),
        ("intervals", positive_int, "usage intervals"),
        ("preemptions", non_negative_int, "preemption events"),
        ("days", positive_int, "days of history"),
        ("utilisation", positive_float, "average share of the GPUs in use"),
    ):
        default = getattr(shape, name)
        parser.add_argument(
            f"--{name}", type=kind, default=default, help=f"{help_text} (default: {default:,})"
        )
    parser.add_argument(
        "--no-roll-up", action="store_true", help="load only; leave the roll-up to the beat"
    )
    parser.add_argument(
        "--password",
        default=DEFAULT_PASSWORD,
        help=f"password of the benchmark users (default: {DEFAULT_PASSWORD})",
    )
    parser.add_argument(
        "--placements-only",
        action="store_true",
        help="only place the running work of a year already loaded without placements",
    )
    parser.add_argument("--json", action="store_true", help="print the result as JSON")


def place_only(options: dict[str, Any], stdout: TextIO, stderr: TextIO) -> int:
    """``--placements-only``: place the loaded year's running work; exit 2 when it does not
    fit the nodes."""
    began = time.perf_counter()
    try:
        placed = do_place_running_work()
    except ValidationError as error:
        stderr.write(f"seed-year: {'; '.join(error.messages)}\n")
        return EXIT_INVALID
    seconds = round(time.perf_counter() - began, 1)
    if options["json"]:
        stdout.write(json.dumps({"placements": placed, "seconds": seconds}, indent=2) + "\n")
    else:
        stdout.write(f"Placed {placed:,} pods of the running work ({seconds} s).\n")
    return 0


def run(options: dict[str, Any], stdout: TextIO, stderr: TextIO) -> int:
    """Plan, load and roll up; exit 2 when the sizes cannot be planned or the pool is not
    empty."""
    if options.get("placements_only"):
        return place_only(options, stdout, stderr)
    shape = YearShape(
        tenants=options["tenants"],
        queues=options["queues"],
        workloads=options["workloads"],
        intervals=options["intervals"],
        preemptions=options["preemptions"],
        days=options["days"],
        utilisation=options["utilisation"],
    )
    problems = shape.problems()
    if problems:
        stderr.write("seed-year: " + "; ".join(f"--{p}" for p in problems) + "\n")
        return EXIT_INVALID
    end = options.get("end") or timezone.now().astimezone(UTC).replace(
        minute=0, second=0, microsecond=0
    )
    seconds: dict[str, float] = {}
    began = time.perf_counter()
    plan = plan_year(shape, seed=options["seed"], end=end)
    seconds["plan"] = time.perf_counter() - began
    began = time.perf_counter()
    try:
        loaded = do_load_year(plan, password=options["password"])
    except ValidationError as error:
        stderr.write(f"seed-year: {'; '.join(error.messages)}\n")
        return EXIT_INVALID
    seconds["load"] = time.perf_counter() - began
    rolled = None
    if not options["no_roll_up"]:
        began = time.perf_counter()
        rolled = do_roll_up_usage(until=plan.end)
        seconds["roll_up"] = time.perf_counter() - began
    seconds["total"] = sum(seconds.values())
    result = {
        "database": connection.vendor,
        "seed": options["seed"],
        "start": plan.start.isoformat(),
        "end": plan.end.isoformat(),
        "counts": loaded.counts,
        "flavors": {f.name: f.nodes * f.gpus_per_node for f in plan.flavors},
        "rolled_up_hours": rolled.hours if rolled else 0,
        "rolled_up_rows": rolled.rows if rolled else 0,
        "seconds": {name: round(value, 1) for name, value in seconds.items()},
        "users": loaded.users,
    }
    if options["json"]:
        stdout.write(json.dumps(result, indent=2) + "\n")
        return 0
    counts = ", ".join(
        f"{count:,} {name.replace('_', ' ')}" for name, count in loaded.counts.items()
    )
    stdout.write(f"Loaded {counts} ({plan.start:%Y-%m-%d} to {plan.end:%Y-%m-%d}).\n")
    stdout.write(
        "Seconds: " + ", ".join(f"{name} {value:.1f}" for name, value in seconds.items()) + "\n"
    )
    stdout.write(
        "Users (password "
        + repr(options["password"])
        + "): "
        + ", ".join(f"{name} ({role})" for role, name in loaded.users.items())
        + "\n"
    )
    return 0
