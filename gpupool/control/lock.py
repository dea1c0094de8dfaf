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
import tempfile
from collections.abc import Iterator
from pathlib import Path

from django.db import connection

# A fixed 64-bit key of our own: hash of the lock's name, as a signed bigint.
LOCK_NAME = "gpupool.scheduling-cycle"
LOCK_KEY = int.from_bytes(hashlib.sha256(LOCK_NAME.encode()).digest()[:8], "big", signed=True)


def lock_file() -> Path:
    """The file whose flock stands for the cycle lock when the database is not PostgreSQL."""
    name = str(connection.settings_dict.get("NAME") or "")
    if not name or name == ":memory:" or name.startswith("file:"):
        digest = hashlib.sha256(name.encode()).hexdigest()[:16]
        return Path(tempfile.gettempdir()) / f"gpupool-cycle-{digest}.lock"
    return Path(f"{name}.cycle.lock")


@contextlib.contextmanager
def cycle_lock() -> Iterator[bool]:
    """Hold the cycle lock for the block; yields False (and holds nothing) when another
    process holds it."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_try_advisory_lock(%s)", [LOCK_KEY])
            (acquired,) = cursor.fetchone()
        if not acquired:
            yield False
            return
        try:
            yield True
        finally:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_unlock(%s)", [LOCK_KEY])
        return
    path = lock_file()
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
