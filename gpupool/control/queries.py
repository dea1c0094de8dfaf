"""What the API and the pages read about the scheduling loop: its cycles, and the pool as the
decision core saw it at the last finished cycle.

The core's view of the pool (``build_snapshot``) costs about a second at B1's size, so it is
built at most once per finished cycle and kept in Django's cache under that cycle's id: every
request between two cycles reads the same snapshot, and the first request after a new cycle
builds the next one. Figures derived from it (queue shares, fragmentation) are cached the same
way. Before any cycle has finished there is no id to key on, so a snapshot serves for a few
seconds only. The cache pickles what it keeps; the core's frozen dataclasses, once compiled
with mypyc, do not unpickle by themselves, so they are pickled by their fields
(``_pickle_by_fields``).
"""

from __future__ import annotations

import copyreg
import dataclasses
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Generic, TypeVar, cast

from django.core.cache import cache
from django.db.models import Max
from django.db.models.functions import TruncHour, TruncMinute

from gpupool.clusters.base import ResourceAmounts
from gpupool.control.budgets import reserved_windows
from gpupool.control.choices import CycleStatus
from gpupool.control.clock import pool_now
from gpupool.control.models import SchedulingCycle
from gpupool.control.snapshot import (
    DatabaseSnapshot,
    SnapshotError,
    build_snapshot,
    one_state_of_the_database,
)
from gpupool.control.sync import with_foreign_usage
from gpupool.inventory.models import Node
from gpupool.inventory.queries import FlavorFragmentation, flavor_fragmentation
from gpupool.scheduler import shares, types
from gpupool.scheduler.cycle_state import Cycle
from gpupool.scheduler.shares import QueueShare, queue_shares
from gpupool.scheduler.types import PolicyInfo
from gpupool.workloads.choices import LIVE_STATES
from gpupool.workloads.models import Workload

# How long a cycle's values are kept: the next cycle's id replaces them long before.
CYCLE_CACHE_S = 600
# Without a finished cycle (no loop has run yet), how long one snapshot serves.
NO_CYCLE_CACHE_S = 5

T = TypeVar("T")


def _by_fields(value: object) -> tuple[type, tuple[object, ...]]:
    """Rebuild a core dataclass from its fields, in order (all are ``__init__`` arguments)."""
    return type(value), tuple(getattr(value, f.name) for f in dataclasses.fields(value))  # type: ignore[arg-type]


def _pickle_by_fields() -> None:
    """Pickle every dataclass of the core's modules whose values this cache keeps (``types``,
    ``shares``) by its fields: the compiled core's frozen classes cannot be unpickled the
    default way (it assigns their fields one by one)."""
    for module in (types, shares):
        for value in vars(module).values():
            if (
                isinstance(value, type)
                and dataclasses.is_dataclass(value)
                and value.__module__ == module.__name__
            ):
                copyreg.pickle(value, _by_fields)


_pickle_by_fields()


def pool_policy() -> PolicyInfo:
    """The policy the pool is scheduled with (the core's defaults)."""
    return PolicyInfo()


def last_finished_cycle_id() -> int | None:
    """The id of the latest scheduling cycle that has finished, whatever its outcome."""
    return (
        SchedulingCycle.objects.filter(finished_at__isnull=False)
        .order_by("-started_at", "-id")
        .values_list("id", flat=True)
        .first()
    )


@dataclass(frozen=True, slots=True)
class PoolView(Generic[T]):
    """A value computed from the pool as the core saw it after one finished cycle."""

    value: T
    cycle_id: int | None  # None: no cycle has finished yet
    at: datetime  # when the snapshot was taken


@dataclass(frozen=True, slots=True)
class _Unplannable:
    """What the cache keeps for a pool the core cannot plan: the ``SnapshotError``'s words."""

    message: str


# What this process last read of each cached value, with the token the value was stored
# under: a value read again while the cache still holds the same token is not unpickled
# again (the pool's snapshot of B5's year: 6 ms a request). A value is rebuilt, or the cache
# cleared, with a new token, so a stale one is never returned. Kept small: the keys of one
# or two cycles are all that is read.
_READ: dict[str, tuple[str, object]] = {}
_READ_KEYS_KEPT = 32


