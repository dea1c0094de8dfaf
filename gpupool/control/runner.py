"""Running the loop: one cycle now, or cycles on a timer until stopped.

A process keeps one ``ControlLoop`` (its state is what makes later cycles cheap): the Celery
task and the commands share ``shared_loop()``. ``run_forever`` is the in-process loop used
without a broker (``gpupool loop``, ``make demo``): a cycle, then a wait until the next is
due (``GPUPOOL_CYCLE_INTERVAL_S`` after the last one started), until ``stop`` is set --
between cycles, never in the middle of one.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from django.conf import settings
from django.db import close_old_connections, connection

from gpupool.control.backends import backend_from_settings
from gpupool.control.loop import ControlLoop, CycleResult

logger = logging.getLogger(__name__)

_shared: ControlLoop | None = None
_shared_lock = threading.Lock()


def shared_loop() -> ControlLoop:
    """This process's loop on the configured backend (made at the first call)."""
    global _shared
    with _shared_lock:
        if _shared is None:
            _shared = ControlLoop(backend_from_settings())
        return _shared


def fresh_connections() -> None:
    """Drop database connections that broke or outlived ``CONN_MAX_AGE`` (between cycles of a
    long-lived process; never inside a transaction someone else opened)."""
    if not connection.in_atomic_block:
        close_old_connections()


def run_shared_cycle(*, dry_run: bool = False) -> CycleResult:
    """One cycle of this process's loop."""
    fresh_connections()
    try:
        return shared_loop().run_cycle(dry_run=dry_run)
    finally:
        fresh_connections()


def run_forever(
    loop: ControlLoop,
    stop: threading.Event,
    *,
    interval_s: float | None = None,
    on_cycle: Callable[[CycleResult], None] | None = None,
) -> int:
    """Run cycles every ``interval_s`` until ``stop`` is set; returns how many ran."""
    interval = settings.GPUPOOL_CYCLE_INTERVAL_S if interval_s is None else interval_s
    cycles = 0
    while not stop.is_set():
        started = time.monotonic()
        fresh_connections()
        result = loop.run_cycle()
        cycles += 1
        if on_cycle is not None:
            on_cycle(result)
        if result.status == "failed":
            logger.warning("cycle failed: %s", result.error)
        stop.wait(max(interval - (time.monotonic() - started), 0.0))
    return cycles
