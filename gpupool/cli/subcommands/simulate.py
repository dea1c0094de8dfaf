"""``manage.py gpupool simulate <mode>``: replay traces through placement or queueing policies.

Each mode is one sub-parser with one function (`MODES`): ``openb`` is benchmark B2 (placement
quality on the FGD paper's trace), ``philly`` is B3 (multi-tenant queueing), ``synthetic``
runs B3's policies on a drawn trace, and ``whatif`` replays demand with a proposed change.
The modes live in ``gpupool.cli.simulate_placement`` and ``gpupool.cli.simulate_queueing``.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any, TextIO

from gpupool.cli.simulate_placement import add_openb_arguments, run_openb_mode
from gpupool.cli.simulate_queueing import (
    add_philly_arguments,
    add_synthetic_arguments,
    add_whatif_arguments,
    run_philly_mode,
    run_synthetic_mode,
    run_whatif_mode,
)
from gpupool.simulation.datasets import MissingTraceData

HELP = "Replay traces through placement or queueing policies (B2, B3, synthetic, what-if)"

Runner = Callable[[dict[str, Any], TextIO, TextIO], int]

# Each mode: (help, add its arguments, run it). Only modes that work are registered.
MODES: dict[str, tuple[str, Callable[[argparse.ArgumentParser], None], Runner]] = {
    "openb": (
        "B2: placement quality on the openb trace (FGD paper protocol)",
        add_openb_arguments,
        run_openb_mode,
    ),
    "philly": (
        "B3: multi-tenant queueing on the Philly VC trace (fifo, kueue-like, gpupool)",
        add_philly_arguments,
        run_philly_mode,
    ),
    "synthetic": (
        "The B3 policies on a seeded synthetic multi-tenant trace (tenants, load, skew, bursts)",
        add_synthetic_arguments,
        run_synthetic_mode,
    ),
    "whatif": (
        "Replay recorded demand (or a trace) with a proposed quota or policy change",
        add_whatif_arguments,
        run_whatif_mode,
    ),
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """One sub-parser per mode."""
    modes = parser.add_subparsers(dest="mode", metavar="MODE")
    modes.required = True
    for name, (help_text, add, runner) in MODES.items():
        child = modes.add_parser(name, help=help_text, description=help_text)
        add(child)
        child.set_defaults(_simulate=runner)


def run(options: dict[str, Any], stdout: TextIO, stderr: TextIO) -> int:
    """Dispatch to the chosen mode; a trace file that is not there is exit status 2, with a
    message naming the file and where the trace is published."""
    runner: Runner = options.pop("_simulate")
    try:
        return runner(options, stdout, stderr)
    except MissingTraceData as error:
        stderr.write(f"simulate {options['mode']}: {error}\n")
        return 2
