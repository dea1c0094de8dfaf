"""``gpupool loop``: the scheduling loop in this process, until stopped.

Without a broker (the embedded default, ``make demo``) this is how cycles run: one every
``--interval`` seconds (``GPUPOOL_CYCLE_INTERVAL_S``), each under the cluster-wide lock, so a
Celery worker or a second ``gpupool loop`` beside it skips rather than double-books. SIGINT
(Ctrl-C) and SIGTERM stop it cleanly between two cycles. Each cycle prints one line. Between
cycles it also rolls usage up for the cost reports (every ``GPUPOOL_ROLL_UP_INTERVAL_S``, what
Celery beat does with a broker); a roll-up that made hours final prints one line too.
"""

from __future__ import annotations

import argparse
import signal
import threading
from typing import Any, TextIO

from django.core.exceptions import ImproperlyConfigured

from gpupool.accounting.actions import RollUp
from gpupool.cli.arguments import positive_float, positive_int
from gpupool.cli.signals import stop_on_signals
from gpupool.control.loop import CycleResult
from gpupool.control.runner import run_forever, shared_loop

HELP = "Run the scheduling loop in this process until Ctrl-C / SIGTERM"

MAX_INTERVAL_S = 86_400.0  # a day between cycles; past it a scheduling loop schedules nothing


def interval_seconds(text: str) -> float:
    """``--interval``: seconds above 0, at most ``MAX_INTERVAL_S``."""
    value = positive_float(text)
    if value > MAX_INTERVAL_S:
        raise argparse.ArgumentTypeError(
            f"must be at most {MAX_INTERVAL_S:g} (a day), got {text.strip()}"
        )
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """--interval, --cycles."""
    parser.add_argument(
        "--interval",
        type=interval_seconds,
        default=None,
        metavar="SECONDS",
        help="seconds between cycle starts, above 0, at most a day "
        "(default: GPUPOOL_CYCLE_INTERVAL_S)",
    )
    parser.add_argument(
        "--cycles",
        type=positive_int,
        default=None,
        metavar="N",
        help="stop after N cycles (default: run until stopped)",
    )


def run(options: dict[str, Any], stdout: TextIO, stderr: TextIO) -> int:
    """Run cycles until a signal (or --cycles) stops the loop."""
    stop = threading.Event()

    def announce(signum: signal.Signals) -> None:
        stderr.write(f"stopping after this cycle ({signum.name})\n")

    restore_signals = stop_on_signals(stop, announce)
    limit = options.get("cycles")
    done = 0

    def report(result: CycleResult) -> None:
        nonlocal done
        done += 1
        timings = " ".join(f"{k}={v:.3f}s" for k, v in result.timings.items())
        stdout.write(
            f"cycle {result.cycle_id}: {result.status} admitted={len(result.admitted)} "
            f"evicted={len(result.evicted)} pending={sum(result.pending.values())} {timings}"
            + (f" error={result.error.splitlines()[0]}" if result.error else "")
            + "\n"
        )
        stdout.flush()
        if limit is not None and done >= limit:
            stop.set()

    def report_roll_up(rolled: RollUp) -> None:
        if rolled.hours:
            stdout.write(f"roll-up: {rolled.hours} hour(s) final, until {rolled.rolled_until}\n")
            stdout.flush()

    try:
        loop = shared_loop()
    except ImproperlyConfigured as error:
        stderr.write(f"cannot run the loop: {error}\n")
        return 2
    try:
        run_forever(
            loop,
            stop,
            interval_s=options.get("interval"),
            on_cycle=report,
            on_roll_up=report_roll_up,
        )
    finally:
        restore_signals()
        loop.close()
    return 0
