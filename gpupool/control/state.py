"""The loop's memory of the database between cycles: the core's snapshot, kept up to date.

``build_snapshot`` reads the whole pool (about a second at B1's size). The loop reads it once
(``LoopState.refresh`` the first time) and afterwards only what changed since its last read:

- **workloads and nodes** whose ``updated_at`` is at or after the *horizon* of the last read,
  re-read through the same readers ``build_snapshot`` uses (``read_workloads``,
  ``read_nodes``), so a row means the same thing whichever way it was read. Rows that left the
  live states (finished, cancelled, preempted for good) are dropped.
- **flavors, queues, priority classes and budgets**: small tables, read whole -- flavors,
  queues and classes only when a digest of their tables' rows (``policy_fingerprint``)
  changed, budgets when the digest of the current period's rows did (a change of flavors
  re-reads every node, whose core form depends on them).
- **preemption history**: events with a larger id than the last one read (only the loop writes
  them, under its lock), trimmed to the contracts' horizon at each cycle.

On PostgreSQL a refresh first asks, in one statement, for the horizon, both digests and
whether any node, workload or event is newer than what it holds (``read_probe``), and reads
only those; elsewhere it reads them all.

The horizon makes "changed since" safe against transactions that commit after the read but
stamped their rows before it: on PostgreSQL it is the earlier of the database's clock and the
start of the oldest transaction still open (``pg_stat_activity``), less ``CLOCK_MARGIN_S`` for
clocks of other hosts; elsewhere (SQLite, whose writers are serialised) the clock less
``SQLITE_MARGIN_S``. Rows seen twice are simply read again: reading is idempotent.

**The loop's own writes are not read back.** The loop writes workload rows every cycle
(admissions, evictions, nominations, pod-driven transitions) and puts what it wrote into the
state as it writes it (``put``). The state remembers, per workload, the ``updated_at`` of the
version it holds (``held``: from its reads, and from the loop's writes); a refresh that finds
a row changed since the horizon but still at that stamp takes the state's row instead of
reading it again (it still counts as changed, so the rest of the cycle looks at it as
before). ``own_writes`` takes the stamps the actions report (the row's ``updated_at`` before,
read under a row lock, and the stamp written): when the version before was the one held (or
older than the horizon, so known to the last read), the written version is held. Any other
write gives the row another stamp, and it is read again. A property test
(tests/control/test_loop_own_writes.py) holds the rows the state would not read again equal
to ``read_workloads``' field for field, after every cycle of a loop on a random walk.
Some of its writes change nothing the sync or apply look at -- the utilisation read's idle
spells, thousands a read at B1's size: those versions are held *quiet* (``own_writes(...,
quiet=True)``) and a refresh does not count them as changed, unless the version before was
one the rest of a cycle has not looked at yet (written since the horizon, not quiet).

``snapshot(now)`` assembles the core's ``Snapshot`` from what is held; a property test
(tests/control/test_incremental_snapshot.py) shows that after any sequence of changes it
equals ``build_snapshot`` at the same moment.
"""

from __future__ import annotations

import dataclasses
from bisect import bisect_left
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import TYPE_CHECKING, Any

from django.db import connection
from django.db.models.expressions import RawSQL
from django.utils import timezone

from gpupool.accounting.models import PreemptionEvent
from gpupool.control.snapshot import (
    DatabaseSnapshot,
    WorkloadRow,
    _flavors,
    _priority_classes,
    _queues,
    one_state_of_the_database,
    read_budgets,
    read_nodes,
    read_workloads,
)
from gpupool.inventory.models import Flavor, Node
from gpupool.quotas.models import PriorityBudget, PriorityClass, Queue, QueueQuota
from gpupool.scheduler.contracts import history_horizon
from gpupool.scheduler.types import (
    BudgetInfo,
    FlavorInfo,
    NodeInfo,
    PolicyInfo,
    PreemptionEventInfo,
    PriorityClassInfo,
    QueueInfo,
    Snapshot,
    WorkloadInfo,
)
from gpupool.tenancy.models import Tenant, TenantNamespace
from gpupool.workloads.choices import LIVE_STATES, WorkloadState
from gpupool.workloads.models import Workload, qualified_name

