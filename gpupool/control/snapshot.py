"""The database as the decision core sees it: one builder of complete snapshots.

``build_snapshot(now=..., policy=...)`` reads the pool's policy and state in a fixed number of
queries, whatever the pool's size, and returns the core's ``Snapshot`` with the index the
control loop needs to turn the core's names back into rows. It is meant to be the one reader
of the database for the core: ``gpupool snapshot`` and the control loop use it, and the
what-if reads its pool (``build_pool``) and recorded pod sets (``pod_set_infos``) through it.

The reads see one state of the database: on PostgreSQL they run in a repeatable-read
transaction of their own (or in the caller's transaction). Elsewhere, the tables a workload
owns are read before the workloads, so that work released meanwhile only frees GPUs, and a
workload submitted meanwhile, whose pod sets were not there yet, waits for the next snapshot.

What the snapshot holds, and from where:

- **flavors** with sharing, GPU memory, price and, for MIG flavors, the card and profile;
- **nodes** with their GPUs one by one. A MIG node's GPUs count as instances: physical GPU
  ``g`` gives instances ``g * k .. g * k + k - 1`` for the ``k`` instances of the flavor's
  profile in the node's layout (``Node.devices_per_gpu``), so an unhealthy GPU takes its
  instances with it. A GPU index with no row counts as unhealthy;
- **queues** with every field, quotas in milli-GPU;
- **priority classes**, which must include a default (``SnapshotError`` otherwise);
- **workloads** that are pending, admitted or running. The core knows two states: pending,
  and running for both admitted (bound, not yet started: it holds its GPUs) and running.
  An admitted workload's start is its admission until its pods report running. Each is named
  ``namespace/name`` (``workloads.models.qualified_name``), since a name is unique only inside
  its namespace. Pod sets are in the order they were submitted (by id): a core pod-set index
  is a position in that order. Placements are ordered by pod set, then pod index, and must be
  a prefix of the workload's pods in that order, as the core places them. A checkpoint
  before the start or after ``now`` is stale (from an earlier run, or a clock ahead) and left
  out. ``evicting_for`` is kept while its preemptor is in the snapshot, ``nominated`` while
  the workload is pending. ``missing_pods`` is 0: which pods exist is the cluster's to say.
  A placed workload's ``idle_since`` is the sampler's (``Workload.idle_since``), kept only
  between its start and ``now``; ``leaving`` marks one being evicted with no preemptor (idle,
  a drain);
- **budgets** of the period that contains ``now`` (its date in ``TIME_ZONE``): granted
  GPU-hours, and as used the granted minus the ledger's balance, i.e. what was spent plus
  what open reservations hold (``docs/architecture.md``, "Budgets as a ledger"). Budgets of a
  tenant that owns no queue are left out: no workload can use them;
- **preemption history** of the ``contracts.history_horizon(policy)`` seconds up to ``now``,
  each event with its victim, its preemptor and the preemptor's tenant.

The rest is the database as it is when read: ``now`` is the cycle's time and picks the
budget period and the history window, nothing else. Times become POSIX seconds.
"""

from __future__ import annotations

import dataclasses
import json
import operator
from collections import defaultdict
from collections.abc import Collection, Iterable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from django.core.exceptions import EmptyResultSet
from django.db import connection, transaction
from django.db.models import BigIntegerField, F, FloatField, Func, IntegerField, Q
from django.db.models.expressions import RawSQL
from django.db.models.functions import Cast, Coalesce, Round
from django.utils import timezone

from gpupool.accounting.models import PreemptionEvent
from gpupool.inventory.choices import Sharing
from gpupool.inventory.models import Flavor, Gpu, Node
from gpupool.quotas.models import PriorityBudget, PriorityClass, Queue, QueueQuota, covering
from gpupool.scheduler.contracts import history_horizon
from gpupool.scheduler.types import (
    MIB_PER_GB,
    MILLI,
    BudgetInfo,
    FlavorInfo,
    MigInfo,
    NodeInfo,
    PodPlacement,
    PodSetInfo,
    PolicyInfo,
    PreemptionEventInfo,
    PriorityClassInfo,
    QueueInfo,
    QuotaInfo,
    Snapshot,
    Topology,
    WorkloadInfo,
)
from gpupool.workloads.choices import LIVE_STATES, PLACED_STATES, WorkloadState
from gpupool.workloads.models import (
    Placement,
    PodSet,
    PodSetFlavorChoice,
    Workload,
    qualified_name,
)

# The workloads a cycle decides on: waiting ones, and those holding GPUs.


def id_list(ids: Collection[int]) -> Any:
    """Row ids for an ``__in`` filter. On PostgreSQL one array parameter
    (``IN (SELECT unnest(%s::bigint[]))``): Django prepares a list's every value on its own,
    about 0.4 ms per thousand ids, and the statement's text grows with them."""
    if connection.vendor == "postgresql":
        return RawSQL("SELECT unnest(%s::bigint[])", (int_array(ids),))
    return list(ids)


