"""``gpupool cycle [--dry-run]``: one scheduling cycle now, on the configured backend.

Runs sync -> snapshot -> plan -> record -> apply once (``gpupool.control.loop``) and prints
its record as JSON: status, cycle id, phase timings, counts, the workloads admitted and
evicted, pending workloads by reason, and the error if any. With ``--dry-run`` it syncs and
plans but records and applies nothing. When another cycle holds the lock (the loop is running)
it skips and says so; the exit status is 1 when the cycle failed or was skipped.
"""

from __future__ import annotations

import argparse
import json
from typing import Any, TextIO

from django.core.exceptions import ImproperlyConfigured

from gpupool.control.runner import run_shared_cycle

HELP = "Run one scheduling cycle now and print its record as JSON (--dry-run: plan only)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """--dry-run."""
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="sync and plan, but record and apply nothing",
    )


def run(options: dict[str, Any], stdout: TextIO, stderr: TextIO) -> int:
    """Run the cycle, print its record."""
    try:
        result = run_shared_cycle(dry_run=options.get("dry_run", False))
    except ImproperlyConfigured as error:
        stderr.write(f"cannot run a cycle: {error}\n")
        return 2
    stdout.write(json.dumps(result.as_json(), indent=1) + "\n")
    if result.status == "skipped":
        stderr.write("skipped: another scheduling cycle holds the lock\n")
    return 0 if result.status in ("succeeded", "dry-run") else 1