if TYPE_CHECKING:
    from gpupool.control.actions import RegistrationPolicy

# The states a workload leaves the live ones by.
LEFT = frozenset(
    {
        WorkloadState.PREEMPTED,
        WorkloadState.SUCCEEDED,
        WorkloadState.FAILED,
        WorkloadState.CANCELLED,
    }
)
CLOCK_MARGIN_S = 2.0
SQLITE_MARGIN_S = 5.0


@dataclass(frozen=True, slots=True)
class Ended:
    """A workload that left the live states since the last read (its pods may need deleting)."""

    id: int
    name: str
    state: str


class WorkloadRows(dict[str, WorkloadRow]):
    """The state's live workloads by core name, noting every name set or removed since the
    snapshot was last assembled (``touched``), and keeping two indexes up to date as rows
    come and go: the names of placed workloads (``placed``: admitted or running in the
    database) and of workloads with no declared expected runtime (``unestimated``: the loop
    looks their runtime up in the history). Every way a ``dict`` changes goes through here, so
    a row replaced anywhere (``rows[name] = ...``) is seen."""

    __slots__ = ("placed", "touched", "unestimated")

    def __init__(self, rows: Mapping[str, WorkloadRow] | None = None) -> None:
        super().__init__()
        self.touched: set[str] = set()
        self.placed: set[str] = set()
        self.unestimated: set[str] = set()
        if rows:  # at once (the first read: 30,000 rows), as ``update`` would index them
            super().update(rows)
            self.touched.update(rows)
            pending = WorkloadState.PENDING
            self.placed.update(name for name, row in rows.items() if row.state != pending)
            self.unestimated.update(
                name for name, row in rows.items() if row.info.expected_runtime_s is None
            )

    def __reduce__(self) -> tuple[Any, ...]:  # copy and deepcopy: the rows, indexes rebuilt
        return (type(self), (dict(self),))

    def _index(self, name: str, row: WorkloadRow) -> None:
        self.touched.add(name)
        if row.state != WorkloadState.PENDING:
            self.placed.add(name)
        else:
            self.placed.discard(name)
        if row.info.expected_runtime_s is None:
            self.unestimated.add(name)
        else:
            self.unestimated.discard(name)

    def _unindex(self, name: str) -> None:
        self.touched.add(name)
        self.placed.discard(name)
        self.unestimated.discard(name)

    def __setitem__(self, name: str, row: WorkloadRow) -> None:
        super().__setitem__(name, row)
        self._index(name, row)

    def __delitem__(self, name: str) -> None:
        super().__delitem__(name)
        self._unindex(name)

    def pop(self, name: str, *default: Any) -> Any:
        """Remove a row (``dict.pop``)."""
        if name in self:
            self._unindex(name)
        return super().pop(name, *default)

    def popitem(self) -> tuple[str, WorkloadRow]:
        """Remove the last row (``dict.popitem``)."""
        name, row = super().popitem()
        self._unindex(name)
        return name, row

    def setdefault(self, name: str, row: WorkloadRow) -> WorkloadRow:
        """``dict.setdefault``."""
        if name not in self:
            self[name] = row
        return self[name]

    def update(self, *others: Any, **named: WorkloadRow) -> None:
        """``dict.update``."""
        for name, row in dict(*others, **named).items():
            self[name] = row

    def clear(self) -> None:
        """Remove every row."""
        self.touched.update(self)
        self.placed.clear()
        self.unestimated.clear()
        super().clear()

    def __ior__(self, other: Any) -> WorkloadRows:  # type: ignore[override,misc]
        self.update(other)
        return self