def int_array(ids: Iterable[int]) -> str:
    """Integers as one PostgreSQL array literal (``{1,2,3}``) for a ``%s::bigint[]``
    parameter: the driver quotes one string, where a list is adapted element by element in
    Python (Django's client-side binding: a few hundred microseconds per thousand ids)."""
    return "{" + ",".join(map(str, map(int, ids))) + "}"


def name_list(names: Collection[str]) -> Any:
    """Names for an ``__in`` filter: one text array parameter on PostgreSQL (as ``id_list``)."""
    if connection.vendor == "postgresql":
        return RawSQL("SELECT unnest(%s::text[])", (list(names),))
    return list(names)


def plain_rows(rows: Any) -> Iterable[tuple[Any, ...]]:
    """A ``values_list`` query's rows as the database driver decodes them. On PostgreSQL its
    SQL runs on a cursor of its own: Django's per-row converters (a ``float()`` per
    annotated column, a ``json.loads`` per JSON value) are skipped -- a JSON column comes
    as its text (for the caller to decode, once per distinct text), an annotation as
    PostgreSQL computed it. The first read of B1's pool spent a third of its time in them
    (65,000 rows). Elsewhere the query as it is, its values converted."""
    if connection.vendor != "postgresql":
        return rows  # type: ignore[no-any-return]
    try:
        sql, params = rows.query.sql_with_params()
    except EmptyResultSet:  # a filter that selects nothing (``pk__in=[]``): no query to run
        return []
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()  # type: ignore[no-any-return]


def json_of(value: Any) -> Any:
    """A JSON column's value from ``plain_rows``: its text decoded (PostgreSQL), or as Django
    decoded it (elsewhere). Only for columns that never hold a JSON string."""
    return json.loads(value) if isinstance(value, str) else value


class SnapshotError(Exception):
    """The database cannot be turned into a snapshot; the message says what to fix."""


@dataclass(frozen=True, slots=True)
class DatabaseSnapshot:
    """A snapshot of the database, and the rows that its names stand for."""

    snapshot: Snapshot
    now: float
    workload_ids: Mapping[str, int]  # core name (namespace/name) -> Workload id
    pod_set_ids: Mapping[str, tuple[int, ...]]  # core name -> PodSet ids, by pod-set index
    node_ids: Mapping[str, int]
    flavor_ids: Mapping[str, int]
    queue_ids: Mapping[str, int]
    by_name: Mapping[str, WorkloadInfo]  # the snapshot's workloads by name

    def pod_set_id(self, workload: str, pod_set_index: int) -> int:
        """The PodSet row of a workload's pod set, by its index in the core's pod sets."""
        return self.pod_set_ids[workload][pod_set_index]


@dataclass(frozen=True, slots=True)
class Pool:
    """The pool without its work: flavors, nodes, queues and classes (what a what-if replays
    recorded demand on)."""

    flavors: tuple[FlavorInfo, ...]
    nodes: tuple[NodeInfo, ...]
    queues: tuple[QueueInfo, ...]
    priority_classes: tuple[PriorityClassInfo, ...]


def build_pool() -> Pool:
    """The pool's flavors, nodes, queues and priority classes as the core sees them."""
    with one_state_of_the_database():
        flavors, _, flavor_rows = _flavors()
        nodes, _ = _nodes(flavor_rows)
        queues, _ = _queues()
        return Pool(flavors, nodes, queues, _priority_classes())


def build_snapshot(*, now: datetime, policy: PolicyInfo) -> DatabaseSnapshot:
    """The pool as the core sees it at ``now``, read in a fixed number of queries."""
    with one_state_of_the_database():
        flavors, flavor_ids, flavor_rows = _flavors()
        nodes, node_ids = _nodes(flavor_rows)
        queues, queue_ids = _queues()
        rows = read_workloads(now)
        names = {row.id: name for name, row in rows.items()}
        moment = now.timestamp()
        workloads = tuple(rows[name].resolve(names, moment) for name in sorted(rows))
        workload_ids = {name: row.id for name, row in rows.items()}
        pod_set_ids = {name: row.pod_set_ids for name, row in rows.items()}
        snapshot = Snapshot(
            flavors=flavors,
            nodes=nodes,
            queues=queues,
            priority_classes=_priority_classes(),
            workloads=workloads,
            budgets=read_budgets(now, {q.tenant for q in queues if q.tenant is not None}),
            preemption_history=read_history(now, history_horizon(policy)),
        )
    return DatabaseSnapshot(
        snapshot=snapshot,
        now=now.timestamp(),
        workload_ids=workload_ids,
        pod_set_ids=pod_set_ids,
        node_ids=node_ids,
        flavor_ids=flavor_ids,
        queue_ids=queue_ids,
        by_name={w.name: w for w in workloads},
    )