def _cached(name: str, cycle_id: int | None, build: Callable[[], T]) -> T:
    """``build()``, kept in the cache under the cycle's id. A pool that cannot be planned
    (``SnapshotError``) is kept so too, and raises again from the cache: a page read between
    two cycles does not retry a snapshot that failed (on B5's year, 0.1 s a request)."""
    key = f"gpupool:{name}:cycle:{'none' if cycle_id is None else cycle_id}"
    token: str | None = cache.get(f"{key}:token")
    read = _READ.get(key)
    found: T | _Unplannable | None
    if token is not None and read is not None and read[0] == token:
        found = read[1]  # type: ignore[assignment]  # stored by this function, as a T
    else:
        found = cache.get(key)
        timeout = NO_CYCLE_CACHE_S if cycle_id is None else CYCLE_CACHE_S
        if found is None:
            try:
                found = build()
            except SnapshotError as error:
                found = _Unplannable(str(error))
            cache.set(key, found, timeout)
            token = None
        if token is None:
            token = uuid.uuid4().hex
            cache.set(f"{key}:token", token, timeout)
        if len(_READ) >= _READ_KEYS_KEPT:
            _READ.clear()
        _READ[key] = (token, found)
    if isinstance(found, _Unplannable):
        raise SnapshotError(found.message)
    return cast(T, found)  # built above, or read back as it was stored


def _snapshot(cycle_id: int | None) -> DatabaseSnapshot:
    return _cached("snapshot", cycle_id, read_pool_snapshot)


def read_pool_snapshot() -> DatabaseSnapshot:
    """The pages' snapshot, its time and its rows read in one state of the database: read
    apart, an admission committed between the two started "after the snapshot's time", and
    the pages could not plan the pool until the next cycle."""
    with one_state_of_the_database():
        database = build_snapshot(now=snapshot_time(), policy=pool_policy())
        return with_recorded_usage(reserved_windows(database))


def with_recorded_usage(database: DatabaseSnapshot) -> DatabaseSnapshot:
    """The pool less what other schedulers' pods hold, as the control loop last recorded it
    on the nodes (``Node.foreign_usage``), taken off as the loop's own view takes the
    cluster's (``sync.with_foreign_usage``): the pages, the dry-run and the what-if see the
    GPUs they hold as taken, not free."""
    rows = Node.objects.exclude(foreign_usage={}).values_list("name", "foreign_usage", "labels")
    usage, labels = {}, {}
    for name, amounts, node_labels in rows:
        usage[name] = ResourceAmounts.from_json(amounts)
        labels[name] = node_labels
    if not usage:
        return database
    return dataclasses.replace(
        database, snapshot=with_foreign_usage(database.snapshot, usage, labels)
    )


def snapshot_time() -> datetime:
    """The time the pages' snapshot of the pool is taken at: the pool's clock, or the wall
    clock when it is later, and never before the latest admission. A simulated cluster runs
    ahead of the wall clock, and a cycle being recorded admits work stamped after the last
    finished cycle's clock: the snapshot refuses work that starts after its time."""
    placed = Workload.objects.filter(state__in=LIVE_STATES, admitted_at__isnull=False)
    latest = placed.aggregate(latest=Max("admitted_at"))["latest"]
    return max(t for t in (pool_now(), latest) if t is not None)


def _moment(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, tz=UTC)


def pool_snapshot() -> PoolView[DatabaseSnapshot]:
    """The pool as the core sees it, built once per finished cycle (``SnapshotError`` when the
    database cannot be planned, e.g. without a default priority class)."""
    cycle_id = last_finished_cycle_id()
    database = _snapshot(cycle_id)
    return PoolView(database, cycle_id, _moment(database.now))


def pool_figure(name: str, compute: Callable[[DatabaseSnapshot], T]) -> PoolView[T]:
    """``compute(snapshot)`` on the pool's snapshot, computed once per finished cycle."""
    cycle_id = last_finished_cycle_id()

    def build() -> tuple[T, float]:
        database = _snapshot(cycle_id)
        return compute(database), database.now

    value, now = _cached(name, cycle_id, build)
    return PoolView(value, cycle_id, _moment(now))


@dataclass(frozen=True, slots=True)
class PoolFigures:
    """What the core's view of the pool says now: per queue and flavor what is allocated,
    borrowed and lent, and per flavor its fragmentation."""

    shares: dict[str, dict[str, QueueShare]]
    fragmentation: tuple[FlavorFragmentation, ...]