@dataclass
class LoopState:
    """The database as the core sees it, kept between cycles and refreshed by what changed."""

    policy: PolicyInfo
    flavors: tuple[FlavorInfo, ...] = ()
    flavor_ids: dict[str, int] = field(default_factory=dict)
    flavor_rows: dict[int, Flavor] = field(default_factory=dict)
    nodes: dict[str, NodeInfo] = field(default_factory=dict)
    node_ids: dict[str, int] = field(default_factory=dict)
    queues: tuple[QueueInfo, ...] = ()
    queue_ids: dict[str, int] = field(default_factory=dict)
    classes: tuple[PriorityClassInfo, ...] = ()
    namespaces: dict[str, str] = field(default_factory=dict)  # namespace -> its tenant's name
    # The rows the sync's registrations are checked against, read once after the policy
    # tables were (by the loop, between cycles or when it registers: ``_policy_rows``).
    registration_policy: RegistrationPolicy | None = None
    budgets: tuple[BudgetInfo, ...] = ()
    rows: WorkloadRows = field(default_factory=WorkloadRows)
    names: dict[int, str] = field(default_factory=dict)  # workload id -> core name
    history: list[PreemptionEventInfo] = field(default_factory=list)
    history_last_id: int = 0
    horizon: datetime | None = None  # rows stamped at or after this are read again
    # What the refreshes since ``begin_cycle`` saw: a cycle refreshes twice (before its sync
    # and after it), and what the first saw must not be lost to the second.
    changed: set[str] = field(default_factory=set)  # core names re-read
    ended: list[Ended] = field(default_factory=list)  # left the live states
    excluded: set[str] = field(default_factory=set)  # left out of the snapshot (bad pods)
    # Workload id -> the ``updated_at`` of the version of its row the state holds (read, or
    # written by the loop itself); a refresh does not read that version again.
    held: dict[int, datetime] = field(default_factory=dict)
    # Node id -> the ``updated_at`` of the version the state holds (read since the horizon):
    # a node stamped once (the sync writing the inventory) is read once, not at every refresh
    # until the horizon passes its stamp.
    nodes_held: dict[int, datetime] = field(default_factory=dict)
    # Held versions whose write the sync and apply need not look at (id -> the stamp).
    quiet: dict[int, datetime] = field(default_factory=dict)
    # Since ``begin_cycle``: rows the refreshes found changed but held already, and rows they
    # read again (the cycle's counts ``rows_held`` and ``rows_reread``).
    skipped: int = 0
    reread: int = 0
    # The snapshot's parts as last assembled, patched by the rows touched since (``_catch_up``):
    # the names in order (None: assemble afresh), each row's info, the names whose core form
    # depends on the moment or on other rows (a preemptor's name, a checkpoint), the ids.
    _order: list[str] | None = None
    _infos: dict[str, WorkloadInfo] = field(default_factory=dict)
    _volatile: set[str] = field(default_factory=set)
    _ids: dict[str, int] = field(default_factory=dict)
    _pod_set_ids: dict[str, tuple[int, ...]] = field(default_factory=dict)
    _node_order: tuple[NodeInfo, ...] | None = None  # the nodes by name (None: sort again)
    _policy_seen: str | None = None  # the policy tables' fingerprint as last read
    _budgets_seen: str | None = None  # the current budgets' digest as last read
    # Every node as the sync compares it with the cluster (``read_nodes``' ``inventory``),
    # when the last refresh read all nodes; the sync takes it (None: read them for it).
    node_inventory: dict[str, dict[str, object]] | None = None

    @property
    def policy_digest(self) -> str | None:
        """The policy tables' digest as last read (None: not read, or no digest: SQLite)."""
        return self._policy_seen

    @property
    def loaded(self) -> bool:
        """Whether the first, full read has happened."""
        return self.horizon is not None

    def begin_cycle(self) -> None:
        """Forget what earlier cycles' refreshes saw changed or ended (they acted on it)."""
        self.changed = set()
        self.ended = []
        self.skipped = self.reread = 0

    def refresh(self, now: datetime) -> None:
        """Bring the state up to date with the database as of ``now`` (first time: all of it).
        The loop refreshes before its sync, and again for its snapshot only when the sync
        wrote rows it could not put into the state as written (``ControlLoop._cycle``).

        On PostgreSQL one statement first asks what changed (``read_probe``): the horizon,
        the policy tables' digest, whether any node or workload was stamped since the last
        horizon, whether a newer preemption event exists, and the current budgets' digest;
        only what changed is read, in one state of the database. A quiet pool (the first
        cycle of a burst) costs that one statement.

        ``node_inventory`` (every node as the sync compares it) stays while it is kept up to
        date: the nodes read again are described again in it (a warm-up's full read serves
        the first cycle's sync, ``ControlLoop._warm_up``)."""
        today = timezone.localdate(now)
        probe = read_probe(self.horizon, self.history_last_id, today)
        horizon, policy = probe.horizon, probe.policy
        first = self.horizon is None
        policy_changed = policy is None or policy != self._policy_seen
        if not (
            first
            or policy_changed
            or probe.nodes
            or probe.workloads
            or probe.events
            or probe.budgets is None
            or probe.budgets != self._budgets_seen
        ):
            self._advance(horizon)
            return
        with one_state_of_the_database():
            flavors_changed = False
            if policy_changed:
                flavors, flavor_ids, flavor_rows = _flavors()
                flavors_changed = flavors != self.flavors
                self.flavors, self.flavor_ids, self.flavor_rows = flavors, flavor_ids, flavor_rows
                self.queues, self.queue_ids = _queues()
                self.classes = _priority_classes()
                self.namespaces = dict(TenantNamespace.objects.values_list("name", "tenant__name"))
                self.registration_policy = None
                self._policy_seen = policy
            if policy_changed or probe.budgets is None or probe.budgets != self._budgets_seen:
                self.budgets = read_budgets(now, {q.tenant for q in self.queues if q.tenant})
                self._budgets_seen = probe.budgets
            if self.horizon is None or flavors_changed:
                self._read_all_nodes()
            elif probe.nodes:
                self._read_changed_nodes(self.horizon)
            if self.horizon is None:
                self._read_all_workloads(now)
            elif probe.workloads:
                self._read_changed_workloads(self.horizon, now)
            if probe.events:
                self._read_history(now)
        self._advance(horizon)

    def _advance(self, horizon: datetime) -> None:
        """The refresh is done up to ``horizon``: what is stamped before it is known."""
        self.horizon = horizon
        # A stamp older than the horizon is never seen by a refresh again, and a row stamped
        # before the horizon is known anyway (``own_writes``).
        self.held = {pk: stamp for pk, stamp in self.held.items() if stamp >= horizon}
        self.nodes_held = {pk: at for pk, at in self.nodes_held.items() if at >= horizon}
        self.quiet = {pk: stamp for pk, stamp in self.quiet.items() if stamp >= horizon}

    # -- nodes ----------------------------------------------------------------------------

    def _read_all_nodes(self) -> None:
        self.node_inventory = {}
        nodes, ids = read_nodes(self.flavor_rows, inventory=self.node_inventory)
        self.nodes = {node.name: node for node in nodes}
        self.node_ids = ids
        self.nodes_held = {}
        self._node_order = None

    def _read_changed_nodes(self, since: datetime) -> None:
        """The nodes stamped since ``since`` but at a version the state does not hold (read
        in the same state of the database as their stamps on PostgreSQL; elsewhere after
        them, so no older)."""
        changed = dict(Node.objects.filter(updated_at__gte=since).values_list("id", "updated_at"))
        held = self.nodes_held
        fresh = [pk for pk, stamp in changed.items() if held.get(pk) != stamp]
        held.update(changed)
        if not fresh:
            return
        nodes, ids = read_nodes(self.flavor_rows, fresh, inventory=self.node_inventory)
        for node in nodes:
            self.nodes[node.name] = node
        self.node_ids.update(ids)
        self._node_order = None

    # -- workloads --------------------------------------------------------------------------

    def _read_all_workloads(self, now: datetime) -> None:
        self.rows = WorkloadRows(read_workloads(now))
        self.names = {row.id: name for name, row in self.rows.items()}
        self.changed = set(self.rows)
        self._order = None

    def _read_changed_workloads(self, since: datetime, now: datetime) -> None:
        # On PostgreSQL the stamps come as whole microseconds since the epoch (``extract`` is
        # exact from PostgreSQL 14 on): an integer decodes in C, while Django's time zone
        # loader of a ``timestamptz`` runs in Python, and a steady refresh sees thousands of
        # rows, most of them the loop's own writes.
        changed: Any = Workload.objects.filter(updated_at__gte=since)
        stamp_of: Any = _same
        if connection.vendor == "postgresql":
            as_micros = RawSQL("(extract(epoch from updated_at) * 1000000)::bigint", ())
            changed = changed.annotate(stamp=as_micros).values_list(
                "id", "namespace", "name", "state", "stamp"
            )
            stamp_of = micros
        else:
            changed = changed.values_list("id", "namespace", "name", "state", "updated_at")
        live_ids: dict[int, datetime] = {}
        held, quiet = self.held, self.quiet
        for workload_id, namespace, name, state, stamp in changed:
            core_name = qualified_name(namespace, name)
            if state in LIVE_STATES:
                version = held.get(workload_id)
                if version is not None and stamp_of(version) == stamp and core_name in self.rows:
                    silent = quiet.get(workload_id)
                    if silent is None or stamp_of(silent) != stamp:
                        self.changed.add(core_name)  # this version is held already
                    self.skipped += 1
                    continue
                live_ids[workload_id] = stamp if stamp_of is _same else from_micros(stamp)
            else:
                self.ended.append(Ended(workload_id, core_name, state))
                if self.rows.pop(core_name, None) is not None:
                    self.names.pop(workload_id, None)
        if not live_ids:
            return
        fresh = read_workloads(now, live_ids)
        self.reread += len(fresh)
        for name, row in fresh.items():
            self.rows[name] = row
            self.names[row.id] = name
            self.changed.add(name)
            # On PostgreSQL the stamps and the rows are read in one state of the database;
            # elsewhere the rows are read after the stamps, so they are no older than them.
            held[row.id] = live_ids[row.id]
        # A live workload whose pod sets are not readable yet (submitted mid-read) stays out.

    # -- the loop's own writes ---------------------------------------------------------------

    def put(self, row: WorkloadRow) -> None:
        """A live workload as the loop just wrote it (its name unchanged)."""
        name = row.info.name
        self.rows[name] = row
        self.names[row.id] = name

    def put_registered(self, rows: Collection[tuple[WorkloadRow, datetime | None]]) -> None:
        """Workloads the loop just inserted (the sync's registrations), each as
        ``read_workloads`` reads it back, with its ``updated_at``: held, so the refresh after
        the sync does not read them again (a write by anyone else stamps them anew, and they
        are read again). A stamp of None: not written yet (held once it is: ``hold``)."""
        for row, _ in rows:
            self.put(row)
        self.hold({row.id: stamp for row, stamp in rows if stamp is not None})

    def hold(self, stamps: Mapping[int, datetime]) -> None:
        """Rows the loop just inserted as the state holds them (id -> their ``updated_at``)."""
        for pk, stamp in stamps.items():
            self.held[pk] = stamp
            self.quiet.pop(pk, None)

    def own_writes(
        self,
        stamps: Mapping[int, tuple[datetime, datetime]],
        *,
        unsure: Collection[int] = (),
        quiet: bool = False,
        seen: bool = False,
    ) -> None:
        """Take the loop's writes (id -> (``updated_at`` before, the stamp written), the rows
        already ``put`` as written): a row whose earlier version the state knew is owned until
        someone else writes it; others, and those in ``unsure`` (rows the write did not
        describe whole), are read again at the next refresh. ``quiet``: writes of nothing the
        sync or apply look at; a refresh does not count such a version as changed when the
        version before was not to be looked at either (older than the horizon, or quiet) --
        or, with ``seen``, was looked at already: the sync's own writes, made after its
        refresh counted every version since the horizon (the caller has this cycle's apply
        look at the rows written)."""
        horizon = self.horizon
        held, silent = self.held, self.quiet
        for pk, (before, stamp) in stamps.items():
            older = horizon is not None and before < horizon
            known = older or held.get(pk) == before
            if known and pk not in unsure:
                held[pk] = stamp
                if quiet and (older or seen or silent.get(pk) == before):
                    silent[pk] = stamp
                else:
                    silent.pop(pk, None)
            else:
                held.pop(pk, None)
                silent.pop(pk, None)

    def forget(self, names: Collection[str]) -> None:
        """Drop workloads the loop knows have left the live states (read again if not)."""
        for name in names:
            row = self.rows.pop(name, None)
            if row is not None:
                self.names.pop(row.id, None)

    # -- history ---------------------------------------------------------------------------

    def _read_history(self, now: datetime) -> None:
        oldest = now - timedelta(seconds=history_horizon(self.policy))
        rows = (
            PreemptionEvent.objects.filter(id__gt=self.history_last_id, at__gte=oldest)
            .values_list(
                "id",
                "at",
                "victim__namespace",
                "victim__name",
                "preemptor__namespace",
                "preemptor__name",
                "preemptor_tenant__name",
            )
            .order_by("id")
        )
        for event_id, at, v_ns, victim, p_ns, preemptor, tenant in rows:
            self.history.append(
                PreemptionEventInfo(
                    at=at.timestamp(),
                    victim=qualified_name(v_ns, victim),
                    preemptor=None if preemptor is None else qualified_name(p_ns, preemptor),
                    preemptor_tenant=tenant,
                )
            )
            self.history_last_id = max(self.history_last_id, event_id)
        self.history.sort(key=lambda event: event.at)

    def forget_events(self, victims: Collection[str]) -> None:
        """Drop the events of evictions that did not happen (a budget refused them, and
        ``do_record_apply_outcome`` deleted their rows): those of the victims' current run."""
        starts = {
            name: self.rows[name].info.started_at or 0.0 for name in victims if name in self.rows
        }
        self.history = [
            e for e in self.history if not (e.victim in starts and e.at >= starts[e.victim])
        ]

    # -- assembling ------------------------------------------------------------------------

    def workload_order(self) -> list[str]:
        """The workloads' core names, sorted (patched as workloads come and go)."""
        self._catch_up()
        assert self._order is not None
        return self._order

    def _catch_up(self) -> None:
        """Bring the assembled parts up to the rows: afresh the first time (or after the
        rows were replaced whole), else only the names touched since the last assembly --
        a steady cycle touches hundreds of 30,000 rows at B1's size."""
        rows = self.rows
        touched = rows.touched
        if self._order is None:
            touched.clear()
            self._order = sorted(rows)
            self._infos = {name: row.info for name, row in rows.items()}
            self._volatile = {name for name, row in rows.items() if _volatile(row)}
            self._ids = {name: row.id for name, row in rows.items()}
            self._pod_set_ids = {name: row.pod_set_ids for name, row in rows.items()}
            return
        if not touched:
            return
        infos, volatile = self._infos, self._volatile
        ids, pod_set_ids = self._ids, self._pod_set_ids
        added: list[str] = []
        removed: set[str] = set()
        for name in touched:
            row = rows.get(name)
            if row is None:
                if infos.pop(name, None) is not None:
                    removed.add(name)
                    del ids[name], pod_set_ids[name]
                volatile.discard(name)
                continue
            if name not in infos:
                added.append(name)
            infos[name] = row.info
            ids[name] = row.id
            pod_set_ids[name] = row.pod_set_ids
            if _volatile(row):
                volatile.add(name)
            else:
                volatile.discard(name)
        touched.clear()
        if removed:
            self._order = [name for name in self._order if name not in removed]
        if added:
            # Two sorted runs: Python's sort merges them in linear time.
            self._order += sorted(added)
            self._order.sort()

    def snapshot(
        self,
        now: datetime,
        overlay: Mapping[str, WorkloadInfo] | None = None,
        *,
        leave_out: Collection[str] = (),
    ) -> DatabaseSnapshot:
        """The core's snapshot at ``now`` from what is held; ``overlay`` replaces workloads
        by name with what the cluster adds (missing pods, allowed nodes, ...); the workloads
        named in ``leave_out`` are not in it (pods that say something malformed)."""
        self._catch_up()
        order = self._order
        assert order is not None
        moment = now.timestamp()
        names = self.names
        rows = self.rows
        workloads = list(map(self._infos.__getitem__, order))
        replaced: dict[str, WorkloadInfo] = {
            name: rows[name].resolve(names, moment) for name in self._volatile
        }
        if overlay:
            replaced.update((name, info) for name, info in overlay.items() if name in rows)
        for name, info in replaced.items():
            workloads[bisect_left(order, name)] = info
        if leave_out:
            gone = sorted(
                (bisect_left(order, name) for name in leave_out if name in rows), reverse=True
            )
            for index in gone:
                del workloads[index]
        oldest = moment - history_horizon(self.policy)
        history = tuple(e for e in self.history if oldest <= e.at <= moment)
        if self._node_order is None:
            self._node_order = tuple(self.nodes[name] for name in sorted(self.nodes))
        # By name: the workloads kept by name (``_catch_up``), as replaced and left out here.
        by_name = dict(self._infos)
        by_name.update(replaced)
        for name in leave_out:
            by_name.pop(name, None)
        snapshot = Snapshot(
            flavors=self.flavors,
            nodes=self._node_order,
            queues=self.queues,
            priority_classes=self.classes,
            workloads=tuple(workloads),
            budgets=self.budgets,
            preemption_history=history,
        )
        return DatabaseSnapshot(
            snapshot=snapshot,
            now=moment,
            workload_ids=dict(self._ids),
            pod_set_ids=dict(self._pod_set_ids),
            node_ids=dict(self.node_ids),
            flavor_ids=dict(self.flavor_ids),
            queue_ids=dict(self.queue_ids),
            by_name=by_name,
        )


