"""Process-level settings the callers of the decision core choose; the core itself never does.

``gc_paused`` pauses Python's cyclic garbage collector around work that allocates many
short-lived objects and creates no reference cycles worth collecting midway: a scheduling
cycle (``gpupool.scheduler.plan``), a replay's step. The pure core leaves the collector
alone, so whoever runs it decides (the ``plan`` and ``bench`` commands do).
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector (restoring its previous state after).

    A cycle at B1's scale allocates a few hundred thousand short-lived objects; the
    collector's passes over them would cost about a sixth of the cycle. Reference counting
    still frees everything as usual.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


__all__ = ["gc_paused"]
