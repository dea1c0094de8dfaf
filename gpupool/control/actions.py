"""State changes of the control app: the scheduling loop's records, and cycle records.

A cycle writes what it saw, then what it decided, then what applying it taught it, each in one
transaction (``docs/control-loop.md``):

- ``do_record_cluster_sync``: what the cluster said (nodes, new workloads, pod-driven
  transitions, checkpoints), through the inventory and workload actions;
- ``do_record_cycle``: the plan -- admissions with their placements, transitions and usage,
  evictions with their preemption events, nominations, explanations -- in bulk, and the cycle's
  ``SchedulingCycle`` row;
- ``do_record_apply_outcome``: gangs that could not be bound go back to pending; victim sets a
  disruption budget refused are called off; the cycle row gets its apply time and counts.

The bulk writes validate what the database cannot check by itself in one statement (the state
machine: only pending workloads are admitted, only running ones evicted) and leave the rest to
the decision core's invariants and the database's constraints. Rows are stamped
``updated_at`` with the wall clock (whatever the cluster's clock says the cycle's time is), as
``auto_now`` stamps them: it is what the loop's state reads changes by.
"""

from __future__ import annotations

import json
import logging
from collections import defaultdict
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from functools import partial
from typing import Any, TypeVar

from django.core.exceptions import ValidationError
from django.db import IntegrityError, connection, transaction
from django.db.models import (
    BooleanField,
    Case,
    DateTimeField,
    Exists,
    ExpressionWrapper,
    OuterRef,
    Q,
    Value,
    When,
)
from django.utils import timezone

from gpupool.accounting.actions import do_close_usage
from gpupool.accounting.models import PreemptionEvent, UsageInterval
from gpupool.audit.actions import record_audit_event, record_system_audit_rows
from gpupool.bulk import (
    analyze,
    check_constraints_now,
    check_deferred_constraints,
    insert_objects,
    insert_values,
    overlapped,
    update_rows,
    upsert_rows,
    values_timed,
)
from gpupool.clusters.base import ZONE_LABEL
from gpupool.clusters.grouping import WorkloadKey
from gpupool.clusters.inventory import named_unhealthy_gpus
from gpupool.control.choices import CycleStatus
from gpupool.control.models import SchedulingCycle
from gpupool.control.record import CycleRecord
from gpupool.control.snapshot import id_list, int_array
from gpupool.control.sync import (
    ADMIN,
    CLUSTER_UNHEALTHY,
    NODE_FAILURE,
    NodeUpdate,
    PodSetShape,
    Registration,
    Shrink,
    Step,
    SyncDecision,
)
from gpupool.inventory.actions import do_add_nodes, do_mark_nodes_gone, do_sync_node
from gpupool.inventory.models import Flavor, Gpu, Node
from gpupool.number_formats import counted
from gpupool.quotas.actions import BudgetMove, do_record_budget_moves, write_ledger_entries
from gpupool.quotas.choices import LedgerEntryKind
from gpupool.quotas.models import (
    PriorityBudget,
    PriorityClass,
    Queue,
    QueueQuota,
)
from gpupool.scheduler.explain import NEVER_FITS_FACT
from gpupool.scheduler.types import Snapshot
from gpupool.tenancy.models import Tenant, TenantNamespace
from gpupool.workloads.actions import do_submit_workload, do_transition_workload
from gpupool.workloads.choices import ALLOWED_TRANSITIONS, WorkloadState
from gpupool.workloads.models import (
    Placement,
    PodSet,
    PodSetFlavorChoice,
    Workload,
    WorkloadExplanation,
    WorkloadTransition,
)
from gpupool.workloads.queries import ESTIMATE_LEARNED_FACT, ESTIMATE_NOT_BEFORE_FACT, GROW_ACTION

logger = logging.getLogger(__name__)

# The facts of a pending workload's explanation that the estimates own (``estimates.py``):
# the cycle's explanation writes keep them, the estimates' writes set only them.
ESTIMATE_FACTS = (ESTIMATE_LEARNED_FACT, ESTIMATE_NOT_BEFORE_FACT)


@transaction.atomic
def do_start_cycle(*, at: datetime) -> SchedulingCycle:
    """Open the record of a scheduling cycle that starts now."""
    return SchedulingCycle.objects.create(started_at=at, status=CycleStatus.RUNNING)


@transaction.atomic
def do_finish_cycle(
    cycle: SchedulingCycle,
    *,
    at: datetime,
    status: str,
    nodes: int = 0,
    workloads: int = 0,
    admitted: int = 0,
    evicted: int = 0,
    pending: int = 0,
    error: str = "",
    timings: Mapping[str, float] | None = None,
    outcome: Mapping[str, Any] | None = None,
    totals: Mapping[str, Any] | None = None,
) -> SchedulingCycle:
    """Close a cycle record with its outcome, counts, phase timings and running totals."""
    cycle.finished_at = at
    cycle.status = status
    cycle.nodes = nodes
    cycle.workloads = workloads
    cycle.admitted = admitted
    cycle.evicted = evicted
    cycle.pending = pending
    cycle.error = error
    columns = {f.name for f in SchedulingCycle._meta.concrete_fields}
    for phase, seconds in (timings or {}).items():
        if f"{phase}_s" in columns:  # the phases' (the utilisation read's is in the outcome)
            setattr(cycle, f"{phase}_s", round(seconds, 6))
    if outcome is not None:
        cycle.outcome = dict(outcome)
    if totals is not None:
        cycle.totals = dict(totals)
    # The model's two check constraints, in Python: full_clean would ask the database each
    # (a savepoint and a SELECT apiece, every cycle); the database still enforces them.
    cycle.full_clean(validate_constraints=False)
    errors: dict[str, str] = {}
    if cycle.status not in CycleStatus.values:
        errors["status"] = f"{cycle.status!r} is not a cycle status"
    if cycle.finished_at is not None and cycle.finished_at < cycle.started_at:
        errors["finished_at"] = "a cycle cannot finish before it started"
    if errors:
        raise ValidationError(errors)
    cycle.save()
    return cycle


# -- what the cluster said ------------------------------------------------------------------


def _unhealthy_indices(
    gpus: Sequence[Gpu], count: int, in_cluster: int, labels: Mapping[str, str]
) -> dict[int, str]:
    """Which GPUs are unhealthy after a sync. An admin's or DCGM's findings stay, with their
    reasons. The cluster's count of GPUs it does not offer (``in_cluster``) is met, each GPU
    once, by the GPUs a health source names (``named_unhealthy_gpus`` of the node's labels),
    then those already known broken (findings first: a broken GPU is not counted again as one
    more not offered), then the highest others; those without a finding get
    ``CLUSTER_UNHEALTHY``."""
    broken = [gpu for gpu in gpus if not gpu.healthy and gpu.index < count]
    reasons = {
        g.index: g.unhealthy_reason for g in broken if g.unhealthy_reason != CLUSTER_UNHEALTHY
    }
    marked = sorted((g.index for g in broken if g.index not in reasons), reverse=True)
    named = [index for index in named_unhealthy_gpus(labels) if index < count]
    order = dict.fromkeys([*named, *sorted(reasons), *marked, *range(count - 1, -1, -1)])
    for index in list(order)[:in_cluster]:
        reasons.setdefault(index, CLUSTER_UNHEALTHY)
    return reasons


def _add_nodes(
    updates: Sequence[NodeUpdate], flavors: Mapping[int, Flavor], at: datetime
) -> list[NodeUpdate]:
    """Nodes the database has never seen, added at once (``do_add_nodes``); returns the
    updates left for ``_sync_node`` one by one: known nodes, and any the bulk path refused."""
    known = set(
        Node.objects.filter(name__in=[u.name for u in updates]).values_list("name", flat=True)
    )
    new = [u for u in updates if u.name not in known]
    if not new:
        return list(updates)
    by_name = {u.name: u for u in new}
    left = do_add_nodes(
        [
            (
                Node(
                    name=update.name,
                    flavor=flavors[update.flavor_id],
                    cpu=update.cpu,
                    memory_gb=update.memory_gb,
                    nvlink_domain=update.nvlink_domain or update.name,
                    zone=update.zone,
                    labels=dict(update.labels),
                    mig_layout=dict(update.mig_layout),
                    cluster_exclusion=update.exclusion[:200],
                ),
                update.gpus,
                _unhealthy_indices([], update.gpus, update.unhealthy_in_cluster, update.labels),
            )
            for update in new
        ],
        at=at,
        reason="cluster sync",
    )
    return [u for u in updates if u.name in known] + [by_name[node.name] for node in left]


def _sync_node(update: NodeUpdate, flavors: Mapping[int, Flavor], at: datetime) -> None:
    gpus = list(Gpu.objects.filter(node__name=update.name))
    do_sync_node(
        update.name,
        flavor=flavors[update.flavor_id],
        gpus=update.gpus,
        cpu=update.cpu,
        memory_gb=update.memory_gb,
        unhealthy_gpus=_unhealthy_indices(
            gpus, update.gpus, update.unhealthy_in_cluster, update.labels
        ),
        nvlink_domain=update.nvlink_domain,
        zone=update.zone,
        labels=update.labels,
        mig_layout=update.mig_layout,
        cluster_exclusion=update.exclusion,
        at=at,
        acting_user=None,
        reason="cluster sync",
    )


def _register(registration: Registration, flavors: Mapping[int, Flavor]) -> Workload:
    """A workload for pods created in the cluster (with kubectl, or by a controller)."""
    queue = Queue.objects.get(name=registration.queue)
    klass = (
        PriorityClass.objects.get(name=registration.priority_class)
        if registration.priority_class
        else None
    )
    specs = [shape.spec(flavors) for shape in registration.pod_sets]
    workload = do_submit_workload(
        registration.key.name,
        queue=queue,
        pod_sets=specs,
        priority_class=klass,
        min_member=registration.min_member,
        topology=registration.topology,
        protected_runtime_s=registration.protected_runtime_s,
        expected_runtime_s=registration.expected_runtime_s,
        at=registration.submitted_at,
        namespace=registration.key.namespace,
    )
    Workload.objects.filter(pk=workload.pk).update(
        origin=registration.origin,
        controller_kind=registration.controller_kind,
        controller_name=registration.controller_name,
    )
    return workload


@dataclass(frozen=True, slots=True)
class Registered:
    """A workload the bulk registration inserted, as its rows say (the loop puts it into its
    state from this, so the snapshot need not read it back: ``LoopState.put_registered``)."""

    registration: Registration
    workload_id: int
    pod_set_ids: tuple[int, ...]
    priority_class: str  # the class it runs at (the default when the pods name none)
    protected_runtime_s: int  # as stored (the queue's default when the pods say none)
    stamp: datetime | None  # its ``updated_at`` (None: not written yet, ``PendingRegistrations``)