def _figures(database: DatabaseSnapshot) -> PoolFigures:
    """Both figures from one core cycle's starting state (nothing is planned). A pool without
    a queue has none: the core plans no pool without its queue tree's root (it fails on one,
    ``QuotaTree.root``), so nothing is asked of it until a queue exists."""
    if not database.snapshot.queues:
        return PoolFigures(shares={}, fragmentation=())
    cycle = Cycle(database.snapshot, pool_policy(), database.now)
    return PoolFigures(
        shares=queue_shares(cycle.quota),
        fragmentation=flavor_fragmentation(cycle.cluster, cycle.placer.distributions),
    )


def pool_figures() -> PoolView[PoolFigures]:
    """Queue shares and fragmentation as of the last finished cycle (computed once per cycle;
    ``SnapshotError`` when the pool cannot be planned)."""
    return pool_figure("figures", _figures)


# ----------------------------------------------------------------------------- history

# How many points a history over time keeps at most (one cycle per slice of the window).
HISTORY_POINTS = 120


def sampled_cycles(
    since: datetime, until: datetime, recording: str = "queues"
) -> list[SchedulingCycle]:
    """Succeeded cycles that ran in [``since``, ``until``] on the pool's clock (their
    ``cluster_at``: a simulated cluster's runs ahead of the wall clock of their start) and
    whose record has the ``recording`` part, oldest first, thinned to the last one of each
    minute (or hour, where the history in the window spans more than ``HISTORY_POINTS``
    minutes) of that clock, so that a chart over time reads a bounded number of rows whatever
    the cycles' pace. A pool younger than the window (its first hour of a day's chart) is
    sampled by the minute, so its chart shows what there is rather than one point."""
    window = SchedulingCycle.objects.filter(
        status=CycleStatus.SUCCEEDED,
        cluster_at__gte=since,
        cluster_at__lte=until,
        outcome__has_key=recording,
    )
    first = window.order_by("cluster_at").values_list("cluster_at", flat=True).first()
    if first is None:
        return []
    minutes = (until - max(since, first)).total_seconds() / 60
    slice_of = TruncMinute if minutes <= HISTORY_POINTS else TruncHour
    last_ids = (
        window.annotate(slice=slice_of("cluster_at", tzinfo=UTC))
        .values("slice")
        .annotate(last=Max("id"))
        .values_list("last", flat=True)
    )
    return list(
        SchedulingCycle.objects.filter(pk__in=list(last_ids))
        .only("id", "started_at", "cluster_at", "outcome")
        .order_by("started_at", "id")
    )


def allocated_by_queue(cycle: SchedulingCycle) -> dict[str, dict[str, float]]:
    """Per queue and flavor, the GPUs the cycle left allocated (its record's gauges, as the
    core's quota tree counted them: ``metrics.queue_gauges``)."""
    queues = (cycle.outcome or {}).get("queues", {})
    return {
        queue: {flavor: float(gauges.get("allocated", 0)) for flavor, gauges in flavors.items()}
        for queue, flavors in queues.items()
    }


def fragmentation_of(cycle: SchedulingCycle) -> dict[str, dict[str, float]]:
    """Per flavor, the free and fragmented GPUs and the largest gang in one domain the cycle
    sampled (``inventory.queries.fragmentation_sample``; not every cycle samples)."""
    return dict((cycle.outcome or {}).get("fragmentation", {}))


@dataclass(frozen=True, slots=True)
class RefusedPods:
    """Waiting pods gpupool will not schedule, as a cycle recorded them."""

    count: int  # every such workload the viewer may see (beyond those listed, for an admin)
    workloads: list[dict[str, object]]  # {"workload": "ns/name", "pods": n, "why": sentence}


def refused_pods(namespaces: frozenset[str] | None) -> RefusedPods:
    """The workloads whose pods gpupool will not schedule, and why, as the last succeeded
    cycle recorded them (``ControlLoop._refused_pods``, ``outcome["refused_pods"]``): every
    one (``namespaces`` None, an admin's view) or those in ``namespaces`` (a team's). Such
    pods are no workload of the database, so only this and their Events say why they wait."""
    outcome = (
        SchedulingCycle.objects.filter(status=CycleStatus.SUCCEEDED)
        .order_by("-started_at", "-id")
        .values_list("outcome", flat=True)
        .first()
    )
    recorded = (outcome or {}).get("refused_pods") or {}
    listed = list(recorded.get("workloads", ()))
    if namespaces is None:
        return RefusedPods(int(recorded.get("count", len(listed))), listed)
    mine = [w for w in listed if str(w["workload"]).partition("/")[0] in namespaces]
    return RefusedPods(len(mine), mine)
