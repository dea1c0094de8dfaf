"""``gpupool utilization [--since 1h] [--json]``: allocated, active and idle GPU-hours per tenant.

Allocated GPU-hours are accounting's usage intervals inside the window; active GPU-hours are
what the utilisation source (DCGM through Prometheus, or the simulated cluster's profiles)
saw the tenants' GPUs work, from the activity windows the control loop records; idle is the
difference, and "unobserved" says how much of idle the source did not see (docs/utilization.md).

Without a utilisation source (``GPUPOOL_UTILIZATION_SOURCE`` names none) nothing was measured:
the table says so and gives allocation alone, active and idle "not measured", never idle;
``--json`` gives the API's rows (``"source": "none"``, the measured figures null) and
``"source"`` beside the window.
"""

from __future__ import annotations

import argparse
import json
from datetime import timedelta
from typing import Any, TextIO

from gpupool.clusters.grouping import AnnotationError, parse_duration
from gpupool.control.clock import pool_clock
from gpupool.utilization.queries import NO_SOURCE, source_name, tenant_utilization

HELP = (
    "Allocated GPU-hours per tenant over a recent window, and active and idle where a "
    "utilisation source measures them"
)


def window(text: str) -> float:
    """A duration: seconds, or Go form such as ``1h`` or ``90m``. argparse names the option
    (``argument --since: ...``), so the message says only what is wrong with the value."""
    try:
        seconds = parse_duration("value", text)
    except AnnotationError as error:
        raise argparse.ArgumentTypeError(str(error).removeprefix("value: ")) from None
    if seconds <= 0:
        raise argparse.ArgumentTypeError(f"must be longer than nothing, got {text.strip()}")
    return seconds


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """--since, --json."""
    parser.add_argument(
        "--since",
        type=window,
        default=3600.0,
        metavar="DURATION",
        help="how far back the window reaches (default 1h; e.g. 90m, 24h, 3600)",
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")


def run(options: dict[str, Any], stdout: TextIO, stderr: TextIO) -> int:
    """Print the figures per tenant for the window that ends now."""
    until = pool_clock()  # the cluster's time: a simulated one runs ahead of the wall
    since = until - timedelta(seconds=options["since"])
    source = source_name()
    rows = tenant_utilization(since, until, with_source=True)
    if options["json"]:
        document = {
            "since": since.isoformat(),
            "until": until.isoformat(),
            "source": source,
            "tenants": rows,
        }
        stdout.write(json.dumps(document, indent=2) + "\n")
        return 0
    stdout.write(f"GPU-hours from {since:%Y-%m-%d %H:%M} to {until:%H:%M} UTC\n")
    if source == NO_SOURCE:
        write_allocation_alone(rows, stdout)
        return 0
    stdout.write(
        f"{'tenant':<24} {'allocated':>10} {'active':>10} {'idle':>10} {'unobserved':>10} "
        f"{'active %':>9}\n"
    )
    for row in rows:
        share = "-" if row["active_share"] is None else f"{100 * row['active_share']:.0f}"
        stdout.write(
            f"{row['tenant']:<24} {row['allocated_gpu_hours']:>10.2f} "
            f"{row['active_gpu_hours']:>10.2f} {row['idle_gpu_hours']:>10.2f} "
            f"{row['unobserved_gpu_hours']:>10.2f} {share:>9}\n"
        )
    return 0


def write_allocation_alone(rows: list[dict[str, Any]], stdout: TextIO) -> None:
    """The table without a utilisation source: allocated GPU-hours, and active and idle said
    not to be measured (never counted as idle)."""
    stdout.write(
        "No utilisation source is configured (GPUPOOL_UTILIZATION_SOURCE names none): active "
        "and idle GPU-hours are not measured, only allocation is known (docs/utilization.md).\n"
    )
    stdout.write(f"{'tenant':<24} {'allocated':>10}  active and idle\n")
    for row in rows:
        stdout.write(
            f"{row['tenant']:<24} {row['allocated_gpu_hours']:>10.2f}  not measured (source none)\n"
        )