@dataclass(frozen=True, slots=True)
class _Checked:
    """A registration the bulk path takes, with the rows it read for it."""

    registration: Registration
    queue: Queue
    klass: PriorityClass
    protected_runtime_s: int
    pod_sets: tuple[tuple[PodSetShape, Flavor | None, tuple[Flavor, ...]], ...]


@dataclass(frozen=True, slots=True)
class RegistrationPolicy:
    """The policy rows a registration is checked against: the queues (``inner`` annotated:
    whether it has child queues) with their tenants, the priority classes and the default one,
    and the namespaces each tenant owns. The loop keeps them while the policy tables' digest
    stays (``LoopState.registration_policy``); ``_register_all`` alone reads them per batch."""

    queues: Mapping[str, Queue]
    inner: frozenset[str]  # the queues with child queues (workloads go to leaves)
    classes: Mapping[str, PriorityClass]
    default: PriorityClass | None
    owned: Mapping[int, frozenset[str]]

    @classmethod
    def read(cls, queues: Collection[str] | None = None) -> RegistrationPolicy:
        """The rows as the database holds them now (only the queues named, when given)."""
        rows = Queue.objects.select_related("tenant").annotate(
            inner=Exists(Queue.objects.filter(parent=OuterRef("pk")))
        )
        if queues is not None:
            rows = rows.filter(name__in=set(queues))
        classes = {c.name: c for c in PriorityClass.objects.all()}
        owned: dict[int, set[str]] = defaultdict(set)
        for tenant_id, name in TenantNamespace.objects.values_list("tenant_id", "name"):
            owned[tenant_id].add(name)
        found = {q.name: q for q in rows}
        return cls(
            queues=found,
            inner=frozenset(name for name, queue in found.items() if queue.inner),
            classes=classes,
            default=next((c for c in classes.values() if c.default), None),
            owned={tenant: frozenset(names) for tenant, names in owned.items()},
        )


def _register_all(
    registrations: Sequence[Registration],
    flavors: Mapping[int, Flavor],
    at: datetime,
    registered: list[Registered] | None = None,
    *,
    policy: RegistrationPolicy | None = None,
) -> list[Registration]:
    """Register many workloads from the cluster at once (a few statements for them all, one
    audit row), each checked in Python by its models' own field and ``clean`` rules against
    the ``policy`` rows (read here when not given); returns those the bulk path does not
    take -- anything doubtful -- for ``_register`` one by one, which refuses a bad one with
    the same message as ever. What it inserted goes into ``registered`` when given. (The
    loop, on PostgreSQL, has its record write them instead: ``defer_registrations``.)"""
    if not registrations:
        return []
    if policy is None:
        policy = RegistrationPolicy.read({r.queue for r in registrations})
    built, slow = _check_registrations(registrations, flavors, policy)
    if not built:
        return slow
    try:
        with transaction.atomic():
            inserted = _insert_registered(built, at)
    except IntegrityError:  # a rule only the database checks: one by one, as ever
        return [*slow, *(c.registration for c in built)]
    if registered is not None:
        registered.extend(inserted)
    return slow


def defer_registrations(
    registrations: Sequence[Registration],
    flavors: Mapping[int, Flavor],
    at: datetime,
    policy: RegistrationPolicy,
) -> tuple[PendingRegistrations | None, list[Registration]]:
    """The registrations the bulk path takes, checked and given ids (one statement, in no
    transaction: a sequence never gives an id twice), for the caller's next transaction to
    write (``do_record_cycle``: PostgreSQL); and those left to the slow path, which
    ``do_record_cluster_sync`` takes. Elsewhere none is deferred."""
    if not registrations or connection.vendor != "postgresql":
        return None, list(registrations)
    built, slow = _check_registrations(registrations, flavors, policy)
    return (PendingRegistrations.draw(built, at) if built else None), slow


def _check_registrations(
    registrations: Sequence[Registration],
    flavors: Mapping[int, Flavor],
    policy: RegistrationPolicy,
) -> tuple[list[_Checked], list[Registration]]:
    """The registrations the bulk path takes, checked, and those it leaves to the slow one."""
    # A name taken already (by a row made since the loop's sync looked, or twice in the
    # batch) fails the bulk insert on the unique constraint: all go one by one, as ever.
    taken: set[tuple[str, str]] = set()
    slow: list[Registration] = []
    built: list[_Checked] = []
    check = _RegistrationCheck(flavors)
    for registration in registrations:
        queue = policy.queues.get(registration.queue)
        klass = policy.classes.get(registration.priority_class or "") or (
            None if registration.priority_class else policy.default
        )
        key = (registration.key.namespace, registration.key.name)
        namespaces = (
            policy.owned.get(queue.tenant_id, frozenset())
            if queue and queue.tenant_id
            else frozenset()
        )
        if (
            queue is None
            or klass is None
            or registration.queue in policy.inner
            or key in taken
            or (namespaces and key[0] not in namespaces)
        ):
            slow.append(registration)
            continue
        made = check(registration, queue, klass)
        if made is None:
            slow.append(registration)
            continue
        taken.add(key)
        built.append(made)
    return built, slow


# Foreign keys a registration sets from rows it read (``clean_fields`` would query each).
_RELATIONS = ["workload", "queue", "priority_class", "submitter", "evicting_for", "flavor"]
# The fields from the pods that differ from one registration to the next of a sync (the rest
# repeat; the submission time is the sync's own datetime).
_OWN_FIELDS = ("name", "namespace")


def _unsaved_workload(
    registration: Registration, queue: Queue, klass: PriorityClass, protected_runtime_s: int
) -> Workload:
    """The pending workload a registration makes, unsaved (checked and written by callers)."""
    return Workload(
        name=registration.key.name,
        namespace=registration.key.namespace,
        queue=queue,
        priority_class=klass,
        min_member=registration.min_member,
        topology=registration.topology,
        protected_runtime_s=protected_runtime_s,
        expected_runtime_s=registration.expected_runtime_s,
        state=WorkloadState.PENDING,
        submitted_at=registration.submitted_at,
        origin=registration.origin,
        controller_kind=registration.controller_kind,
        controller_name=registration.controller_name,
    )


def _unsaved_pod_set(workload: Workload, shape: PodSetShape, flavor: Flavor | None) -> PodSet:
    """A pod set of a registration's shape on its first flavor, unsaved."""
    return PodSet(
        workload=workload,
        name=shape.name,
        count=shape.count,
        gpus=shape.gpus,
        flavor=flavor,
        gpu_milli=shape.gpu_milli,
        cpu=shape.cpu,
        memory_gb=shape.memory_gb,
    )


def _checked_pod_set(
    workload: Workload, shape: PodSetShape, flavors: Mapping[int, Flavor]
) -> tuple[PodSet, list[Flavor]]:
    """The unsaved pod set of a shape and its further flavor choices, checked by the model's
    own field and ``clean`` rules without a query (``ValidationError`` when they refuse it)."""
    pod_set = _unsaved_pod_set(
        workload, shape, flavors[shape.flavor_ids[0]] if shape.flavor_ids else None
    )
    pod_set.clean_fields(exclude=_RELATIONS)
    pod_set.clean()
    return pod_set, [flavors[pk] for pk in shape.flavor_ids[1:]]


class _RegistrationCheck:
    """The models' rules over a sync's registrations, each distinct thing checked once: the
    pods of a burst mostly share their queue, class, protection and pod set shapes, so a
    workload's other fields and a pod set's shape are checked by ``Workload`` and ``PodSet``'s
    own field and ``clean`` rules the first time they are met, and then only the fields of
    its own (its name and namespace) are."""

    def __init__(self, flavors: Mapping[int, Flavor]) -> None:
        self.flavors = flavors
        self.workloads: dict[tuple[object, ...], bool] = {}
        self.pod_sets: dict[PodSetShape, tuple[Flavor | None, tuple[Flavor, ...]] | None] = {}
        self.fields = [f for f in Workload._meta.concrete_fields if f.name in _OWN_FIELDS]

    def __call__(
        self, registration: Registration, queue: Queue, klass: PriorityClass
    ) -> _Checked | None:
        """The registration with its rows, or None when a model's rule refuses it."""
        protected = (
            queue.default_protected_runtime_s
            if registration.protected_runtime_s is None
            else registration.protected_runtime_s
        )
        workload = _unsaved_workload(registration, queue, klass, protected)
        common = (
            queue.pk,
            klass.pk,
            registration.min_member,
            registration.topology,
            protected,
            registration.expected_runtime_s,
            registration.origin,
            # Its name differs from one to the next and is not checked again: a CharField
            # checks only its length, which ``sync._controller`` keeps within the field's.
            registration.controller_kind,
        )
        try:
            ok = self.workloads.get(common)
            if ok is None:
                ok = self._workload(workload)
                self.workloads[common] = ok
            else:
                for field in self.fields:  # the rest is the same as a workload checked
                    field.clean(getattr(workload, field.attname), workload)
        except ValidationError:
            return None
        if not ok:
            return None
        sets: list[tuple[PodSetShape, Flavor | None, tuple[Flavor, ...]]] = []
        for shape in registration.pod_sets:
            if shape not in self.pod_sets:
                self.pod_sets[shape] = self._pod_set(workload, shape)
            flavors = self.pod_sets[shape]
            if flavors is None:
                return None
            sets.append((shape, *flavors))
        total = sum(shape.count for shape in registration.pod_sets)
        if not sets or (registration.min_member or 0) > total:
            return None
        return _Checked(registration, queue, klass, protected, tuple(sets))

    @staticmethod
    def _workload(workload: Workload) -> bool:
        """``Workload``'s field rules (related rows were just read: no SELECT each) and its
        ``clean`` rules; inner queues took the slow path. ``ValidationError`` when a field's
        rule refuses it."""
        workload.clean_fields(exclude=_RELATIONS)
        return not workload.rule_errors(queue_has_children=False)

    def _pod_set(
        self, workload: Workload, shape: PodSetShape
    ) -> tuple[Flavor | None, tuple[Flavor, ...]] | None:
        """The shape's flavor and further choices, or None when ``PodSet``'s rules refuse it."""
        try:
            pod_set, choices = _checked_pod_set(workload, shape, self.flavors)
        except ValidationError:
            return None
        if pod_set.flavor_choices_errors(choices):
            return None
        return pod_set.flavor, tuple(choices)