def _volatile(row: WorkloadRow) -> bool:
    """Whether the row's core form depends on the moment or on other rows (``resolve``)."""
    return row.evicting_for_id is not None or row.info.last_checkpoint_at is not None


def stepped(row: WorkloadRow, steps: Sequence[tuple[str, datetime]]) -> WorkloadRow | None:
    """A live workload after the pod-driven transitions ``steps`` (to state, at), as
    ``actions.do_record_cluster_sync`` writes them and ``read_workloads`` reads them back: a
    start, or a requeue after the workload left; None when the result is not one of those."""
    info, state = row.info, row.state
    left = False
    for to_state, at in steps:
        if to_state == WorkloadState.RUNNING and state == WorkloadState.ADMITTED:
            info, state = dataclasses.replace(info, started_at=at.timestamp()), to_state
        elif to_state in LEFT:
            left, state = True, to_state
        elif to_state == WorkloadState.PENDING and left and state == WorkloadState.PREEMPTED:
            # Leaving cleared the eviction, the nomination and the idle spell
            # (``_record_steps``).
            info = dataclasses.replace(
                info,
                state="pending",
                placement=(),
                started_at=None,
                last_checkpoint_at=None,
                nominated=False,
                evicting_for=None,
                idle_since=None,
            )
            state = to_state
        else:
            return None
    if state not in (WorkloadState.RUNNING, WorkloadState.PENDING):
        return None
    if state == WorkloadState.PENDING:
        return WorkloadRow(row.id, info, row.pod_set_ids, None, state, row.origin, "")
    return dataclasses.replace(row, info=info, state=state)