@contextmanager
def one_state_of_the_database() -> Iterator[None]:
    """Outside a transaction, one for the reads, so that they see one state of the database:
    on PostgreSQL read-only and repeatable-read; on SQLite (WAL) a deferred read transaction,
    which sees the database as of its first read. Inside one, the caller's.

    SQLite's transactions begin ``IMMEDIATE`` here (the settings: a writer takes the write
    lock at once instead of failing to upgrade later), which for reads took the write lock
    too: a page building its snapshot held up the loop's record, and waited behind it. Its
    reads begin ``DEFERRED``, taking no lock a writer waits for."""
    if connection.in_atomic_block:
        yield
        return
    if connection.vendor != "sqlite":
        with transaction.atomic():
            with connection.cursor() as cursor:
                cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            yield
        return
    connection.ensure_connection()  # (connecting sets the mode from the settings again)
    sqlite: Any = connection  # Django's SQLite wrapper: ``transaction_mode`` is its own
    writers_mode = sqlite.transaction_mode
    with ExitStack() as reading:
        sqlite.transaction_mode = "DEFERRED"
        try:
            reading.enter_context(transaction.atomic())  # BEGIN DEFERRED
        finally:
            sqlite.transaction_mode = writers_mode
        yield


def _milli(gpus: Decimal) -> int:
    """GPUs as the database stores them (decimal) in milli-GPU."""
    return round(gpus * MILLI)


def _seconds(moment: datetime | None) -> float | None:
    return None if moment is None else moment.timestamp()


class _Epoch(Func):
    """A timestamp as POSIX seconds, a float8 computed by PostgreSQL: exactly the float
    ``datetime.timestamp()`` gives (both divide the microseconds since the epoch by a
    million, correctly rounded), without decoding a ``datetime`` per value. ``date_part``
    computes it in float8; ``EXTRACT`` (numeric since PostgreSQL 14) then a cast to float8
    gave the same values at three times the server's time (the first read's five times of
    30,000 workloads: 45 against 15 ms)."""

    template = "date_part('epoch', %(expressions)s)"
    output_field = FloatField()


def posix_seconds(expression: Any) -> Any:
    """A timestamp column or expression to read as POSIX seconds: computed by PostgreSQL;
    elsewhere read as a ``datetime`` (``_posix`` turns either into seconds)."""
    return _Epoch(expression) if connection.vendor == "postgresql" else expression


def _posix(value: float | datetime) -> float:
    """A value read through ``posix_seconds`` as POSIX seconds."""
    return value if isinstance(value, float) else value.timestamp()


def _opt_posix(value: float | datetime | None) -> float | None:
    return None if value is None else _posix(value)


def _opt_float(value: int | None) -> float | None:
    return None if value is None else float(value)


def _flavors() -> tuple[tuple[FlavorInfo, ...], dict[str, int], dict[int, Flavor]]:
    """Every flavor; MIG flavors are exclusive per instance and carry their card and profile."""
    flavors: list[FlavorInfo] = []
    ids: dict[str, int] = {}
    rows: dict[int, Flavor] = {}
    for flavor in Flavor.objects.order_by("name"):
        rows[flavor.pk] = flavor
        mig = (
            MigInfo(flavor.gpu_model, flavor.mig_profile) if flavor.sharing == Sharing.MIG else None
        )
        flavors.append(
            FlavorInfo(
                name=flavor.name,
                sharing="shared" if flavor.sharing == Sharing.SHARED else "exclusive",
                gpu_memory_gb=float(flavor.gpu_memory_gb),
                hourly_price=float(flavor.hourly_price),
                mig=mig,
            )
        )
        ids[flavor.name] = flavor.pk
    return tuple(flavors), ids, rows


def _nodes(flavors: Mapping[int, Flavor]) -> tuple[tuple[NodeInfo, ...], dict[str, int]]:
    """Every node, its GPUs (MIG: instances) and their health."""
    nodes, ids = read_nodes(flavors)
    return tuple(nodes), ids


# The reason a GPU the device plugin reports unhealthy is marked with (``sync``'s).
CLUSTER_UNHEALTHY = "not allocatable in the cluster (the device plugin reports it unhealthy)"