def _insert_registered(checked: Sequence[_Checked], at: datetime) -> list[Registered]:
    """Insert checked registrations in bulk: workloads, pod sets, flavor choices, their
    ``submitted`` transitions, and one audit row for them all. On PostgreSQL the rows' ids are
    drawn from their sequences in one statement and the rows go in by ``COPY`` (a statement a
    table, no model instance or SQL text per row: ``PendingRegistrations``); elsewhere by
    ``bulk_create``."""
    if connection.vendor == "postgresql":
        return PendingRegistrations.draw(checked, at).write()
    workload_ids, pod_set_ids, stamps = _insert_with_models(checked)
    made = _registered(checked, workload_ids, _per_workload(checked, pod_set_ids), stamps)
    _audit_registered(made, at)
    return made


@dataclass(frozen=True, slots=True)
class PendingRegistrations:
    """Checked registrations with the ids drawn for their rows (PostgreSQL), not yet
    inserted: ``write`` inserts them, in the transaction it is called in."""

    checked: Sequence[_Checked]
    workload_ids: Sequence[int]
    pod_set_ids: Sequence[tuple[int, ...]]  # each workload's pod sets'
    at: datetime  # the sync's time (the audit row's reason names it)

    @classmethod
    def draw(cls, checked: Sequence[_Checked], at: datetime) -> PendingRegistrations:
        """The ids for their rows, from the tables' sequences (one statement, no transaction
        needed: a sequence never gives an id twice, and one drawn and not used is a gap)."""
        workload_ids, pod_set_ids = _draw_ids(len(checked), sum(len(c.pod_sets) for c in checked))
        return cls(checked, workload_ids, _per_workload(checked, pod_set_ids), at)

    def unwritten(self) -> list[Registered]:
        """What ``write`` will insert, as ``Registered`` without its stamp (the loop plans
        on it before the rows are written)."""
        return _registered(
            self.checked, self.workload_ids, self.pod_set_ids, [None] * len(self.checked)
        )

    def taken(self) -> set[WorkloadKey]:
        """The names of these registrations that a workload holds now (one query): taken
        since the sync checked them (a workload submitted through the API meanwhile)."""
        keys = {entry.registration.key for entry in self.checked}
        rows = Workload.objects.filter(
            namespace__in={key.namespace for key in keys}, name__in={key.name for key in keys}
        ).values_list("namespace", "name")
        return {key for row in rows if (key := WorkloadKey(*row)) in keys}

    def without(self, keys: Collection[WorkloadKey]) -> PendingRegistrations:
        """These registrations less those of ``keys`` (the others keep their drawn ids)."""
        kept = [i for i, entry in enumerate(self.checked) if entry.registration.key not in keys]
        return PendingRegistrations(
            [self.checked[i] for i in kept],
            [self.workload_ids[i] for i in kept],
            [self.pod_set_ids[i] for i in kept],
            self.at,
        )

    def write(self) -> list[Registered]:
        """Insert the rows by ``COPY`` and audit them; the ``Registered`` with their stamp."""
        stamp = timezone.now()  # ``updated_at``, as ``auto_now`` stamps it
        with connection.wrap_database_errors:  # COPY's errors as Django's (IntegrityError)
            _copy_registered(self.checked, self.workload_ids, self.pod_set_ids, stamp)
        made = _registered(
            self.checked, self.workload_ids, self.pod_set_ids, [stamp] * len(self.checked)
        )
        _audit_registered(made, self.at)
        return made


def _per_workload(checked: Sequence[_Checked], pod_set_ids: Sequence[int]) -> list[tuple[int, ...]]:
    """Pod set ids in order, cut into each registration's own."""
    drawn = iter(pod_set_ids)
    return [tuple(next(drawn) for _ in entry.pod_sets) for entry in checked]


def _registered(
    checked: Sequence[_Checked],
    workload_ids: Sequence[int],
    pod_set_ids: Sequence[tuple[int, ...]],
    stamps: Sequence[datetime | None],
) -> list[Registered]:
    return [
        Registered(
            registration=entry.registration,
            workload_id=workload_id,
            pod_set_ids=sets,
            priority_class=entry.klass.name,
            protected_runtime_s=entry.protected_runtime_s,
            stamp=stamp,
        )
        for entry, workload_id, sets, stamp in zip(
            checked, workload_ids, pod_set_ids, stamps, strict=True
        )
    ]


def _audit_registered(made: Sequence[Registered], at: datetime) -> None:
    """One audit row for the workloads a sync registered in bulk."""
    first = made[0].registration.key
    record_audit_event(
        acting_user=None,
        action="control.register_workloads",
        instance=Workload(pk=made[0].workload_id, namespace=first.namespace, name=first.name),
        before=None,
        after={
            "workloads": len(made),
            "names": [str(m.registration.key) for m in made[:50]],
            "at": at.isoformat(),  # when, on the pool's clock (a demo's runs ahead of the row's)
        },
        # No moment in the words: the row's own time says when, in the reader's zone.
        reason="pods made outside gpupool, registered by the cluster sync",
    )


def _draw_ids(workloads: int, pod_sets: int) -> tuple[list[int], list[int]]:
    """Ids for that many new workloads and pod sets, from their tables' sequences (PostgreSQL,
    one statement)."""
    draw = "ARRAY(SELECT nextval(pg_get_serial_sequence(%s, 'id')) FROM generate_series(1, %s))"
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {draw}, {draw}",
            [Workload._meta.db_table, workloads, PodSet._meta.db_table, pod_sets],
        )
        workload_ids, pod_set_ids = cursor.fetchone()
    return list(workload_ids), list(pod_set_ids)


def _copy_registered(
    checked: Sequence[_Checked],
    workload_ids: Sequence[int],
    pod_set_ids: Sequence[tuple[int, ...]],
    stamp: datetime,
) -> None:
    """The rows of checked registrations, with their drawn ids, by ``COPY`` (PostgreSQL)."""
    insert_values(
        Workload,
        ("id", "name", "namespace", "queue_id", "priority_class_id", "min_member", "topology",
         "protected_runtime_s", "expected_runtime_s", "state", "submitted_at", "origin",
         "controller_kind", "controller_name", "updated_at"),
        [
            (pk, c.registration.key.name, c.registration.key.namespace, c.queue.pk, c.klass.pk,
             c.registration.min_member, c.registration.topology, c.protected_runtime_s,
             c.registration.expected_runtime_s, WorkloadState.PENDING,
             c.registration.submitted_at, c.registration.origin,
             c.registration.controller_kind, c.registration.controller_name, stamp)
            for pk, c in zip(workload_ids, checked, strict=True)
        ],
    )  # fmt: skip
    rows = [
        (set_id, workload_id, shape, flavor, choices)
        for workload_id, c, set_ids in zip(workload_ids, checked, pod_set_ids, strict=True)
        for set_id, (shape, flavor, choices) in zip(set_ids, c.pod_sets, strict=True)
    ]
    insert_values(
        PodSet,
        ("id", "workload_id", "name", "count", "gpus", "flavor_id", "gpu_milli", "cpu",
         "memory_gb"),
        [
            (set_id, workload_id, shape.name, shape.count, shape.gpus,
             None if flavor is None else flavor.pk, shape.gpu_milli, shape.cpu, shape.memory_gb)
            for set_id, workload_id, shape, flavor, _ in rows
        ],
    )  # fmt: skip
    further = [
        (set_id, rank, flavor.pk)
        for set_id, _, _, _, choices in rows
        for rank, flavor in enumerate(choices, start=1)
    ]
    if further:
        insert_values(PodSetFlavorChoice, ("pod_set_id", "rank", "flavor_id"), further)
    insert_values(
        WorkloadTransition,
        ("workload_id", "from_state", "to_state", "at", "reason"),
        [
            (pk, "", WorkloadState.PENDING, c.registration.submitted_at, "submitted")
            for pk, c in zip(workload_ids, checked, strict=True)
        ],
    )


def _insert_with_models(
    checked: Sequence[_Checked],
) -> tuple[list[int], list[int], list[datetime]]:
    """The rows of checked registrations by ``bulk_create`` (not PostgreSQL: SQLite); the
    ids of the workloads and of their pod sets, in order, and the workloads' stamps."""
    workloads = [
        _unsaved_workload(c.registration, c.queue, c.klass, c.protected_runtime_s) for c in checked
    ]
    Workload.objects.bulk_create(workloads)  # stamps each ``updated_at`` (``auto_now``)
    pod_sets: list[tuple[PodSet, tuple[Flavor, ...]]] = [
        (_unsaved_pod_set(workload, shape, flavor), choices)
        for workload, c in zip(workloads, checked, strict=True)
        for shape, flavor, choices in c.pod_sets
    ]
    PodSet.objects.bulk_create([pod_set for pod_set, _ in pod_sets])
    PodSetFlavorChoice.objects.bulk_create(
        PodSetFlavorChoice(pod_set=pod_set, rank=rank, flavor=flavor)
        for pod_set, choices in pod_sets
        for rank, flavor in enumerate(choices, start=1)
    )
    WorkloadTransition.objects.bulk_create(
        WorkloadTransition(
            workload=workload,
            from_state="",
            to_state=WorkloadState.PENDING,
            at=workload.submitted_at,
            reason="submitted",
        )
        for workload in workloads
    )
    return [w.pk for w in workloads], [p.pk for p, _ in pod_sets], [w.updated_at for w in workloads]


def _replace_pod_sets(
    replaced: Mapping[int, tuple[Sequence[PodSetShape], int | None]],
    flavors: Mapping[int, Flavor],
) -> None:
    """Pending workloads from the cluster whose pods changed (a gang whose members arrive one
    by one): their pod sets again, and their gang minimum, in a few statements for them all.
    Each row is checked in Python by its model's own field and ``clean`` rules (the shapes
    come from the pods' parsed annotations; the database's constraints still hold); a row
    they refuse raises ``ValidationError`` naming the workload, as ``full_clean`` did."""
    if not replaced:
        return
    workloads = Workload.objects.in_bulk(list(replaced))
    pod_sets: list[PodSet] = []
    choices: list[tuple[PodSet, list[Flavor]]] = []
    now = timezone.now()
    for workload_id, (shapes, min_member) in replaced.items():
        workload = workloads[workload_id]
        total = sum(shape.count for shape in shapes)
        workload.min_member = min_member
        try:
            workload.clean_fields(exclude=_RELATIONS)
            if min_member is not None and min_member > total:
                raise ValidationError(
                    {
                        "min_member": f"min_member ({min_member}) exceeds the workload's "
                        f"{counted(total, 'pod')}"
                    }
                )
            for shape in shapes:
                pod_set, further = _checked_pod_set(workload, shape, flavors)
                pod_sets.append(pod_set)
                choices.append((pod_set, further))
        except ValidationError as error:
            raise ValidationError(f"{workload.qualified_name}: {error}") from error
    PodSet.objects.filter(workload_id__in=list(replaced)).delete()
    PodSet.objects.bulk_create(pod_sets)
    PodSetFlavorChoice.objects.bulk_create(
        PodSetFlavorChoice(pod_set=pod_set, rank=rank, flavor=flavor)
        for pod_set, further in choices
        for rank, flavor in enumerate(further, start=1)
    )
    update_rows(
        Workload,
        ["min_member", "updated_at"],
        {workload_id: (min_member, now) for workload_id, (_, min_member) in replaced.items()},
    )