def policy_fingerprint() -> str | None:
    """A digest of every row of the tables the snapshot's flavors, queues (with their quotas
    and tenants) and priority classes, and the namespaces' tenants, are read from, or None
    where the database cannot say (SQLite: read them every time). The same digest means the
    same rows: not read again. Budgets have a digest of their own (``read_probe``): the
    loop's own ledger entries move them most busy cycles."""
    if connection.vendor != "postgresql":
        return None
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {_fingerprint_sql()}")
        digest: str = cursor.fetchone()[0]
    return digest


def _fingerprint_sql() -> str:
    """``policy_fingerprint``'s expression (PostgreSQL): over the models' own tables."""
    models = (Flavor, Queue, QueueQuota, PriorityClass, Tenant, TenantNamespace)
    tables = [model._meta.db_table for model in models]
    select = "coalesce((SELECT string_agg(t::text, ',' ORDER BY t.id) FROM {} t), '')"
    parts = ", ".join(select.format(connection.ops.quote_name(table)) for table in tables)
    return f"md5(concat_ws('|', {parts}))"


EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
MICROSECOND = timedelta(microseconds=1)


def micros(moment: datetime) -> int:
    """An aware time as whole microseconds since the epoch (exact)."""
    return (moment - EPOCH) // MICROSECOND