def read_nodes(
    flavors: Mapping[int, Flavor],
    only: Collection[int] | None = None,
    *,
    inventory: dict[str, dict[str, object]] | None = None,
) -> tuple[list[NodeInfo], dict[str, int]]:
    """The nodes (all, or those with the ids in ``only``) in name order, and their ids.

    A node takes no new pods (``cordoned`` in the core) when an admin cordoned it (a drain
    cordons it too, and ends when it is uncordoned), or when the cluster excludes it (not Ready,
    cordoned there, gone: ``cluster_exclusion``).

    ``inventory``, when given, also gets each node as the sync compares it with the cluster
    (``ControlLoop._known_nodes``' dicts, by name), from the same two queries: the first sync
    reads every node once, not twice.
    """
    nodes_of = Node.objects.all() if only is None else Node.objects.filter(pk__in=list(only))
    gpus_of = Gpu.objects.all() if only is None else Gpu.objects.filter(node_id__in=list(only))
    health: dict[int, dict[int, bool]] = defaultdict(dict)
    marked: dict[int, int] = {}  # GPUs the cluster reports unhealthy, per node (``inventory``)
    if inventory is None:
        for node_id, index, healthy in plain_rows(
            gpus_of.values_list("node_id", "index", "healthy").order_by()
        ):
            health[node_id][index] = healthy
    else:
        for node_id, index, healthy, reason in plain_rows(
            gpus_of.values_list("node_id", "index", "healthy", "unhealthy_reason").order_by()
        ):
            health[node_id][index] = healthy
            if not healthy and reason == CLUSTER_UNHEALTHY:
                marked[node_id] = marked.get(node_id, 0) + 1
    devices: dict[tuple[int, str], int] = {}
    layouts: dict[str, dict[str, Any]] = {}  # decoded MIG layouts, by their JSON text
    nodes: list[NodeInfo] = []
    ids: dict[str, int] = {}
    fields = [
        "id",
        "name",
        "flavor_id",
        "cpu",
        "memory_gb",
        "nvlink_domain",
        "cordoned",
        "mig_layout",
        "cluster_exclusion",
    ]
    if inventory is not None:
        fields += ["zone", "labels", "gone_at"]
    rows = nodes_of.values_list(*fields).order_by("name")
    # JSON as text on PostgreSQL (``plain_rows``): jsonb's text is canonical, so equal
    # layouts give one text; elsewhere decoded, and keyed by its sorted dump.
    for row in plain_rows(rows):
        node_id, name, flavor_id, cpu, memory_gb, domain, cordoned, layout = row[:8]
        exclusion = row[8]
        cordoned = cordoned or bool(exclusion)
        flavor = flavors[flavor_id]
        # Node.devices_per_gpu() is the rule; nodes of one flavor and layout share its answer.
        text = layout if isinstance(layout, str) else json.dumps(layout, sort_keys=True)
        key = (flavor_id, text)
        if key not in devices:
            devices[key] = Node(flavor=flavor, mig_layout=json_of(layout)).devices_per_gpu()
        per_gpu = devices[key]
        gpus = health.get(node_id, {})
        physical = max(gpus) + 1 if gpus else 0
        unhealthy = frozenset(
            index * per_gpu + instance
            for index in range(physical)
            if not gpus.get(index, False)
            for instance in range(per_gpu)
        )
        nodes.append(
            NodeInfo(
                name=name,
                flavor=flavor.name,
                gpus=physical * per_gpu,
                cpu_milli=cpu * MILLI,
                memory_mib=memory_gb * MIB_PER_GB,
                domain=domain or name,
                unhealthy_gpus=unhealthy,
                cordoned=cordoned,
                physical_gpus=physical if flavor.sharing == Sharing.MIG else None,
            )
        )
        ids[name] = node_id
        if inventory is not None:
            zone, labels, gone_at = row[9:]
            inventory[name] = {
                "flavor_id": flavor_id,
                "gpus": len(gpus),
                "unhealthy_in_cluster": marked.get(node_id, 0),
                "cpu": cpu,
                "memory_gb": memory_gb,
                "nvlink_domain": domain,
                "zone": zone,
                "labels": dict(json_of(labels) or {}),
                "mig_layout": own_layout(layouts, layout),
                "exclusion": exclusion,
                "gone": gone_at is not None,
            }
    nodes.sort(key=lambda node: node.name)  # Python's order, whatever the database's collation
    return nodes, ids


def own_layout(decoded: dict[str, dict[str, Any]], value: Any) -> dict[str, Any]:
    """A node's MIG layout from ``plain_rows`` as a dict of its own: JSON text decoded once
    per distinct text (most nodes share one of a few), or as Django decoded it (elsewhere)."""
    if not isinstance(value, str):
        return dict(value or {})
    found = decoded.get(value)
    if found is None:
        found = decoded[value] = json.loads(value) or {}
    return dict(found)


def _queues() -> tuple[tuple[QueueInfo, ...], dict[str, int]]:
    """The queue tree with every field; quotas in milli-GPU."""
    quotas: dict[int, dict[str, QuotaInfo]] = defaultdict(dict)
    for queue_id, flavor, guarantee, deserved, capability in QueueQuota.objects.values_list(
        "queue_id", "flavor__name", "guarantee", "deserved", "capability"
    ).order_by("queue_id", "flavor__name"):
        quotas[queue_id][flavor] = QuotaInfo(
            _milli(guarantee), _milli(deserved), _milli(capability)
        )
    queues: list[QueueInfo] = []
    ids: dict[str, int] = {}
    rows = Queue.objects.values_list(
        "id",
        "name",
        "parent__name",
        "tenant__name",
        "weight",
        "reclaimable",
        "lending_limit",
        "max_protected_runtime_s",
        "default_protected_runtime_s",
        "idle_alert_after_s",
        "idle_reclaim_after_s",
    ).order_by("name")
    for (
        queue_id,
        name,
        parent,
        tenant,
        weight,
        reclaimable,
        lending_limit,
        max_protected,
        default_protected,
        idle_alert,
        idle_reclaim,
    ) in rows:
        queues.append(
            QueueInfo(
                name=name,
                parent=parent,
                tenant=tenant,
                weight=float(weight),
                reclaimable=reclaimable,
                lending_limit=None if lending_limit is None else _milli(lending_limit),
                max_protected_runtime_s=None if max_protected is None else float(max_protected),
                default_protected_runtime_s=float(default_protected),
                quota=quotas.get(queue_id, {}),
                idle_alert_after_s=_opt_float(idle_alert),
                idle_reclaim_after_s=_opt_float(idle_reclaim),
            )
        )
        ids[name] = queue_id
    return tuple(queues), ids