# What a thinned hour of the cycle log keeps: for each part of the record that a chart over
# time reads (``queries.sampled_cycles``), the last succeeded cycle of the hour that has it.
KEPT_PARTS = ("queues", "fragmentation")


def do_thin_cycles(
    *, before: datetime, batch: int = 5_000, batches: int = 10, page: int = 20_000
) -> int:
    """Thin the cycle log before ``before`` (rounded down to the hour) to what the pages and
    ``/metrics`` read of it, oldest hours first; returns how many rows went. An hour keeps,
    for each of ``KEPT_PARTS``, its last succeeded cycle with that part of the record (the
    point a chart over time draws for the hour); the newest cycle of each kind that something
    reads the last of (any, finished, succeeded, not skipped, carrying the counters) is kept
    whatever its age. Preemption events keep their data and lose their link to a deleted
    cycle. Bounded: the old rows are read ``page`` at a time (their ids, hours and parts; the
    hours already thinned are a few rows each), decided on whole hours only, and at most
    ``batch * batches`` are deleted, ``batch`` per transaction; the next call goes on."""
    before = _hour_of(before)
    cycles = SchedulingCycle.objects.all()
    latest = cycles.order_by("-started_at", "-id").values_list("id", flat=True)
    newest = {
        latest.first(),
        latest.filter(finished_at__isnull=False).first(),
        latest.filter(status=CycleStatus.SUCCEEDED).first(),
        latest.exclude(status=CycleStatus.SKIPPED).first(),
        latest.exclude(totals={}).first(),
    }
    old = (
        cycles.filter(started_at__lt=before)
        .annotate(
            **{
                f"has_{part}": ExpressionWrapper(Q(outcome__has_key=part), BooleanField())
                for part in KEPT_PARTS
            }
        )
        .order_by("started_at", "id")
        .values_list("id", "started_at", "status", *(f"has_{part}" for part in KEPT_PARTS))
    )
    limit = batch * batches
    doomed: list[int] = []
    since: datetime | None = None  # the hours before it are decided
    while len(doomed) < limit:
        unread = old if since is None else old.filter(started_at__gte=since)
        rows = list(unread[:page])
        if len(rows) < page:  # every old row read: their hours are whole
            doomed += _thinned(rows, newest)
            break
        since = _hour_of(rows[-1][1])  # the last hour read may go on: read again from it
        rows = [row for row in rows if row[1] < since]
        if not rows:  # one hour of more than a page of cycles: read it whole
            since += timedelta(hours=1)
            rows = list(unread.filter(started_at__lt=since))
        doomed += _thinned(rows, newest)
    deleted = 0
    for start in range(0, min(len(doomed), limit), batch):
        ids = doomed[start : start + batch]
        with transaction.atomic():
            PreemptionEvent.objects.filter(cycle_id__in=id_list(ids)).update(cycle=None)
            gone, _ = SchedulingCycle.objects.filter(id__in=id_list(ids)).only("id").delete()
            deleted += gone
    return deleted


def _hour_of(at: datetime) -> datetime:
    return at.replace(minute=0, second=0, microsecond=0)


def _thinned(rows: Sequence[tuple[Any, ...]], newest: set[int | None]) -> list[int]:
    """Of whole hours of the cycle log (id, start, status, has each of ``KEPT_PARTS``, by
    start), the ids that go: all but the hours' last succeeded cycle of each part and
    ``newest``."""
    kept: dict[tuple[datetime, int], int] = {}  # (hour, part) -> its last cycle with it
    for cycle_id, started_at, status, *has in rows:
        if status == CycleStatus.SUCCEEDED:
            hour = _hour_of(started_at)
            for part, present in enumerate(has):
                if present:
                    kept[hour, part] = cycle_id  # by start: the last one stays
    keep = newest | set(kept.values())
    return [row[0] for row in rows if row[0] not in keep]


@transaction.atomic
def do_record_cluster_sync(
    decision: SyncDecision,
    *,
    budget_moves: Sequence[BudgetMove] = (),
    stamps: Stamps | None = None,
    registered: list[Registered] | None = None,
    flavors: Mapping[int, Flavor] | None = None,
    policy: RegistrationPolicy | None = None,
) -> list[str]:
    """Write what the cluster said (and the budget moves of the work that stopped); returns
    complaints about pods that could not become workloads (refused by the slow path's checks,
    or by the database: a name taken between its check and its insert; the others are
    registered all the same). ``stamps``, when given, receives the rows the pod-driven
    transitions wrote (``Stamps``); ``registered`` the workloads
    registered in bulk (``Registered``: those registered one by one are not in it).
    ``flavors``: every flavor by id, as the caller read them this cycle (else read here);
    ``policy``: the rows registrations are checked against, as the caller holds them (else
    read here)."""
    at = decision.at
    do_record_budget_moves(budget_moves, at=at)
    if flavors is None:
        flavors = {f.pk: f for f in Flavor.objects.all()}
    for update in _add_nodes(decision.nodes, flavors, at):
        _sync_node(update, flavors, at)
    if decision.gone:
        do_mark_nodes_gone(decision.gone, at=at)
    complaints: list[str] = []
    for registration in _register_all(
        decision.registrations, flavors, at, registered, policy=policy
    ):
        try:
            with transaction.atomic():
                _register(registration, flavors)
        except (ValidationError, Queue.DoesNotExist, PriorityClass.DoesNotExist) as error:
            complaints.append(f"{registration.key}: {error}")
        except IntegrityError as error:  # its name taken between the check and the insert
            complaints.append(f"{registration.key}: refused by the database: {error}")
    _replace_pod_sets(decision.pod_sets, flavors)
    _record_steps(decision.steps, at, stamps)
    _record_shrinks(decision.shrinks)
    if decision.checkpoints:
        update_rows(
            Workload,
            ["last_checkpoint_at", "updated_at"],
            {pk: (moment, timezone.now()) for pk, moment in decision.checkpoints.items()},
        )
    check_deferred_constraints()
    return complaints


# What a workload's row looks like, for the bulk transitions of a sync.
_STEP_FIELDS = (
    "state",
    "admitted_at",
    "started_at",
    "finished_at",
    "evicting_for",
    "eviction_reason",
    "nominated",
    "idle_since",
    "updated_at",
)
_LEAVING = frozenset(
    {
        WorkloadState.PREEMPTED,
        WorkloadState.SUCCEEDED,
        WorkloadState.FAILED,
        WorkloadState.CANCELLED,
    }
)
_ENDED = frozenset({WorkloadState.SUCCEEDED, WorkloadState.FAILED, WorkloadState.CANCELLED})


def _record_steps(steps: Sequence[Step], at: datetime, stamps: Stamps | None = None) -> None:
    """The pod-driven transitions of many workloads at once, as ``do_transition_workload``
    makes each: the state machine checked step by step from the stored state, placements
    released when the work is preempted or cancelled, usage closed when it stops holding GPUs,
    a preemption event for work lost without an eviction."""
    if not steps:
        return
    ids = sorted({step.workload_id for step in steps})
    before: dict[int, datetime] = {}
    current = {}
    for pk, updated_at, *values in values_timed(
        Workload.objects.select_for_update(of=("self",)).filter(pk__in=id_list(ids)),
        "id",
        "updated_at",
        "id",
        *(f if f != "evicting_for" else "evicting_for_id" for f in _STEP_FIELDS[:-1]),
        "queue_id",
        "queue__tenant_id",
        "last_checkpoint_at",
        "submitted_at",
    ):
        before[pk] = updated_at
        current[pk] = dict(
            zip(
                ("id", *_STEP_FIELDS[:-1], "queue_id", "tenant_id", "checkpoint", "submitted"),
                values,
                strict=True,
            )
        )
    transitions: list[tuple[int, str, str, datetime, str]] = []  # as ``insert_values`` takes
    released: set[int] = set()
    leaving: set[int] = set()
    lost: dict[int, str] = {}
    for step in steps:
        row = current[step.workload_id]
        allowed = ALLOWED_TRANSITIONS.get(row["state"], frozenset())
        if step.to_state not in allowed:
            raise ValidationError(
                {"state": f"{step.name} is {row['state']}; it cannot move to {step.to_state}"}
            )
        # Never before what the row holds (its submission, admission, start): a submitter's
        # clock ahead of the cluster's, or work admitted at its submission, after the moment
        # of the cycle that admitted it (``_record_admissions``).
        when = max(step.at, *(row[f] for f in ("submitted", "admitted_at", "started_at") if row[f]))
        transitions.append((step.workload_id, row["state"], step.to_state, when, step.reason[:500]))
        if step.lost:
            lost[step.workload_id] = step.lost
            row["lost_start"] = row["started_at"] or row["admitted_at"]
        row["state"] = step.to_state
        if step.to_state == WorkloadState.RUNNING:
            row["started_at"] = when
        if step.to_state in (
            WorkloadState.PREEMPTED,
            WorkloadState.CANCELLED,
            WorkloadState.PENDING,
        ):
            released.add(step.workload_id)
        if step.to_state == WorkloadState.PENDING:
            row["admitted_at"] = row["started_at"] = None
        if step.to_state in _ENDED or step.ends:  # (a preemption not requeued ends it)
            row["finished_at"] = when
        if step.to_state in _LEAVING or step.to_state == WorkloadState.PENDING:
            # Back to pending it holds nothing either (a requeue: its usage closes). Its
            # idle spell ends with its hold on the GPUs (the sampler's, written while placed).
            leaving.add(step.workload_id)
            row["evicting_for"], row["eviction_reason"], row["nominated"] = None, "", False
            row["idle_since"] = None
    if lost:
        _record_losses(lost, current, at)
    stamp = timezone.now()
    update_rows(
        Workload,
        list(_STEP_FIELDS),
        {pk: (*(row[f] for f in _STEP_FIELDS[:-1]), stamp) for pk, row in current.items()},
    )
    _stamped(stamps, before, stamp)
    insert_values(
        WorkloadTransition, ("workload_id", "from_state", "to_state", "at", "reason"), transitions
    )
    if leaving:
        UsageInterval.objects.filter(
            workload_id__in=id_list(leaving), ended_at__isnull=True
        ).update(ended_at=at)
    if released:
        Placement.objects.filter(workload_id__in=id_list(released)).delete()