def from_micros(value: int) -> datetime:
    """Whole microseconds since the epoch as an aware time (``micros``' inverse)."""
    return EPOCH + timedelta(microseconds=value)


def _same(moment: datetime) -> datetime:
    return moment


# The database's clock and the start of the oldest transaction open on it (PostgreSQL).
_CLOCK_SQL = (
    "SELECT clock_timestamp(), min(xact_start){} FROM pg_stat_activity "
    "WHERE datname = current_database() AND pid <> pg_backend_pid()"
)


def read_horizon() -> datetime:
    """The earliest time a row committed after this read may carry (see the module's doc)."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(_CLOCK_SQL.format(""))
            clock, oldest = cursor.fetchone()
        return _horizon(clock, oldest)
    return timezone.now() - timedelta(seconds=SQLITE_MARGIN_S)


@dataclass(frozen=True, slots=True)
class Probe:
    """What a refresh asks before it reads (``read_probe``). A question the database cannot
    answer in one statement (SQLite) is answered "changed": read."""

    horizon: datetime
    policy: str | None  # the policy tables' digest (``policy_fingerprint``); None: unknown
    nodes: bool = True  # a node stamped at or after the last horizon
    workloads: bool = True  # a workload stamped at or after the last horizon
    events: bool = True  # a preemption event newer than the last one read
    budgets: str | None = None  # the digest of the budgets of today's period; None: unknown


# The refresh's first question, in one statement (PostgreSQL): the database's clock and the
# start of the oldest transaction open on it, the policy digest, what changed since.
_PROBE_SQL = (
    "SELECT clock_timestamp(), min(xact_start), {policy}, "
    "EXISTS (SELECT 1 FROM {node} WHERE updated_at >= %(since)s), "
    "EXISTS (SELECT 1 FROM {workload} WHERE updated_at >= %(since)s), "
    "EXISTS (SELECT 1 FROM {event} WHERE id > %(last_event)s), "
    "md5(coalesce((SELECT string_agg(t::text, ',' ORDER BY t.id) FROM {budget} t "
    "WHERE period_start <= %(today)s AND period_end > %(today)s), '')) "
    "FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
)


def read_probe(since: datetime | None, last_event: int, today: date) -> Probe:
    """The horizon, the policy digest and what changed: whether nodes or workloads were
    stamped at or after ``since`` (the last horizon), whether a preemption event's id is
    above ``last_event``, and the digest of the budgets whose period holds ``today``.

    On PostgreSQL one statement, outside any transaction the reads then open: a row
    committed after it carries a stamp at or after the horizon it returns (see the module's
    doc), so the next refresh sees what this one may have missed. Elsewhere only the
    horizon, and everything counts as changed."""
    if connection.vendor != "postgresql":
        return Probe(read_horizon(), None)
    quote = connection.ops.quote_name
    sql = _PROBE_SQL.format(
        policy=_fingerprint_sql(),
        node=quote(Node._meta.db_table),
        workload=quote(Workload._meta.db_table),
        event=quote(PreemptionEvent._meta.db_table),
        budget=quote(PriorityBudget._meta.db_table),
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, {"since": since or EPOCH, "last_event": last_event, "today": today})
        clock, oldest, digest, nodes, workloads, events, budgets = cursor.fetchone()
    return Probe(_horizon(clock, oldest), digest, nodes, workloads, events, budgets)


def _horizon(clock: datetime, oldest: datetime | None) -> datetime:
    moment = clock if oldest is None else min(clock, oldest)
    return moment - timedelta(seconds=CLOCK_MARGIN_S)
