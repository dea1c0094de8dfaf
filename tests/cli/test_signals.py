"""Stopping on SIGINT / SIGTERM (gpupool/cli/signals.py): the stop can never deadlock."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import threading

from gpupool.cli.signals import stop_on_signals

# The main thread holds the Event's lock, as Event.wait() does on its way in and out, when
# the signal arrives: a handler that set the event there would wait on its own thread forever.
SIGNAL_INSIDE_WAIT = textwrap.dedent("""
    import signal, threading
    from gpupool.cli.signals import stop_on_signals

    stop = threading.Event()
    stop_on_signals(stop)
    with stop._cond:
        signal.raise_signal(signal.SIGTERM)
        print("handled", stop.is_set(), flush=True)
    print("stopped", stop.wait(10), flush=True)
""")


def test_a_signal_that_arrives_while_the_wait_holds_the_lock_still_stops() -> None:
    # In a process of its own: were the handler to deadlock, the timeout fails the test
    # rather than hanging the suite.
    done = subprocess.run(
        [sys.executable, "-c", SIGNAL_INSIDE_WAIT], capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 0, done.stderr
    # The handler returned at once, with the lock still held; the stop landed once it was let go.
    assert done.stdout.split("\n")[:2] == ["handled False", "stopped True"]


def test_the_stop_is_announced_first_and_the_old_handlers_come_back() -> None:
    before = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    stop = threading.Event()
    heard: list[tuple[str, bool]] = []
    restore = stop_on_signals(stop, lambda signum: heard.append((signum.name, stop.is_set())))
    try:
        signal.raise_signal(signal.SIGINT)
        assert stop.wait(10)
        assert heard == [("SIGINT", False)]
    finally:
        restore()
    assert {sig: signal.getsignal(sig) for sig in before} == before