def _record_shrinks(shrinks: Sequence[Shrink]) -> None:
    """Elastic gangs that go on with the pods left (``sync.Shrink``): the placements of the
    pods gone deleted and those kept renumbered as the first of their pod sets; their open
    usage closed at the shrink and opened again for the GPUs they still hold, per flavor (as
    an admission opens it). The rows are stamped anew but not in the loop's ``Stamps``: the
    loop reads them again, placements and all, at its next refresh. A workload no longer
    placed, or whose placements are not those the sync saw, is left alone. Members lost as a
    gang lost whole would be -- with their node, or evicted outside gpupool -- cost what such
    a gang does: a preemption event of theirs (``_record_shrink_losses``)."""
    if not shrinks:
        return
    rows = {
        pk: (queue, tenant, klass, started or admitted, checkpoint)
        for pk, queue, tenant, klass, started, admitted, checkpoint in (
            Workload.objects.select_for_update(of=("self",))
            .filter(
                pk__in=id_list([s.workload_id for s in shrinks]),
                state__in=(WorkloadState.ADMITTED, WorkloadState.RUNNING),
            )
            .values_list(
                "id",
                "queue_id",
                "queue__tenant_id",
                "priority_class_id",
                "started_at",
                "admitted_at",
                "last_checkpoint_at",
            )
        )
    }
    reopened: list[Reopened] = []
    gone: list[tuple[Shrink, list[tuple[int, Decimal]]]] = []  # each, its lost (node, GPUs)
    for shrink in shrinks:
        pk = shrink.workload_id
        if pk not in rows:
            continue
        placed = {
            (pod_set, index): (row_id, flavor, milli, indices, node)
            for row_id, pod_set, index, flavor, milli, indices, node in Placement.objects.filter(
                workload_id=pk
            ).values_list(
                "id",
                "pod_set_id",
                "pod_index",
                "node__flavor_id",
                "milli",
                "gpu_indices",
                "node_id",
            )
        }
        kept = {(pod_set, index): new for pod_set, index, new in shrink.keep}
        if not kept.keys() <= placed.keys():
            continue
        lost = [v for k, v in placed.items() if k not in kept]
        gone.append((shrink, [(v[4], _gpus(v[2], v[3])) for v in lost]))  # (node, GPUs)
        Placement.objects.filter(pk__in=[v[0] for v in lost]).delete()
        held: dict[int, Decimal] = defaultdict(Decimal)
        for (pod_set, index), new in sorted(kept.items()):  # a lower index is free by then
            row_id, flavor, milli, indices, _ = placed[pod_set, index]
            if new != index:
                Placement.objects.filter(pk=row_id).update(pod_index=new)
            held[flavor] += _gpus(milli, indices)
        queue, tenant, klass = rows[pk][:3]
        reopened.append(Reopened(pk, shrink.at, queue, tenant, klass, tuple(sorted(held.items()))))
    if not reopened:
        return
    _reopen_usage(reopened)
    Workload.objects.filter(pk__in=id_list([r.workload_id for r in reopened])).update(
        updated_at=timezone.now()
    )
    _record_shrink_losses(gone, rows)


@dataclass(frozen=True, slots=True)
class Reopened:
    """A placed workload whose GPUs changed while it runs (an elastic gang shrunk or grown):
    its open usage closes at ``at`` and opens again for ``held`` (flavor id, GPUs)."""

    workload_id: int
    at: datetime
    queue_id: int
    tenant_id: int | None
    priority_class_id: int | None
    held: tuple[tuple[int, Decimal], ...]


def _reopen_usage(reopened: Sequence[Reopened]) -> None:
    """Close each workload's open usage at its moment and open it again for the GPUs it holds
    now, per flavor (as an admission opens it): a shrink's (``_record_shrinks``) and a
    growth's (``_record_growths``)."""
    for entry in reopened:
        UsageInterval.objects.filter(workload_id=entry.workload_id, ended_at__isnull=True).update(
            ended_at=entry.at
        )
    columns = ("workload_id", "tenant_id", "queue_id", "flavor_id", "priority_class_id")
    insert_values(
        UsageInterval,
        (*columns, "gpus", "started_at"),
        [
            (e.workload_id, e.tenant_id, e.queue_id, flavor, e.priority_class_id,
             gpus.quantize(Decimal("0.001")), e.at)
            for e in reopened
            for flavor, gpus in e.held
        ],
    )  # fmt: skip


def _gpus(milli: int | None, indices: Sequence[int]) -> Decimal:
    """The GPUs one placement holds: its share of one GPU, or its whole GPUs."""
    return Decimal(milli) / 1000 if milli is not None else Decimal(len(indices))


def _record_shrink_losses(
    gone: Sequence[tuple[Shrink, Sequence[tuple[int, Decimal]]]],
    rows: Mapping[int, tuple[Any, ...]],
) -> None:
    """Shrunk gangs whose members were lost as a gang lost whole would be (``Shrink.lost``:
    a node failure, or an eviction outside gpupool; not a deletion): a preemption event for
    those members, as ``_record_losses`` writes for a gang lost whole -- its reason, the GPUs
    the members held, and their GPU-hours since the gang's start or last checkpoint;
    ``nodes``: the nodes the members held."""
    losses = [(shrink, lost) for shrink, lost in gone if lost and shrink.lost in _LOST_REASONS]
    if not losses:
        return
    names = dict(
        Node.objects.filter(
            pk__in=id_list(sorted({node for _, lost in losses for node, _ in lost}))
        ).values_list("id", "name")
    )
    events = []
    for shrink, lost in losses:
        queue, tenant, _, start, checkpoint = rows[shrink.workload_id]
        start = start or shrink.at
        since = max(start, checkpoint or start)
        hours = Decimal(max((shrink.at - since).total_seconds(), 0.0)) / Decimal(3600)
        held = sum((gpus for _, gpus in lost), Decimal(0))
        events.append(
            PreemptionEvent(
                at=shrink.at,
                reason=shrink.lost,
                victim_id=shrink.workload_id,
                victim_queue_id=queue,
                victim_tenant_id=tenant,
                gpus_freed=held,
                lost_gpu_hours=(held * hours).quantize(Decimal("0.0001")),
                nodes=sorted({names[node] for node, _ in lost if node in names}),
            )
        )
    insert_objects(PreemptionEvent, events)


# The ways of losing pods that cost a preemption event (``sync._vanished``): not a deletion.
_LOST_REASONS = frozenset({NODE_FAILURE, ADMIN})


def _record_losses(
    lost: Mapping[int, str], rows: Mapping[int, dict[str, Any]], at: datetime
) -> None:
    """Work that vanished without an eviction: preemption events with what it lost (GPU-hours
    since its start or last checkpoint) and ``nodes``, the nodes it ran on, as its placements
    held them (read before ``_record_steps`` releases them): a failed node among them."""
    gpus: dict[int, Decimal] = {}
    nodes: dict[int, set[str]] = {}
    for workload_id, milli, indices, node in Placement.objects.filter(
        workload_id__in=list(lost)
    ).values_list("workload_id", "milli", "gpu_indices", "node__name"):
        gpus[workload_id] = gpus.get(workload_id, Decimal(0)) + _gpus(milli, indices)
        nodes.setdefault(workload_id, set()).add(node)
    events = []
    for pk, reason in lost.items():
        row = rows[pk]
        start = row.get("lost_start") or at
        since = max(start, row["checkpoint"] or start)
        hours = Decimal(max((at - since).total_seconds(), 0.0)) / Decimal(3600)
        held = gpus.get(pk, Decimal(0))
        events.append(
            PreemptionEvent(
                at=at,
                reason=reason,
                victim_id=pk,
                victim_queue_id=row["queue_id"],
                victim_tenant_id=row["tenant_id"],
                gpus_freed=held,
                lost_gpu_hours=(held * hours).quantize(Decimal("0.0001")),
                nodes=sorted(nodes.get(pk, ())),
            )
        )
    insert_objects(PreemptionEvent, events)


# -- what the cycle decided -----------------------------------------------------------------

# The loop's own writes of workload rows: id -> (``updated_at`` before the write, the stamp
# written). The rows are locked (``SELECT ... FOR UPDATE``) when the first is read, so nothing
# else changes them before the commit: the loop's state can take what it wrote as the row's
# content, and skip reading the row again (``LoopState.own_writes``).
Stamps = dict[int, tuple[datetime, datetime]]
_T = TypeVar("_T")


def _stamped(stamps: Stamps | None, before: Mapping[int, datetime], stamp: datetime) -> None:
    """Note that the rows ``before`` (id -> their ``updated_at`` before) now carry ``stamp``;
    a row written twice in one transaction keeps the first ``before``."""
    if stamps is None:
        return
    for pk, previous in before.items():
        first = stamps.get(pk)
        stamps[pk] = (previous if first is None else first[0], stamp)


@transaction.atomic
def do_record_cycle(
    record: CycleRecord,
    *,
    started_at: datetime,
    nodes: int,
    workloads: int,
    budget_moves: Sequence[BudgetMove] = (),
    stamps: Stamps | None = None,
    quiet_stamps: Stamps | None = None,
    meanwhile: Callable[[], None] | None = None,
    registrations: PendingRegistrations | None = None,
    registered: list[Registered] | None = None,
    lost: list[Registered] | None = None,
) -> SchedulingCycle:
    """Write one cycle's decisions (``record.py``), its budget moves and its
    ``SchedulingCycle`` row. ``stamps``, when given, receives the workload rows written
    (``Stamps``): admissions, growths and evictions, and nominations unless ``quiet_stamps``
    is given, which then receives those (a nomination changes nothing the sync or apply look at);
    explanations do not stamp a row: no field of the core's is in them (a row both explained
    and nominated is written once, its nomination stamped). ``meanwhile``, when given, is
    called once, while the server writes the admissions (``_record_admissions``): Python of
    the caller's that must not use the database (the loop prepares its apply there); it runs
    inside the transaction, so what it prepares must wait for the commit to take effect.
    ``registrations``: workloads the sync checked without writing them
    (``defer_registrations``), written first; ``registered``, when given, receives them as
    written. One whose name a workload took since the sync checked it (submitted through the
    API meanwhile) is not written, and the cycle is recorded without it: every part of
    ``record`` that names it is taken out, in place (``_leave_out``: the caller's record then
    says what was written), with its budget moves; a warning names it, and ``lost``, when
    given, receives it (the caller forgets what it planned on it: its pods are seen again by
    the next sync, under the name's workload)."""
    at = record.at
    if registrations is not None:
        made, left_out = _write_registrations(registrations)
        if registered is not None:
            registered.extend(made)
        if left_out:
            ids = {entry.workload_id for entry in left_out}
            _leave_out(record, ids)
            budget_moves = [move for move in budget_moves if move.workload_id not in ids]
            logger.warning(
                "not registered, their names taken since the sync checked them: %s; the cycle "
                "is recorded without them",
                ", ".join(sorted(str(entry.registration.key) for entry in left_out)),
            )
            if lost is not None:
                lost.extend(left_out)
    cycle = SchedulingCycle.objects.create(
        started_at=started_at,
        cluster_at=at,  # the pool's clock (``control.clock``); started_at is the wall's
        status=CycleStatus.RUNNING,
        nodes=nodes,
        workloads=workloads,
        admitted=len(record.admissions),
        evicted=len(record.evictions),
        pending=sum(record.pending_by_reason.values()),
    )
    # The explanations' rows (their facts as JSON text) are built while the server admits.
    explained = _record_admissions(record, at, stamps, partial(_overlapped, record, meanwhile))
    _record_growths(record, at, stamps)
    _record_evictions(record, at, cycle, stamps)
    _record_explanations(record, stamps if quiet_stamps is None else quiet_stamps, explained)
    _record_idle_alerts(record, at)
    do_record_budget_moves(budget_moves, at=at)
    check_deferred_constraints()
    return cycle