def _priority_classes() -> tuple[PriorityClassInfo, ...]:
    """The priority classes; one must be the default."""
    classes = tuple(
        PriorityClassInfo(
            name=name,
            value=value,
            default=default,
            preemption_policy="Never" if policy == "Never" else "PreemptLowerPriority",
            budget_rate=float(rate),
            idle_alert_after_s=_opt_float(idle_alert),
            idle_reclaim_after_s=_opt_float(idle_reclaim),
        )
        for name, value, default, policy, rate, idle_alert, idle_reclaim in (
            PriorityClass.objects.values_list(
                "name",
                "value",
                "default",
                "preemption_policy",
                "budget_rate",
                "idle_alert_after_s",
                "idle_reclaim_after_s",
            ).order_by("name")
        )
    )
    if not any(c.default for c in classes):
        raise SnapshotError(
            "no default priority class: mark one priority class as the default (admin, "
            "Priority classes); workloads that name no class run at it"
        )
    return classes


def pod_set_infos(of: Q | None = None) -> dict[int, list[tuple[int, PodSetInfo]]]:
    """Pod sets by workload id, in submission order, with their ids: of the live workloads,
    or of the workloads ``of`` selects (a filter on ``Workload``)."""
    workloads = Q(state__in=LIVE_STATES) if of is None else of
    choices: dict[int, list[str]] = defaultdict(list)
    for pod_set_id, flavor in plain_rows(
        PodSetFlavorChoice.objects.filter(
            pod_set__workload__in=Workload.objects.filter(workloads).values("pk")
        )
        .values_list("pod_set_id", "flavor__name")
        .order_by("pod_set_id", "rank")
    ):
        choices[pod_set_id].append(flavor)
    shapes: dict[tuple[object, ...], PodSetInfo] = {}  # identical pod sets share one object
    pod_sets: dict[int, list[tuple[int, PodSetInfo]]] = defaultdict(list)
    rows = PodSet.objects.filter(workload__in=Workload.objects.filter(workloads).values("pk"))
    milli = connection.vendor == "postgresql"  # CPU and memory as the core counts them
    if milli:
        rows = rows.annotate(cpu_milli=_CPU_MILLI, memory_mib=_MEMORY_MIB)
    resources = ("cpu_milli", "memory_mib") if milli else ("cpu", "memory_gb")
    for pod_set_id, workload_id, count, gpus, gpu_milli, flavor, cpu, memory in plain_rows(
        rows.values_list(
            "id", "workload_id", "count", "gpus", "gpu_milli", "flavor__name", *resources
        ).order_by()  # by id below: an ORDER BY here doubled the server's time at B1's size
    ):
        # PodSet.flavor_names(): the first flavor, then the further choices by rank.
        flavors = () if flavor is None else (flavor, *choices.get(pod_set_id, ()))
        shape = (count, gpus, gpu_milli, flavors, cpu, memory)
        info = shapes.get(shape)
        if info is None:
            info = shapes[shape] = pod_set_info(
                count, gpus, gpu_milli, flavors, cpu, memory, milli=milli
            )
        pod_sets[workload_id].append((pod_set_id, info))
    for sets in pod_sets.values():
        if len(sets) > 1:
            sets.sort()  # in submission order: by id (ids are unique)
    return pod_sets


# A pod set's CPU in milli-CPU and memory in MiB, computed by PostgreSQL as ``pod_set_info``
# computes them (``test_pod_set_resources_computed_by_the_database_equal_pod_set_info_s``):
# CPU has three decimals, so its milli-CPU is whole; memory's three decimals times 1024 are
# never half-way between two integers (1024 k / 1000 = 128 k / 125), so PostgreSQL's rounding
# (half away from zero) and Python's (half to even) agree. Two ``Decimal``s decoded and
# hashed per row were about a third of the pod sets' read at B1's size.
_CPU_MILLI = Cast(Round(F("cpu") * MILLI), IntegerField())
_MEMORY_MIB = Cast(Round(F("memory_gb") * MIB_PER_GB), BigIntegerField())


