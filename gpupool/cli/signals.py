"""Stopping a long-running command on SIGINT (Ctrl-C) or SIGTERM, without deadlocking it.

Python runs a signal handler on the main thread, between two bytecodes of whatever that thread
was doing. The commands that run until stopped (``gpupool loop``, ``gpupool demo``) spend their
time in ``Event.wait(timeout)``, and an Event guards its flag with a plain, non-reentrant
``Lock`` that ``wait`` holds on its way in and out. A handler calling ``event.set()`` there
waits for a lock its own thread holds, forever. That is not a theory: ``make demo-k8s`` got
SIGINT from Ctrl-C and, milliseconds later, SIGTERM from its shell's trap, and the second
arrived while the first had just woken the wait (CI of 2026-12-05, the demo never stopped).
The same goes for a handler writing to ``stderr`` while the main thread is writing to it
(CPython raises "reentrant call"). So the handler does neither: it hands both to a thread of
their own, which takes the lock as soon as the main thread lets it go.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from types import FrameType

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def stop_on_signals(
    event: threading.Event, announce: Callable[[signal.Signals], None] | None = None
) -> Callable[[], None]:
    """Set ``event`` (after ``announce(signal)``, if given) on SIGINT or SIGTERM, from a thread
    of its own; return what puts the previous handlers back."""

    def stop(signum: signal.Signals) -> None:
        if announce is not None:
            announce(signum)
        event.set()

    def handle(signum: int, frame: FrameType | None) -> None:
        threading.Thread(target=stop, args=(signal.Signals(signum),), daemon=True).start()

    previous = {sig: signal.signal(sig, handle) for sig in STOP_SIGNALS}

    def restore() -> None:
        for sig, handler in previous.items():
            signal.signal(sig, handler)

    return restore