def _write_registrations(
    pending: PendingRegistrations,
) -> tuple[list[Registered], list[Registered]]:
    """Write deferred registrations in a savepoint (its two statements are all the happy
    path adds): a name taken since the sync checked it fails the insert on the unique
    constraint, and then which names are taken is read (one query), their registrations are
    left out and the rest written again. Returns those written and those left out; an
    ``IntegrityError`` that no taken name explains is raised (the record fails, as ever)."""
    lost: list[Registered] = []
    while pending.checked:  # each retry leaves one out at least
        try:
            with transaction.atomic():
                return pending.write(), lost
        except IntegrityError:
            taken = pending.taken()
            if not taken:
                raise
            lost += [made for made in pending.unwritten() if made.registration.key in taken]
            pending = pending.without(taken)
    return [], lost


def _leave_out(record: CycleRecord, ids: Collection[int]) -> None:
    """Take every part of ``record`` that names the workloads ``ids`` out of it, in place:
    registrations not written, so no row of theirs is there to admit, evict for, nominate,
    explain, rank or alert about. An eviction for one of them goes too (its victim keeps
    running). The counts of pending work by reason stay the plan's: their pods still wait."""
    record.admissions = [a for a in record.admissions if a.workload_id not in ids]
    record.growths = [g for g in record.growths if g.workload_id not in ids]
    record.evictions = [
        e for e in record.evictions if e.victim_id not in ids and e.preemptor_id not in ids
    ]
    record.idle_alerts = [alert for alert in record.idle_alerts if alert.workload_id not in ids]
    record.new_reasons.difference_update(ids)
    for pk in ids:
        record.nominated.pop(pk, None)
        record.explanations.pop(pk, None)
        record.ranks.pop(pk, None)
        record.ranked.pop(pk, None)


def _overlapped(
    record: CycleRecord, meanwhile: Callable[[], None] | None
) -> dict[int, tuple[Any, ...]]:
    """What runs while the server writes the admissions: the explanations' rows are built,
    then the caller's ``meanwhile``."""
    explained = _explanation_rows(record)
    if meanwhile is not None:
        meanwhile()
    return explained


def _record_idle_alerts(record: CycleRecord, at: datetime) -> None:
    """Remember which idle spell each alerted workload was alerted about (so the next cycles
    do not alert again), with one audit row naming them; the mails and the pods' Events go
    out after the commit (``ControlLoop._alert_idle``)."""
    if not record.idle_alerts:
        return
    stamp = timezone.now()
    update_rows(
        Workload,
        ["idle_alerted_since", "updated_at"],
        {alert.workload_id: (alert.idle_since, stamp) for alert in record.idle_alerts},
    )
    first = Workload.objects.get(pk=record.idle_alerts[0].workload_id)
    record_audit_event(
        acting_user=None,
        action="control.idle_alerts",
        instance=first,
        before=None,
        after={
            "workloads": len(record.idle_alerts),
            "alerts": [
                {"workload": alert.name, "idle_since": alert.idle_since.isoformat()}
                for alert in record.idle_alerts[:50]
            ],
            "at": at.isoformat(),  # when, on the pool's clock (a demo's runs ahead of the row's)
        },
        # No moment in the words: the row's own time says when, in the reader's zone.
        reason="idle past their idle alert timeout",
    )


def _record_nominations(nominated: Mapping[int, bool], stamp: datetime) -> dict[int, datetime]:
    """Pending workloads nominated (or no longer), their rows locked and written; those no
    longer pending are left alone. Returns the rows written: id -> their ``updated_at``
    before the write. On PostgreSQL one statement locks, writes and returns them (the
    locking sub-select gives each row's latest ``updated_at``, as ``SELECT ... FOR UPDATE``
    before the write did); elsewhere the lock, then one write per value."""
    if not nominated:
        return {}
    if connection.vendor == "postgresql":
        table = connection.ops.quote_name(Workload._meta.db_table)
        ids = list(nominated)
        with connection.cursor() as cursor:
            cursor.execute(
                f"UPDATE {table} AS w SET nominated = t.value, updated_at = %s "  # noqa: S608
                "FROM unnest(%s::bigint[], %s::boolean[]) AS t(id, value) "
                f"JOIN (SELECT id, updated_at FROM {table} WHERE id = ANY(%s::bigint[]) "
                "AND state = %s FOR UPDATE) AS old ON old.id = t.id "
                "WHERE w.id = t.id RETURNING w.id, old.updated_at",
                [stamp, int_array(ids), [nominated[pk] for pk in ids], int_array(ids),
                 WorkloadState.PENDING],
            )  # fmt: skip
            return dict(cursor.fetchall())
    before: dict[int, datetime] = dict(
        Workload.objects.select_for_update()
        .filter(pk__in=id_list(list(nominated)), state=WorkloadState.PENDING)
        .values_list("id", "updated_at")
    )
    for value in (True, False):
        ids = [pk for pk in before if nominated[pk] is value]
        if ids:
            Workload.objects.filter(pk__in=id_list(ids)).update(nominated=value, updated_at=stamp)
    return before


def _late_admissions(submitted: Mapping[int, datetime], at: datetime) -> dict[int, datetime]:
    """The admitted workloads submitted after the cycle's moment ``at``: id -> their
    submission, the moment of their admission (none before it; rare, so the rest go on at
    ``at`` alone)."""
    return {pk: moment for pk, moment in submitted.items() if moment > at}


def _moment_of(late: Mapping[int, datetime], at: datetime) -> datetime | Case:
    """``admitted_at`` of one update of many rows: ``at``, or each late row's own moment."""
    if not late:
        return at
    return Case(
        *(When(pk=pk, then=Value(moment)) for pk, moment in sorted(late.items())),
        default=Value(at),
        output_field=DateTimeField(),
    )


def _record_admissions(
    record: CycleRecord, at: datetime, stamps: Stamps | None, meanwhile: Callable[[], _T]
) -> _T:
    """Admit: the rows locked and checked to be pending, their placements, transitions and
    usage inserted, then the rows updated. Returns ``meanwhile()``: Python run while the
    server executes the update (``bulk.overlapped``; at once when nothing is admitted).

    The cycle reads its clock (``at``) before it reads the pending work: a submission that
    landed in between, stamped after ``at``, is admitted (``admitted_at`` and its transition)
    at its own submission, never before it (``_late_admissions``). Its placements and usage
    keep the cycle's moment, as the loop's budget book, the ledger and a bind failure's close
    of the usage count them."""
    admitted = [a.workload_id for a in record.admissions]
    if not admitted:
        return meanwhile()
    before: dict[int, datetime] = {}
    rows = {}
    submitted: dict[int, datetime] = {}
    for pk, updated_at, queue, tenant, klass, submitted_at in (
        Workload.objects.select_for_update(of=("self",))
        .filter(pk__in=id_list(admitted), state=WorkloadState.PENDING)
        .values_list(
            "id", "updated_at", "queue_id", "queue__tenant_id", "priority_class_id", "submitted_at"
        )
    ):
        before[pk] = updated_at
        rows[pk] = (queue, tenant, klass)
        submitted[pk] = submitted_at
    missing = sorted(set(admitted) - set(rows))
    if missing:
        raise ValidationError({"state": f"workloads {missing} are not pending: not admitted"})
    # Most are admitted at ``at``; those submitted after it, at their submission.
    late = _late_admissions(submitted, at)
    insert_values(
        Placement,
        ("workload_id", "pod_set_id", "pod_index", "node_id", "gpu_indices", "milli", "created_at"),
        [
            (
                admission.workload_id,
                pod.pod_set_id,
                pod.pod_index,
                pod.node_id,
                list(pod.gpu_indices),
                pod.milli,
                at,
            )
            for admission in record.admissions
            for pod in admission.pods
        ],
    )
    insert_values(
        WorkloadTransition,
        ("workload_id", "from_state", "to_state", "at", "reason"),
        [
            (
                pk,
                WorkloadState.PENDING,
                WorkloadState.ADMITTED,
                late.get(pk, at),
                "admitted: quota and capacity allow it",
            )
            for pk in admitted
        ],
    )
    insert_values(
        UsageInterval,
        (
            "workload_id",
            "tenant_id",
            "queue_id",
            "flavor_id",
            "priority_class_id",
            "gpus",
            "started_at",
        ),
        [
            (
                admission.workload_id,
                rows[admission.workload_id][1],
                rows[admission.workload_id][0],
                flavor_id,
                rows[admission.workload_id][2],
                gpus,
                at,
            )
            for admission in record.admissions
            for flavor_id, gpus in admission.usage
        ],
    )
    stamp = timezone.now()
    # Admitted work waits no more: its explanation goes (none, at a first cycle's start).
    WorkloadExplanation.objects.filter(workload_id__in=id_list(admitted)).delete()
    with overlapped():
        # The inserts' keys are checked while the admitted rows are still the versions this
        # record locked (``FOR UPDATE``): a check finds its row locked already, where after
        # the update it would lock the new version (a write of the row); and the server
        # checks, then updates, while the next rows are built (``meanwhile``).
        check_constraints_now()
        Workload.objects.filter(pk__in=id_list(admitted)).update(
            state=WorkloadState.ADMITTED,
            admitted_at=_moment_of(late, at),
            nominated=False,
            # A checkpoint of an earlier run is no progress of this one.
            last_checkpoint_at=None,
            estimated_start_at=None,
            updated_at=stamp,
        )
        prepared = meanwhile()
    _stamped(stamps, before, stamp)
    return prepared