def pod_set_info(
    count: int,
    gpus: int,
    gpu_milli: int | None,
    flavors: tuple[str, ...],
    cpu: Decimal | int,
    memory_gb: Decimal | int,
    *,
    milli: bool = False,
) -> PodSetInfo:
    """A pod set as the core sees it, from a PodSet's fields (``flavors``: its first flavor,
    then its further choices by rank; CPU in milli-CPU, memory in MiB). ``milli``: CPU and
    memory given converted already (``pod_set_infos`` on PostgreSQL: ``_CPU_MILLI``)."""
    return PodSetInfo(
        count=count,
        gpus=gpus,
        flavors=flavors,
        cpu_milli=int(cpu) if milli else round(cpu * MILLI),
        memory_mib=int(memory_gb) if milli else round(memory_gb * MIB_PER_GB),
        gpu_milli=MILLI if gpu_milli is None else gpu_milli,
    )


_CORE_TOPOLOGY: dict[str, Topology] = {"domain": "domain", "preferred": "preferred"}


def core_topology(topology: str) -> Topology | None:
    """A Workload's topology requirement as the core names it (None: no requirement)."""
    return _CORE_TOPOLOGY.get(topology)


def _placements(
    only: Collection[int] | None = None,
) -> dict[int, list[tuple[int, int, PodPlacement]]]:
    """The placed workloads' pods, by workload id: (pod set id, pod index, placement)."""
    placements: dict[int, list[tuple[int, int, PodPlacement]]] = defaultdict(list)
    rows = Placement.objects.filter(workload__state__in=sorted(PLACED_STATES))
    if only is not None:
        rows = rows.filter(workload_id__in=id_list(only))
    gpus_of: dict[str, tuple[int, ...]] = {}  # JSON text: most pods hold one of a few lists
    for workload_id, pod_set_id, pod_index, node, gpu_indices, milli in plain_rows(
        rows.values_list(
            "workload_id", "pod_set_id", "pod_index", "node__name", "gpu_indices", "milli"
        ).order_by()
    ):
        if isinstance(gpu_indices, str):
            gpus = gpus_of.get(gpu_indices)
            if gpus is None:
                gpus = gpus_of[gpu_indices] = tuple(json.loads(gpu_indices))
        else:
            gpus = tuple(gpu_indices)
        placements[workload_id].append((pod_set_id, pod_index, PodPlacement(node, gpus, milli)))
    return placements


# ``read_workloads`` builds each row's ``WorkloadInfo`` by position (30,000 a first read at B1's
# size; keywords cost twice as much in the compiled core): the fields in the order it passes
# them, held to the core's by test_snapshot.py (the test of its order).
WORKLOAD_INFO_ORDER = (
    "name",
    "queue",
    "priority_class",
    "pod_sets",
    "submitted_at",
    "state",
    "min_member",
    "topology",
    "protected_runtime_s",
    "expected_runtime_s",
    "started_at",
    "last_checkpoint_at",
    "placement",
    "missing_pods",
    "nominated",
    "evicting_for",
    "backfilled_for",
    "idle_since",
    "leaving",
    "window_reserved",
    "eviction_refused_until",
)


_INFO_VALUES = operator.attrgetter(*WORKLOAD_INFO_ORDER)
_INFO_POSITION = {name: position for position, name in enumerate(WORKLOAD_INFO_ORDER)}


def info_with(info: WorkloadInfo, **changes: Any) -> WorkloadInfo:
    """``info`` with some fields changed, built by position: ``dataclasses.replace`` on the
    compiled core's class (its fields looked up and passed by keyword) took three times as
    long, and the first cycle's record changes 5,000 of them at B1's size."""
    values = list(_INFO_VALUES(info))
    for name, value in changes.items():
        values[_INFO_POSITION[name]] = value
    return WorkloadInfo(*values)


@dataclass(frozen=True, slots=True)
class WorkloadRow:
    """A live workload as read from the database: its core info, and the two things resolved
    per cycle -- ``evicting_for`` (a row id until its preemptor's name is known) and the
    checkpoint (kept only between the start and the cycle's time)."""

    id: int
    info: WorkloadInfo  # evicting_for None; last_checkpoint_at as stored
    pod_set_ids: tuple[int, ...]
    evicting_for_id: int | None = None
    state: str = WorkloadState.PENDING  # the database's: admitted and running are both placed
    origin: str = ""
    eviction_reason: str = ""
    idle_alerted_since: float | None = None  # the idle spell last alerted about

    def resolve(self, names: Mapping[int, str], now: float) -> WorkloadInfo:
        """The core's workload at ``now``: its preemptor named while it is in the snapshot, a
        checkpoint outside [start, now] left out (from an earlier run, or a clock ahead)."""
        info = self.info
        if self.evicting_for_id is None and info.last_checkpoint_at is None:
            return info
        checkpoint = info.last_checkpoint_at
        if checkpoint is not None and not (info.started_at or 0.0) <= checkpoint <= now:
            checkpoint = None
        evicting_for = None if self.evicting_for_id is None else names.get(self.evicting_for_id)
        return dataclasses.replace(info, last_checkpoint_at=checkpoint, evicting_for=evicting_for)


