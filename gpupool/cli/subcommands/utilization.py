"""``gpupool utilization [--window 24h | --since DURATION] [--json]``: allocated, active and
idle GPU-hours per tenant.

The window ends at the pool's clock: ``--window`` one of the Utilisation page's and the API's
(``utilization.windows``: ``6h``, ``24h``, ``7d``; default ``24h``, as they), or
``--since`` any length (seconds, Go form such as ``90m``, or days such as ``7d``) up to the
API's longest window.

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
import re
from datetime import timedelta
from typing import Any, TextIO

from gpupool.clusters.grouping import AnnotationError, parse_duration
from gpupool.control.clock import pool_clock
from gpupool.scheduler.explain import when
from gpupool.utilization.queries import NO_SOURCE, source_name, tenant_utilization
from gpupool.utilization.windows import DEFAULT_WINDOW, MAX_WINDOW, WINDOWS, window_length

HELP = (
    "Allocated GPU-hours per tenant over a recent window, and active and idle where a "
    "utilisation source measures them"
)


_DAYS = re.compile(r"(\d+(?:\.\d+)?)d")


def window(text: str) -> float:
    """A duration: seconds, Go form such as ``1h`` or ``90m``, or days such as ``7d`` (a
    window's name reads as its length), at most ``MAX_WINDOW``. argparse names the option
    (``argument --since: ...``), so the message says only what is wrong with the value."""
    days = _DAYS.fullmatch(text.strip())
    try:
        seconds = float(days.group(1)) * 86_400 if days else parse_duration("value", text)
    except AnnotationError as error:
        wrong = str(error).removeprefix("value: ")
        raise argparse.ArgumentTypeError(
            f"{wrong}, nor days like 7d" if "is not a duration" in wrong else wrong
        ) from None
    if seconds <= 0:
        raise argparse.ArgumentTypeError(f"must be longer than nothing, got {text.strip()}")
    if seconds > MAX_WINDOW.total_seconds():
        raise argparse.ArgumentTypeError(
            f'"{text.strip()}" is longer than a window may be ({MAX_WINDOW.days} days)'
        )
    return seconds


def window_name(text: str) -> str:
    """One of the windows' names (``utilization.windows.WINDOWS``), else a message naming
    them (argparse names the option: ``argument --window: ...``)."""
    try:
        window_length(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    return text


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """--window or --since, --json."""
    reach = parser.add_mutually_exclusive_group()
    reach.add_argument(
        "--window",
        type=window_name,
        default=DEFAULT_WINDOW,
        metavar="NAME",
        help=f"the window before now, one of {', '.join(WINDOWS)} (default {DEFAULT_WINDOW}; "
        "the Utilisation page's and the API's ?window=)",
    )
    reach.add_argument(
        "--since",
        type=window,
        default=None,
        metavar="DURATION",
        help="instead of --window, how far back the window reaches: seconds, Go form or days "
        f"(e.g. 90m, 36h, 7d, 3600; at most {MAX_WINDOW.days} days)",
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")


def run(options: dict[str, Any], stdout: TextIO, stderr: TextIO) -> int:
    """Print the figures per tenant for the window that ends now."""
    until = pool_clock()  # the cluster's time: a simulated one runs ahead of the wall
    seconds = options.get("since")
    length = (
        window_length(options.get("window") or DEFAULT_WINDOW)
        if seconds is None
        else timedelta(seconds=seconds)
    )
    since = until - length
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
    # Both ends with their day (a 24h or 7d window ends on another day than it begins),
    # in the words the pages and the CLI use for a time in a sentence.
    stdout.write(f"GPU-hours from {when(since.timestamp())} to {when(until.timestamp())}\n")
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