def _record_growths(record: CycleRecord, at: datetime, stamps: Stamps | None) -> None:
    """Running elastic gangs that add pods (``Plan.grow``): the rows locked and checked to be
    placed (running, or admitted with their pods on their way: the core's "running"); the
    added pods' placements inserted (numbered as the snapshot reads them, the next pods of
    their pod sets); the open usage closed at ``at`` and opened again for all the GPUs each
    now holds, per flavor (``_reopen_usage``, as a shrink's); the rows stamped. The state does
    not change, so the history is no transition but an audit row of the workload
    (``control.grow_workload``: the pods it ran and runs, and why in words). Its pods are
    bound by apply, after the commit."""
    if not record.growths:
        return
    grown = [g.workload_id for g in record.growths]
    before: dict[int, datetime] = {}
    rows: dict[int, tuple[int, int | None, int | None, str, str]] = {}
    for pk, updated_at, queue, tenant, klass, namespace, name in (
        Workload.objects.select_for_update(of=("self",))
        .filter(pk__in=id_list(grown), state__in=(WorkloadState.ADMITTED, WorkloadState.RUNNING))
        .values_list(
            "id",
            "updated_at",
            "queue_id",
            "queue__tenant_id",
            "priority_class_id",
            "namespace",
            "name",
        )
    ):
        before[pk] = updated_at
        rows[pk] = (queue, tenant, klass, namespace, name)
    missing = sorted(g.name for g in record.growths if g.workload_id not in rows)
    if missing:
        raise ValidationError({"state": f"workloads {missing} are not placed: not grown"})
    insert_values(
        Placement,
        ("workload_id", "pod_set_id", "pod_index", "node_id", "gpu_indices", "milli", "created_at"),
        [
            (g.workload_id, pod.pod_set_id, pod.pod_index, pod.node_id, list(pod.gpu_indices),
             pod.milli, at)
            for g in record.growths
            for pod in g.pods
        ],
    )  # fmt: skip
    _reopen_usage(
        [Reopened(g.workload_id, at, *rows[g.workload_id][:3], g.usage) for g in record.growths]
    )
    stamp = timezone.now()
    Workload.objects.filter(pk__in=id_list(grown)).update(updated_at=stamp)
    _stamped(stamps, before, stamp)
    record_system_audit_rows(
        GROW_ACTION,
        (
            ("workloads.workload", str(g.workload_id), rows[g.workload_id][4],
             {"pods": g.ran}, {"pods": g.runs}, g.reason)
            for g in record.growths
        ),
        at=at,
    )  # fmt: skip


def _record_evictions(
    record: CycleRecord, at: datetime, cycle: SchedulingCycle, stamps: Stamps | None
) -> None:
    if not record.evictions:
        return
    victims = {e.victim_id for e in record.evictions}
    ids = victims | {e.preemptor_id for e in record.evictions if e.preemptor_id is not None}
    before: dict[int, datetime] = {}
    facts = {}
    for pk, updated_at, state, queue, tenant in (
        Workload.objects.select_for_update(of=("self",))
        .filter(pk__in=id_list(ids))
        .values_list("id", "updated_at", "state", "queue_id", "queue__tenant_id")
    ):
        facts[pk] = (state, queue, tenant)
        if pk in victims:
            before[pk] = updated_at
    placed = {WorkloadState.ADMITTED, WorkloadState.RUNNING}
    wrong = sorted(e.name for e in record.evictions if facts[e.victim_id][0] not in placed)
    if wrong:
        raise ValidationError({"state": f"workloads {wrong} do not run: not evicted"})
    stamp = timezone.now()
    update_rows(
        Workload,
        ["evicting_for", "eviction_reason", "updated_at"],
        {e.victim_id: (e.preemptor_id, e.reason, stamp) for e in record.evictions},
    )
    _stamped(stamps, before, stamp)
    insert_values(
        PreemptionEvent,
        ("at", "reason", "victim_id", "victim_queue_id", "victim_tenant_id", "preemptor_id",
         "preemptor_queue_id", "preemptor_tenant_id", "gpus_freed", "lost_gpu_hours",
         "cycle_id", "nodes"),
        [
            (at, e.reason, e.victim_id, facts[e.victim_id][1], facts[e.victim_id][2],
             e.preemptor_id,
             None if e.preemptor_id is None else facts[e.preemptor_id][1],
             None if e.preemptor_id is None else facts[e.preemptor_id][2],
             e.gpus_freed, e.lost_gpu_hours, cycle.pk, list(e.nodes))
            for e in record.evictions
        ],
    )  # fmt: skip


def _explanation_rows(record: CycleRecord) -> dict[int, tuple[Any, ...]]:
    """The explanations' rows as ``_record_explanations`` writes them: reason, sentence,
    facts and queue rank. On PostgreSQL the facts go to COPY as their JSON text
    (``upsert_rows(prepared=...)``): they are plain JSON values already
    (``record.json_facts``)."""
    text = connection.vendor == "postgresql"
    return {
        pk: (
            e.reason,
            e.detail,
            json.dumps(e.facts) if text else e.facts,
            record.ranked.get(pk),
        )
        for pk, e in record.explanations.items()
    }


def _record_explanations(
    record: CycleRecord, stamps: Stamps | None, rows: dict[int, tuple[Any, ...]]
) -> None:
    """The explanations that changed (``rows``: ``_explanation_rows``), each with its queue
    rank (written or kept), into ``WorkloadExplanation`` (a first one inserted, the estimate's
    facts of one there kept), after the nominations (``_record_nominations``); then the ranks
    that changed alone (``_record_ranks``)."""
    stamp = timezone.now()
    # The workload rows first, then the explanations' (the order the estimates' writes
    # take them in: ``do_record_estimates``).
    _stamped(stamps, _record_nominations(record.nominated, stamp), stamp)
    if record.explanations:
        # Work set aside as never fitting has no estimate: its last one is not kept (the
        # estimates' next refresh clears it too, a minute later; the page showed "starts not
        # before ..." beside "never fits" meanwhile).
        never = {
            pk for pk, e in record.explanations.items() if e.facts.get(NEVER_FITS_FACT) is True
        }
        for chosen, keep in (
            ({pk: row for pk, row in rows.items() if pk not in never}, ESTIMATE_FACTS),
            ({pk: row for pk, row in rows.items() if pk in never}, ()),
        ):
            if chosen:
                upsert_rows(
                    WorkloadExplanation,
                    ["reason", "detail", "facts", "queue_rank"],
                    chosen,
                    keep_keys={"facts": keep} if keep else None,
                    prepared=connection.vendor == "postgresql",
                )
    _record_ranks(record)


def _record_ranks(record: CycleRecord) -> None:
    """The queue ranks that changed (``record.ranks``) of rows no explanation wrote; with
    ``ranks_whole``, every other pending workload's rank cleared (a loop that does not know
    what the database holds). Like explanations, ranks do not stamp the workload's
    ``updated_at``: the core does not read them."""
    if record.ranks_whole:
        WorkloadExplanation.objects.filter(
            workload__state=WorkloadState.PENDING, queue_rank__isnull=False
        ).exclude(workload_id__in=id_list(list(record.ranked))).update(queue_rank=None)
    ranks = {pk: rank for pk, rank in record.ranks.items() if pk not in record.explanations}
    if not ranks:
        return
    if connection.vendor != "postgresql":
        update_rows(
            WorkloadExplanation, ["queue_rank"], {pk: (rank,) for pk, rank in ranks.items()}
        )
        return
    table = connection.ops.quote_name(WorkloadExplanation._meta.db_table)
    with connection.cursor() as cursor:  # one float column: two array parameters
        cursor.execute(
            f"UPDATE {table} SET queue_rank = t.rank "  # noqa: S608
            "FROM unnest(%s::bigint[], %s::float8[]) AS t(id, rank) "
            f"WHERE {table}.workload_id = t.id",
            [int_array(ranks), list(ranks.values())],
        )


@dataclass(frozen=True, slots=True)
class EstimateRow:
    """A pending workload's estimated start as written: when (None: no estimate), whether it
    rests on a learned runtime, and for one without an estimate the moment it starts no
    earlier than (None: unknown)."""

    at: datetime | None
    learned: bool | None
    not_before: datetime | None


def do_record_estimates(estimates: Mapping[int, EstimateRow]) -> int:
    """Write pending workloads' estimated starts (``estimated_start_at``, and into their
    explanations the facts ``ESTIMATE_FACTS``; the rest of the explanation is kept, and a
    workload no cycle has explained yet has no facts to keep them in). Workloads no longer
    pending are left alone, and ``updated_at`` is not stamped: an estimate is no change the
    loop's state must read again. Returns how many were given."""
    with transaction.atomic():
        pending = set(
            Workload.objects.filter(
                pk__in=id_list(list(estimates)), state=WorkloadState.PENDING
            ).values_list("pk", flat=True)
        )
        update_rows(
            Workload,
            ["estimated_start_at"],
            {pk: (row.at,) for pk, row in estimates.items() if pk in pending},
            where=("state", WorkloadState.PENDING),
        )
        update_rows(
            WorkloadExplanation,
            ["facts"],
            {pk: (_estimate_facts(row),) for pk, row in estimates.items() if pk in pending},
            only_keys={"facts": ESTIMATE_FACTS},
        )
        return len(estimates)


def _estimate_facts(row: EstimateRow) -> dict[str, Any]:
    """An estimate's facts as its explanation keeps them (``ESTIMATE_FACTS``)."""
    return {
        key: value
        for key, value in (
            (ESTIMATE_LEARNED_FACT, row.learned),
            (
                ESTIMATE_NOT_BEFORE_FACT,
                None if row.not_before is None else row.not_before.isoformat(),
            ),
        )
        if value is not None
    }


# -- what applying it taught --------------------------------------------------------------