_ROW_NEW = object.__new__
(
    _SET_ID,
    _SET_INFO,
    _SET_POD_SET_IDS,
    _SET_EVICTING_FOR_ID,
    _SET_STATE,
    _SET_ORIGIN,
    _SET_EVICTION_REASON,
    _SET_IDLE_ALERTED_SINCE,
) = (getattr(WorkloadRow, name).__set__ for name in WorkloadRow.__slots__)


def workload_row(
    id: int,
    info: WorkloadInfo,
    pod_set_ids: tuple[int, ...],
    evicting_for_id: int | None,
    state: str,
    origin: str,
    eviction_reason: str,
    idle_alerted_since: float | None,
) -> WorkloadRow:
    """``WorkloadRow(...)`` with every field given, built through the slots' own setters: a
    frozen dataclass's ``__init__`` sets each field with an ``object.__setattr__`` call, 1.5
    against 0.9 us here, and the first read builds 30,000 (held equal to the constructor by
    ``test_snapshot.py::test_workload_row_builds_what_the_constructor_builds``)."""
    row = _ROW_NEW(WorkloadRow)
    _SET_ID(row, id)
    _SET_INFO(row, info)
    _SET_POD_SET_IDS(row, pod_set_ids)
    _SET_EVICTING_FOR_ID(row, evicting_for_id)
    _SET_STATE(row, state)
    _SET_ORIGIN(row, origin)
    _SET_EVICTION_REASON(row, eviction_reason)
    _SET_IDLE_ALERTED_SINCE(row, idle_alerted_since)
    return row


def read_workloads(now: datetime, only: Collection[int] | None = None) -> dict[str, WorkloadRow]:
    """Pending, admitted and running workloads (all, or those with the ids in ``only``) with
    their pod sets and placements, by core name."""
    live = Q(state__in=LIVE_STATES)
    selected = live if only is None else live & Q(pk__in=id_list(only))
    pod_sets = pod_set_infos(selected)
    placements = _placements(only)
    rows = (
        Workload.objects.filter(selected)
        .annotate(
            submitted_s=posix_seconds(F("submitted_at")),
            start_s=posix_seconds(Coalesce("started_at", "admitted_at")),
            checkpoint_s=posix_seconds(F("last_checkpoint_at")),
            idle_since_s=posix_seconds(F("idle_since")),
            idle_alerted_s=posix_seconds(F("idle_alerted_since")),
        )
        .values_list(
            "id",
            "namespace",
            "name",
            "queue__name",
            "priority_class__name",
            "state",
            "min_member",
            "topology",
            "protected_runtime_s",
            "expected_runtime_s",
            "submitted_s",
            "start_s",
            "checkpoint_s",
            "nominated",
            "evicting_for_id",
            "origin",
            "eviction_reason",
            "idle_since_s",
            "idle_alerted_s",
        )
        .order_by()
    )
    now_s = now.timestamp()
    found: dict[str, WorkloadRow] = {}
    new_row = workload_row
    pending, topologies = WorkloadState.PENDING, _CORE_TOPOLOGY
    # By name (errors name the first), the times as seconds (PostgreSQL's ``posix_seconds``;
    # elsewhere converted here). Sorted here: in PostgreSQL an ORDER BY in Python's order (the
    # "C" collation) took the server 45 ms more at B1's size, the sort here 20 ms.
    if connection.vendor == "postgresql":
        plain: Iterable[tuple[Any, ...]] = plain_rows(rows)
    else:
        plain = map(_in_seconds, rows)
    for row in sorted(plain, key=_by_name):
        (
            workload_id,
            namespace,
            short_name,
            queue,
            priority_class,
            state,
            min_member,
            topology,
            protected,
            expected,
            submitted_at,
            start,
            checkpoint_at,
            nominated,
            evicting_for,
            origin,
            eviction_reason,
            idle_since_at,
            idle_alerted_at,
        ) = row
        name = f"{namespace}/{short_name}"  # qualified_name, inlined
        sets = pod_sets.get(workload_id)
        if not sets:
            continue  # submitted after its pod sets were read: the next snapshot has it
        if len(sets) == 1:  # most: one pod set
            set_ids, set_infos = (sets[0][0],), (sets[0][1],)
        else:
            set_ids, set_infos = zip(*sets, strict=True)
        started: float | None = None
        checkpoint: float | None = None
        placement: tuple[PodPlacement, ...] = ()
        idle_since: float | None = None
        placed = state != pending
        if placed:
            if start is None:
                raise SnapshotError(f"workload {name} is {state} but has no admission time")
            started = start
            if started > now_s:
                raise SnapshotError(
                    f"workload {name} started at "
                    f"{datetime.fromtimestamp(started, UTC).isoformat()}, after the snapshot's "
                    f"time {now.isoformat()}"
                )
            checkpoint = checkpoint_at
            placement = _placement(name, sets, placements.get(workload_id, []))
            idle_since = idle_since_at
            if idle_since is not None and not started <= idle_since <= now_s:
                idle_since = None  # from an earlier run, or a clock ahead
        info = WorkloadInfo(  # by position: half the cost of keywords (``WORKLOAD_INFO_ORDER``)
            name,
            queue,
            priority_class,
            set_infos,
            submitted_at,
            "running" if placed else "pending",
            min_member,
            topologies.get(topology),
            float(protected),
            None if expected is None else float(expected),
            started,
            checkpoint,
            placement,
            0,  # missing_pods: the cluster's to say
            bool(nominated) and not placed,
            None,  # evicting_for: resolved per cycle (``WorkloadRow.resolve``)
            None,  # backfilled_for: the core's
            idle_since,
            placed and bool(eviction_reason) and evicting_for is None,
        )
        found[name] = new_row(
            workload_id,
            info,
            set_ids,
            evicting_for if placed else None,
            state,
            origin,
            eviction_reason,
            idle_alerted_at,
        )
    return found


