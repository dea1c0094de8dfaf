"""``DatabaseStore``: the simulated cluster's store in the database, and how to open it.

The same ``SimulatedStore`` protocol as the in-memory store (``gpupool.clusters.
simulated_store``), over two tables: ``SimulatedClusterState`` (one row: the clock and the
revision counter) and ``SimulatedObject`` (a row per object, a tombstone once deleted). So
the demo's processes (the control loop, the workload generator, ``gpupool sim`` faults, the
web pages) share one simulated cluster, and it outlives them.

Writers are serialised by the state row: a transaction first updates it (a row lock on
PostgreSQL, the write lock on SQLite), so revisions are committed in order, and a reader that
selects the rows past its revision in one statement sees a whole number of transactions.
Tombstones are compacted away ``horizon`` revisions after their deletion; a reader further
behind than that re-lists, as an informer does after 410 Gone.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import DatabaseError, transaction
from django.db.models import F, Max, Min

from gpupool.clusters.base import ClusterUnavailable
from gpupool.clusters.simulated import Clock, ScaledClock, SimulatedBackend, SimulatedCluster
from gpupool.clusters.simulated_store import StoreChanges, StoredObject
from gpupool.simcluster.models import SimulatedClusterState, SimulatedObject

COMPACTION_HORIZON = 20_000  # revisions a tombstone outlives its deletion
COMPACTION_EVERY = 1_000  # revisions between two compactions

# The simulated clock's bounds: its speed, and the times it may read -- those Kubernetes'
# RFC 3339 timestamps can write (years 1970 to 9999). At the fastest speed it reaches the
# last one after about a month of wall-clock time, not within seconds.
MAX_SPEED = 86_400.0  # simulated seconds per wall-clock second: a day a second
LAST_TIME = datetime(9999, 12, 31, tzinfo=UTC).timestamp()


def _stored(row: SimulatedObject) -> StoredObject:
    return StoredObject(
        kind=row.kind,
        namespace=row.namespace,
        name=row.name,
        body=row.body,
        sim=row.sim,
        revision=row.revision,
        due_at=row.due_at,
        node=row.node,
        deleted=row.deleted,
    )


def _write_object(obj: StoredObject, revision: int) -> None:
    """Store one object (or its tombstone) at ``revision``."""
    SimulatedObject.objects.update_or_create(
        kind=obj.kind,
        namespace=obj.namespace,
        name=obj.name,
        defaults={
            "revision": revision,
            "deleted": obj.deleted,
            "due_at": obj.due_at,
            "node": obj.node,
            "body": dict(obj.body),
            "sim": dict(obj.sim),
        },
    )


def _write_state(state_id: int, **fields: Any) -> int:
    """Update the state row (the first update of a transaction takes the writers' lock)."""
    return SimulatedClusterState.objects.filter(pk=state_id).update(**fields)


def _compact(state_id: int, up_to: int) -> None:
    """Forget the tombstones up to revision ``up_to``."""
    SimulatedObject.objects.filter(deleted=True, revision__lte=up_to).delete()
    _write_state(state_id, compacted_revision=up_to)


class _DatabaseTransaction:
    """``StoreTransaction`` inside a database transaction holding the writers' lock."""

    def __init__(self, revision: int, store: DatabaseStore | None = None) -> None:
        self.revision = revision
        self._store = store

    def get(self, kind: str, namespace: str, name: str) -> StoredObject | None:
        row = SimulatedObject.objects.filter(
            kind=kind, namespace=namespace, name=name, deleted=False
        ).first()
        return None if row is None else _stored(row)

    def select(
        self, kind: str, *, namespace: str | None = None, node: str | None = None
    ) -> list[StoredObject]:
        rows = SimulatedObject.objects.filter(kind=kind, deleted=False)
        if namespace is not None:
            rows = rows.filter(namespace=namespace)
        if node is not None:
            rows = rows.filter(node=node)
        return [_stored(row) for row in rows.order_by("namespace", "name")]

    def due(self, now: float) -> list[StoredObject]:
        rows = SimulatedObject.objects.filter(deleted=False, due_at__lte=now)
        return [_stored(row) for row in rows.order_by("due_at", "kind", "namespace", "name")]

    def put(self, obj: StoredObject) -> StoredObject:
        self.revision += 1
        metadata = {**obj.body.get("metadata", {}), "resourceVersion": str(self.revision)}
        stored = obj.evolve(
            body={**obj.body, "metadata": metadata}, revision=self.revision, deleted=False
        )
        _write_object(stored, self.revision)
        return stored

    def remove(self, obj: StoredObject) -> None:
        self.revision += 1
        tombstone = obj.evolve(deleted=True, due_at=None, node="", facts=None)
        _write_object(tombstone, self.revision)

    def changes_since(self, revision: int) -> StoreChanges:
        assert self._store is not None, "a transaction of a DatabaseStore"
        return self._store.changes_since(revision)  # (inside this database transaction)


class DatabaseStore:
    """``SimulatedStore`` in the database (see the module docstring)."""

    def __init__(
        self,
        state_id: int,
        clock: Clock | None = None,
        *,
        horizon: int = COMPACTION_HORIZON,
        compact_every: int = COMPACTION_EVERY,
    ) -> None:
        self.state_id = state_id
        self.clock = clock  # to note where the simulated time was at each write
        self._horizon = horizon
        self._compact_every = compact_every

    @contextmanager
    def transaction(self) -> Iterator[_DatabaseTransaction]:
        """A database transaction holding the writers' lock; revisions move on at commit."""
        try:
            with transaction.atomic():
                _write_state(self.state_id, revision=F("revision"))
                state = SimulatedClusterState.objects.get(pk=self.state_id)
                tx = _DatabaseTransaction(state.revision, self)
                yield tx
                if tx.revision != state.revision:
                    reading = self.clock.now() if self.clock is not None else state.last_reading
                    _write_state(self.state_id, revision=tx.revision, last_reading=reading)
                    if tx.revision // self._compact_every != state.revision // self._compact_every:
                        horizon = tx.revision - self._horizon
                        if horizon > state.compacted_revision:
                            _compact(self.state_id, horizon)
        except DatabaseError as exc:
            raise ClusterUnavailable(f"the simulated cluster's database failed: {exc}") from exc

    def changes_since(self, revision: int) -> StoreChanges:
        """Rows changed after ``revision`` (one statement: whole transactions), or a re-list."""
        compacted = self._compacted()
        if revision > 0 and revision >= compacted:
            rows = list(SimulatedObject.objects.filter(revision__gt=revision).order_by("revision"))
            if revision >= self._compacted():  # no compaction ran while we read
                newest = max((row.revision for row in rows), default=revision)
                return StoreChanges(newest, [_stored(row) for row in rows])
        rows = list(SimulatedObject.objects.all())
        newest = max((row.revision for row in rows), default=0)
        return StoreChanges(newest, [_stored(r) for r in rows if not r.deleted], relist=True)

    def _compacted(self) -> int:
        return int(
            SimulatedClusterState.objects.filter(pk=self.state_id)
            .values_list("compacted_revision", flat=True)
            .get()
        )

    def next_due(self) -> float | None:
        """The earliest ``due_at`` of a live object."""
        due = SimulatedObject.objects.filter(deleted=False).aggregate(due=Min("due_at"))["due"]
        return None if due is None else float(due)


# --- opening the demo's cluster -------------------------------------------------------------


def speed_error(speed: float) -> str | None:
    """Why ``speed`` cannot be the simulated clock's (above 0, at most ``MAX_SPEED``), or None;
    said as argparse's messages are, after the option's name."""
    if not math.isfinite(speed) or speed <= 0:
        return "must be above 0"
    if speed > MAX_SPEED:
        return f"must be at most {MAX_SPEED:g} (a simulated day a second)"
    return None


def _checked_speed(speed: float) -> float:
    """``speed``, or ValueError saying why the clock cannot run at it (before any write)."""
    error = speed_error(speed)
    if error is not None:
        raise ValueError(f"speed {error}, got {speed:g}")
    return speed


def time_in_range(posix: float) -> bool:
    """Whether the simulated clock may read ``posix``: a date Kubernetes can write."""
    return math.isfinite(posix) and 0 <= posix <= LAST_TIME


def cluster_state(*, speed: float | None = None) -> SimulatedClusterState:
    """The state row, made on first use: simulated time starts at the wall clock's."""
    state = SimulatedClusterState.objects.order_by("pk").first()
    if state is not None:
        return state
    now = time.time()
    return _new_state(now, _checked_speed(speed) if speed is not None else default_speed())


def _new_state(now: float, speed: float) -> SimulatedClusterState:
    return SimulatedClusterState.objects.create(
        clock_origin=now, wall_origin=now, speed=speed, last_reading=now
    )


def default_speed() -> float:
    """``GPUPOOL_SIM_SPEED``: simulated seconds per wall-clock second for a new cluster."""
    speed = float(getattr(settings, "GPUPOOL_SIM_SPEED", 1.0))
    error = speed_error(speed)
    if error is not None:
        raise ImproperlyConfigured(f"GPUPOOL_SIM_SPEED {error}, got {speed:g}")
    return speed


def clock_of(state: SimulatedClusterState) -> ScaledClock:
    """The clock every process builds from the state row, so that all read the same time."""
    return ScaledClock(state.clock_origin, state.wall_origin, state.speed)


class StateClock:
    """The state row's clock, following it: a new speed set by another process (``gpupool
    sim clock --speed``) reaches this one within ``refresh_s`` wall-clock seconds."""

    def __init__(self, state: SimulatedClusterState, refresh_s: float = 1.0) -> None:
        self._state_id = state.pk
        self._refresh_s = refresh_s
        self._clock = clock_of(state)
        self._read_at = time.monotonic()

    @property
    def speed(self) -> float:
        """Simulated seconds per wall-clock second."""
        return self._clock.speed

    def now(self) -> float:
        """The simulated time now."""
        if time.monotonic() - self._read_at >= self._refresh_s:
            state = SimulatedClusterState.objects.filter(pk=self._state_id).first()
            if state is not None:
                self._clock = clock_of(state)
            self._read_at = time.monotonic()
        return self._clock.now()


def restart_clock(speed: float) -> ScaledClock:
    """Resume the simulated time where the last write left it, at ``speed`` from now on.

    A demo that was stopped does not jump ahead by the hours it was off (times ``speed``):
    its cluster was paused, and its pods run on from where they were. A speed out of bounds
    (``speed_error``) is a ValueError and nothing is written; a time stored out of range
    (``time_in_range``: a speed no longer taken ran it past any date) restarts from the wall
    clock's, so that this is also how such a cluster is mended.
    """
    state = cluster_state(speed=_checked_speed(speed))
    now = time.time()
    resumed = max(state.last_reading, state.clock_origin, _latest_stamp())
    if not time_in_range(resumed):
        resumed = now
    _write_state(state.pk, clock_origin=resumed, wall_origin=now, speed=speed)
    state.refresh_from_db()
    return clock_of(state)


def _latest_stamp() -> float:
    """The latest moment the pool's records hold (a submission, a transition), POSIX seconds;
    0 when none. The cluster's clock resumes no earlier: cycles that failed before writing to
    the cluster still moved the pool's clock, and work submitted meanwhile was stamped by it,
    so a clock resumed at the cluster's last write admitted work before its submission, which
    the database refuses -- every cycle after failed (a restarted demo wedged for good)."""
    from gpupool.workloads.models import Workload, WorkloadTransition

    stamps = [
        Workload.objects.aggregate(at=Max("submitted_at"))["at"],
        WorkloadTransition.objects.aggregate(at=Max("at"))["at"],
    ]
    return max((at.timestamp() for at in stamps if at is not None), default=0.0)


def open_simulated_cluster() -> SimulatedCluster:
    """The database's simulated cluster, on the clock its state row keeps."""
    state = cluster_state()
    clock = StateClock(state)
    return SimulatedCluster(DatabaseStore(state.pk, clock), clock)


def open_simulated_backend() -> SimulatedBackend:
    """The ``ClusterBackend`` of ``GPUPOOL_CLUSTER=simulated``: the database's cluster."""
    return SimulatedBackend(open_simulated_cluster())


# The name the control loop's table of backend factories (GPUPOOL_CLUSTER_BACKENDS) gives it.
backend_from_settings = open_simulated_backend