@transaction.atomic
def do_record_apply_outcome(
    *,
    at: datetime,
    bind_failed: Mapping[int, str],
    refused: Mapping[int, str],
    budget_moves: Sequence[BudgetMove] = (),
    refusals: Mapping[int, Mapping[str, Any]] | None = None,
    refusals_over: Collection[int] = (),
    shrinks: Sequence[Shrink] = (),
) -> None:
    """Gangs that could not be bound go back to pending (their usage closes); an elastic
    gang whose growth could not be bound goes on with the pods it ran (``shrinks``: the
    added pods' placements removed and its usage opened again for the GPUs it still holds,
    as the sync writes a shrink, ``_record_shrinks``); victims whose
    eviction a disruption budget refused keep running: the eviction and its preemption event
    are called off, and their preemptor is no longer nominated. Each such victim's row keeps
    the refusal (``refusals``: what the loop knows of it, ``Workload.eviction_refusal``) with
    the preemptor it was for (``preemptor``, ``namespace/name``, and its tenant's id, for
    the readers' rule on who may see it); ``refusals_over``: rows whose recorded refusal is
    over (an eviction accepted since, or none wanted), cleared without touching
    ``updated_at`` (the loop does not read it)."""
    do_record_budget_moves(budget_moves, at=at)
    _record_shrinks(shrinks)
    if refusals_over:
        Workload.objects.filter(pk__in=list(refusals_over)).update(eviction_refusal=None)
    for workload in Workload.objects.filter(pk__in=list(bind_failed), state=WorkloadState.ADMITTED):
        do_transition_workload(
            workload,
            WorkloadState.PENDING,
            reason=f"binding failed: {bind_failed[workload.pk]}"[:500],
            at=at,
        )
        do_close_usage(workload, at=at)
    if not refused:
        return
    preemptors: dict[int, list[int]] = defaultdict(list)
    refused_for: dict[int, tuple[str, int | None]] = {}  # victim -> its preemptor, tenant
    for pk, preemptor, namespace, name, tenant_id in Workload.objects.filter(
        pk__in=list(refused)
    ).values_list(
        "id",
        "evicting_for_id",
        "evicting_for__namespace",
        "evicting_for__name",
        "evicting_for__queue__tenant_id",
    ):
        if preemptor is not None:
            preemptors[preemptor].append(pk)
            refused_for[pk] = (f"{namespace}/{name}", tenant_id)
    for pk, admitted_at, reason in Workload.objects.filter(pk__in=list(refused)).values_list(
        "id", "admitted_at", "eviction_reason"
    ):
        # The events of this run's eviction (a run starts at its admission), of its reason:
        # not those of members it lost meanwhile (``_record_shrink_losses``), which stand.
        events = PreemptionEvent.objects.filter(victim_id=pk)
        if admitted_at is not None:
            events = events.filter(at__gte=admitted_at)
        if reason:
            events = events.filter(reason=reason)
        events.delete()
    Workload.objects.filter(pk__in=list(refused)).update(
        evicting_for=None, eviction_reason="", updated_at=timezone.now()
    )
    for pk, refusal in sorted((refusals or {}).items()):  # rare: one write each
        if pk in refused:
            for_name, for_tenant = refused_for.get(pk, (None, None))
            Workload.objects.filter(pk=pk).update(
                eviction_refusal={
                    **refusal,
                    "preemptor": for_name,
                    "preemptor_tenant_id": for_tenant,
                }
            )
    if preemptors:
        Workload.objects.filter(pk__in=list(preemptors), state=WorkloadState.PENDING).update(
            nominated=False, updated_at=timezone.now()
        )


# -- a whole pool at once (benchmark B1-loop's setup) ----------------------------------------


def _require_tenant_names(tenants: Mapping[str, Tenant]) -> None:
    """Refuse, naming ``tenant``, the snapshot's tenants whose names break the tenant name
    rule, which is the namespace rule (each owns the namespace of its name): bulk_create runs
    no validator, so the loader runs the fields' own (``Tenant.name``,
    ``TenantNamespace.name``)."""
    fields = (Tenant._meta.get_field("name"), TenantNamespace._meta.get_field("name"))
    problems: list[str] = []
    for name in tenants:
        try:
            for field in fields:
                field.run_validators(name)
        except ValidationError as error:
            problems.append(f"{name!r}: {' '.join(error.messages)}")
    if problems:
        raise ValidationError({"tenant": "; ".join(problems)})


@transaction.atomic
def do_load_pool(
    snapshot: Snapshot,
    *,
    at: datetime,
    node_labels: Mapping[str, Mapping[str, str]],
    labels_of_node: Mapping[str, Mapping[str, str]] | None = None,
) -> dict[str, int]:
    """Write a core snapshot's pool into an empty database in bulk: flavors (with the node
    labels that pick their nodes), nodes (with the labels the cluster gives them, and their
    zone) and GPUs, tenants owning the namespace of their name,
    the queue tree with its quotas, priority classes, this period's budgets, and the
    workloads with their pod sets and, for running ones, their placements (admitted at their
    start). One audit row says so. Refused unless the database holds no pool yet."""
    if Node.objects.exists() or Workload.objects.exists() or Queue.objects.exists():
        raise ValidationError({"database": "the database already holds a pool"})
    flavors = {
        f.name: Flavor(
            name=f.name,
            sharing="shared" if f.sharing == "shared" else "exclusive",
            gpu_memory_gb=round(f.gpu_memory_gb),
            hourly_price=Decimal(str(f.hourly_price)),
            node_labels=dict(node_labels.get(f.name, {})),
        )
        for f in snapshot.flavors
    }
    Flavor.objects.bulk_create(flavors.values())
    nodes = {
        n.name: Node(
            name=n.name,
            flavor=flavors[n.flavor],
            cpu=n.cpu_milli // 1000,
            memory_gb=n.memory_mib // 1024,
            nvlink_domain=n.domain,
            labels=dict((labels_of_node or {}).get(n.name, {})),
            zone=(labels_of_node or {}).get(n.name, {}).get(ZONE_LABEL, ""),
            last_synced_at=at,
        )
        for n in snapshot.nodes
    }
    Node.objects.bulk_create(nodes.values(), batch_size=2000)
    Gpu.objects.bulk_create(
        (
            Gpu(node=nodes[n.name], index=i, healthy=True)
            for n in snapshot.nodes
            for i in range(n.gpus)
        ),
        batch_size=5000,
    )
    tenants = {
        name: Tenant(name=name, organization="bench")
        for name in sorted({q.tenant for q in snapshot.queues if q.tenant})
    }
    _require_tenant_names(tenants)
    Tenant.objects.bulk_create(tenants.values())
    TenantNamespace.objects.bulk_create(
        TenantNamespace(tenant=tenant, name=name) for name, tenant in tenants.items()
    )
    classes = {
        c.name: PriorityClass(
            name=c.name,
            value=c.value,
            default=c.default,
            preemption_policy=c.preemption_policy,
            budget_rate=Decimal(str(c.budget_rate)),
        )
        for c in snapshot.priority_classes
    }
    PriorityClass.objects.bulk_create(classes.values())
    queues: dict[str, Queue] = {}
    for info in snapshot.queues:  # parents come before their children in a snapshot
        queue = Queue(
            name=info.name,
            parent=queues.get(info.parent) if info.parent else None,
            tenant=tenants.get(info.tenant) if info.tenant else None,
            weight=Decimal(str(info.weight)),
            reclaimable=info.reclaimable,
        )
        queue.save()
        queues[info.name] = queue
    QueueQuota.objects.bulk_create(
        QueueQuota(
            queue=queues[q.name],
            flavor=flavors[flavor],
            guarantee=Decimal(quota.guarantee) / 1000,
            deserved=Decimal(quota.deserved) / 1000,
            capability=Decimal(quota.capability) / 1000,
        )
        for q in snapshot.queues
        for flavor, quota in q.quota.items()
    )
    moment = {w.name: w for w in snapshot.workloads}
    tenant_of = {q.name: q.tenant or "default" for q in snapshot.queues}
    workloads = [
        Workload(
            namespace=tenant_of[w.queue],
            name=w.name,
            queue=queues[w.queue],
            priority_class=classes[w.priority_class],
            min_member=w.min_member,
            topology=w.topology or "",
            protected_runtime_s=round(w.protected_runtime_s),
            expected_runtime_s=None
            if w.expected_runtime_s is None
            else round(w.expected_runtime_s),
            state=WorkloadState.PENDING if w.state == "pending" else WorkloadState.RUNNING,
            submitted_at=_aware(w.submitted_at),
            admitted_at=None if w.started_at is None else _aware(w.started_at),
            started_at=None if w.started_at is None else _aware(w.started_at),
            origin="gpupool",
        )
        for w in snapshot.workloads
    ]
    Workload.objects.bulk_create(workloads, batch_size=2000)
    pod_sets: list[PodSet] = []
    for workload in workloads:
        spec_of = moment[workload.name]
        for index, spec in enumerate(spec_of.pod_sets):
            pod_sets.append(
                PodSet(
                    workload=workload,
                    name=f"set-{index}",
                    count=spec.count,
                    gpus=spec.gpus,
                    flavor=flavors[spec.flavors[0]] if spec.flavors else None,
                    gpu_milli=None if spec.gpu_milli == 1000 else spec.gpu_milli,
                    cpu=Decimal(spec.cpu_milli) / 1000,
                    memory_gb=(Decimal(spec.memory_mib) / 1024).quantize(Decimal("0.001")),
                )
            )
    PodSet.objects.bulk_create(pod_sets, batch_size=2000)
    sets_of: dict[int, list[PodSet]] = {}
    for pod_set in pod_sets:
        sets_of.setdefault(pod_set.workload_id, []).append(pod_set)
    placements: list[Placement] = []
    for workload in workloads:
        spec_of = moment[workload.name]
        slots = [(ps, i) for ps in sets_of[workload.pk] for i in range(ps.count)]
        for (pod_set, index), pod in zip(slots, spec_of.placement, strict=False):
            placements.append(
                Placement(
                    workload=workload,
                    pod_set=pod_set,
                    pod_index=index,
                    node=nodes[pod.node],
                    gpu_indices=list(pod.gpus),
                    milli=pod.milli,
                    created_at=workload.admitted_at or at,
                )
            )
    Placement.objects.bulk_create(placements, batch_size=5000)
    today = timezone.localdate(at)
    period = (today.replace(day=1), (today.replace(day=28) + timedelta(days=4)).replace(day=1))
    budgets = [
        PriorityBudget(
            tenant=tenants[b.tenant],
            priority_class=classes[b.priority_class],
            period_start=period[0],
            period_end=period[1],
            gpu_hours=Decimal(str(b.gpu_hours)),
        )
        for b in snapshot.budgets
        if b.tenant in tenants
    ]
    PriorityBudget.objects.bulk_create(budgets)
    write_ledger_entries(
        [(b.pk, LedgerEntryKind.GRANT, b.gpu_hours, None, at, "bench") for b in budgets],
        {b.pk: b for b in budgets},
    )
    counts = {
        "flavors": len(flavors),
        "nodes": len(nodes),
        "queues": len(queues),
        "workloads": len(workloads),
        "placements": len(placements),
    }
    record_audit_event(
        acting_user=None,
        action="control.load_pool",
        instance=queues["root"] if "root" in queues else next(iter(queues.values())),
        before=None,
        after=counts,
        reason="a whole pool loaded at once (benchmark setup)",
    )
    # Planned by what was loaded from the first cycle on, not by an empty database's
    # statistics until autovacuum comes by (a pool loaded into production's database would
    # be read by the loop within seconds too).
    analyze(Node, Gpu, Queue, QueueQuota, Workload, PodSet, Placement)
    return counts


def _aware(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, tz=UTC)