def _by_name(row: tuple[Any, ...]) -> str:
    """A ``read_workloads`` row's sort key: by namespace, then name, as one string. A
    namespace holds no NUL (PostgreSQL's text cannot; it is a DNS label), the lowest code
    point, so this orders as the pair does (a namespace before those it is a prefix of), and
    a sort compares strings three times as fast as pairs (30,000 rows: 9 against 25 ms)."""
    return f"{row[1]}\0{row[2]}"


_TIMES = (10, 11, 12, 17, 18)  # the columns of ``read_workloads``' rows read as seconds


def _in_seconds(row: tuple[Any, ...]) -> tuple[Any, ...]:
    """A row of ``read_workloads`` with its times as seconds where they came as datetimes."""
    values = list(row)
    for column in _TIMES:
        values[column] = _opt_posix(values[column])
    return tuple(values)


def _placement(
    name: str,
    sets: list[tuple[int, PodSetInfo]],
    pods: list[tuple[int, int, PodPlacement]],
) -> tuple[PodPlacement, ...]:
    """A placed workload's pods in pod-set order, then pod index: a prefix of its pods."""
    if not pods:
        raise SnapshotError(f"workload {name} holds GPUs but has no placement")
    if len(pods) == 1 and len(sets) == 1:  # most: one pod, the first of its only pod set
        pod_set_id, pod_index, pod = pods[0]
        if pod_set_id == sets[0][0] and pod_index == 0 and sets[0][1].count > 0:
            return (pod,)
    if len(sets) > 1:
        order = {pod_set_id: position for position, (pod_set_id, _) in enumerate(sets)}
        pods = sorted(pods, key=lambda pod: (order.get(pod[0], len(order)), pod[1]))
    elif len(pods) > 1:
        pods = sorted(pods, key=lambda pod: pod[1])
    wanted = ((pod_set_id, index) for pod_set_id, info in sets for index in range(info.count))
    for pod_set_id, index, _ in pods:
        if next(wanted, None) != (pod_set_id, index):
            raise SnapshotError(
                f"workload {name}: its placed pods are not the first {len(pods)} of its pods "
                f"(by pod set, then pod index), which is all the core can represent"
            )
    return tuple(pod for _, _, pod in pods)


def read_budgets(now: datetime, tenants: set[str]) -> tuple[BudgetInfo, ...]:
    """The budgets of the period containing ``now``, with what the ledger says is used (its
    balance as kept on each budget's row: no month of entries summed every cycle)."""
    today = timezone.localdate(now)
    totals: dict[tuple[str, str], tuple[Decimal, Decimal]] = {}
    rows = PriorityBudget.objects.filter(covering(today)).values_list(
        "tenant__name", "priority_class__name", "gpu_hours", "balance_gpu_hours"
    )
    for tenant, priority_class, granted, balance in rows:
        if tenant not in tenants:
            continue
        used = granted - (balance or Decimal(0))
        # Periods of one tenant and class do not overlap (PriorityBudget.clean); if two rows
        # still cover today, the tenant has both.
        before = totals.get((tenant, priority_class), (Decimal(0), Decimal(0)))
        totals[(tenant, priority_class)] = (before[0] + granted, before[1] + used)
    return tuple(
        BudgetInfo(tenant, priority_class, float(granted), float(used))
        for (tenant, priority_class), (granted, used) in sorted(totals.items())
    )


def read_history(now: datetime, horizon_s: float) -> tuple[PreemptionEventInfo, ...]:
    """Evictions in the ``horizon_s`` seconds up to ``now``, oldest first."""
    since = now - timedelta(seconds=horizon_s)
    rows = (
        PreemptionEvent.objects.filter(at__gte=since, at__lte=now)
        .values_list(
            "at",
            "victim__namespace",
            "victim__name",
            "preemptor__namespace",
            "preemptor__name",
            "preemptor_tenant__name",
        )
        .order_by("at", "id")
    )
    return tuple(
        PreemptionEventInfo(
            at=at.timestamp(),
            victim=qualified_name(victim_namespace, victim),
            preemptor=None if preemptor is None else qualified_name(preemptor_namespace, preemptor),
            preemptor_tenant=preemptor_tenant,
        )
        for at, victim_namespace, victim, preemptor_namespace, preemptor, preemptor_tenant in rows
    )
