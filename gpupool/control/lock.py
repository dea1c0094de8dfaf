"""One scheduling cycle at a time, cluster-wide.

On PostgreSQL the cycle takes a session-level advisory lock (``pg_try_advisory_lock``) on the
connection it then works on, as NetBox and kube-scheduler's leader election keep one writer:
a second worker (or ``gpupool cycle`` run by hand beside the loop) does not wait, it skips and
says so. If the process dies the server releases the lock with its connection. Elsewhere
(SQLite: the embedded default) an exclusive, non-blocking ``flock`` on a file beside the
database plays the same part between the processes of one machine.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

from django.db import connection

# Fixed 64-bit keys of our own: hash of each lock's name, as a signed bigint.
LOCK_NAME = "gpupool.scheduling-cycle"
# The utilisation read (``ControlLoop.read_utilization``) runs after a cycle, off its lock, one
# process at a time on a lock of its own.
READ_LOCK_NAME = "gpupool.utilization-read"


def _key(name: str) -> int:
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big", signed=True)


LOCK_KEY = _key(LOCK_NAME)


def lock_file(suffix: str = "cycle") -> Path:
    """The file whose flock stands for a lock (the cycle's by default) when the database is
    not PostgreSQL."""
    name = str(connection.settings_dict.get("NAME") or "")
    if not name or name == ":memory:" or name.startswith("file:"):
        # A database in memory lives in this process only: another process's, of the same
        # name, is another database, and must not share its lock (test runs side by side).
        if not name or name == ":memory:" or "mode=memory" in name:
            name = f"{name}#{os.getpid()}"
        digest = hashlib.sha256(name.encode()).hexdigest()[:16]
        return Path(tempfile.gettempdir()) / f"gpupool-{suffix}-{digest}.lock"
    return Path(f"{name}.{suffix}.lock")


@contextlib.contextmanager
def cycle_lock() -> Iterator[bool]:
    """Hold the cycle lock for the block; yields False (and holds nothing) when another
    process holds it."""
    with _try_lock(LOCK_KEY, "cycle") as acquired:
        yield acquired


@contextlib.contextmanager
def read_lock() -> Iterator[bool]:
    """Hold the utilisation read's lock for the block (as ``cycle_lock``, another one)."""
    with _try_lock(_key(READ_LOCK_NAME), "utilization-read") as acquired:
        yield acquired


@contextlib.contextmanager
def _try_lock(key: int, suffix: str) -> Iterator[bool]:
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_try_advisory_lock(%s)", [key])
            (acquired,) = cursor.fetchone()
        if not acquired:
            yield False
            return
        try:
            yield True
        finally:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_unlock(%s)", [key])
        return
    path = lock_file(suffix)
    with path.open("a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
