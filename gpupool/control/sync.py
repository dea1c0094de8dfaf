"""Step 1 of a cycle, sync: what the cluster says, reconciled with the database.

``decide_sync`` reads the mirror (``cluster.py``) and the loop's state, and decides what to
write -- nothing here writes: ``actions.do_record_cluster_sync`` writes a ``SyncDecision`` in one
transaction, and the loop emits its Events after that commits. It decides:

- **nodes**: each node the delta touched, as inventory (``clusters.inventory.node_inventory``
  with the database's flavors): new nodes with their flavor, changed ones, why the cluster takes
  no new pods there (``cluster_exclusion``: cordoned in the cluster, not Ready, ...), and nodes
  that vanished (marked gone). Only nodes whose inventory differs from the database are written.
- **workloads**, for each workload whose pods changed (every one at the first cycle):
  unknown ones with valid pods become workloads (origin ``controller`` or ``bare``); pods that
  say something malformed, or name another tenant's queue, are never scheduled and get a
  Warning Event saying why (once per distinct complaint); a protected runtime above the queue's
  free maximum is capped, and the Event says so; an admitted workload whose pods all run starts
  running; one whose pods all ended succeeded or failed -- unless its pods come from a Job
  (batch/v1) that is still active: the Job retries a failed pod (or runs its further
  completions), so the workload is requeued as itself (``running -> pending``, its GPUs and
  usage released) and waits for the Job's next pod; it ends with the Job's verdict (failed,
  with the Job's reason, or succeeded) once the Job gives it; one being evicted whose pods are gone
  is preempted, and requeued unless it was a bare pod or reclaimed for sitting idle (reason
  ``idle``: it ends, ``lifecycle.ENDING_REASONS``); a running one whose pods vanished without
  an eviction of gpupool's was lost (its node failed: ``node-failure``; someone evicted them,
  the ``DisruptionTarget`` of their last state: ``admin``) or deleted (``kubectl delete``:
  no preemption; a bare pod's workload is cancelled, others are requeued and made again) --
  the removed pods' last states come from the delta (``note_departed``); a placed gang
  (running, or admitted with its pods not all running yet) with a member gone below its
  minimum leaves the same way as a whole, and its members left are deleted after the write
  (``SyncDecision.release``: no half-gangs); at or above its minimum (an elastic gang) it
  goes on, its placement and usage shrunk to the pods left (``SyncDecision.shrinks``: the
  GPUs of the pods gone are free for others); a pending one from
  the cluster whose pods are all gone is cancelled (unless its Job is active: it waits for
  the Job's next pod; or the Job failed: it fails); a pending one
  from the cluster whose pods changed gets its pod sets again; checkpoints come from the pods.
- **the overlay**: what the cluster adds to the database's workloads in the snapshot -- pods a
  gang still waits for (``missing_pods``), each pod set's allowed nodes, and workloads left out
  (malformed pods) -- and what other schedulers' pods (and our pods the database does not
  place) hold on each node.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from typing import Literal

from gpupool.clusters.api_objects import DISRUPTED_BY
from gpupool.clusters.base import (
    GPU_RESOURCE,
    MIG_RESOURCE_PREFIX,
    Change,
    JobFacts,
    JobKey,
    NodeFacts,
    PodFacts,
    PodKey,
    PodRef,
    ResourceAmounts,
)
from gpupool.clusters.grouping import (
    GPU_MILLI,
    PROTECTED_RUNTIME,
    WORKLOAD_LABEL,
    InvalidWorkload,
    PodSetRequest,
    WorkloadKey,
    WorkloadRequest,
    reference_errors,
    workload_key,
)
from gpupool.clusters.inventory import (
    FlavorMatches,
    FlavorSelector,
    NodeInventory,
    node_inventory,
    replicas_of,
)
from gpupool.control.cluster import POD_SET_ANNOTATION as ANNOTATED
from gpupool.control.cluster import ClusterMirror, holds_node, is_live, made_by_gpupool
from gpupool.control.snapshot import CLUSTER_UNHEALTHY as CLUSTER_UNHEALTHY
from gpupool.control.snapshot import WorkloadRow
from gpupool.control.state import LoopState
from gpupool.inventory.choices import Sharing
from gpupool.inventory.models import Flavor
from gpupool.number_formats import counted
from gpupool.scheduler.lifecycle import ENDING_REASONS
from gpupool.scheduler.types import MIB_PER_GB, MILLI, NodeInfo, PodSetInfo, Snapshot, WorkloadInfo
from gpupool.workloads.actions import PodSetSpec, pod_sets_errors
from gpupool.workloads.choices import Origin, WorkloadState
from gpupool.workloads.models import CONTROLLER_KIND_MAX, CONTROLLER_NAME_MAX

# -- what the sync decides ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class NodeUpdate:
    """A node's inventory as the cluster reports it, to write."""

    name: str
    flavor_id: int
    gpus: int
    unhealthy_in_cluster: int
    cpu: int
    memory_gb: int
    nvlink_domain: str
    zone: str
    labels: Mapping[str, str]
    mig_layout: Mapping[str, int]
    exclusion: str


@dataclass(frozen=True, slots=True)
class PodSetShape:
    """A pod set as the cluster's pods describe it, in the database's terms."""

    name: str
    count: int
    gpus: int
    flavor_ids: tuple[int, ...]  # first choice, then the further ones; () asks no GPU
    gpu_milli: int | None
    cpu: Decimal
    memory_gb: Decimal

    def spec(self, flavors: Mapping[int, Flavor]) -> PodSetSpec:
        """The pod set as a submission gives it (``workloads.actions.PodSetSpec``), its
        flavors' rows from ``flavors`` (by id)."""
        return PodSetSpec(
            count=self.count,
            gpus=self.gpus,
            flavor=flavors[self.flavor_ids[0]] if self.flavor_ids else None,
            gpu_milli=self.gpu_milli,
            cpu=self.cpu,
            memory_gb=self.memory_gb,
            name=self.name,
            flavor_choices=tuple(flavors[pk] for pk in self.flavor_ids[1:]),
        )


@dataclass(frozen=True, slots=True)
class Registration:
    """Pods of a workload the database does not know yet: the workload to create."""

    key: WorkloadKey
    queue: str
    priority_class: str | None
    pod_sets: tuple[PodSetShape, ...]
    origin: str
    submitted_at: datetime
    min_member: int | None
    topology: str
    protected_runtime_s: int | None
    expected_runtime_s: int | None
    # The controller that owns its pods (origin ``controller``: a Job, a ReplicaSet, ...),
    # kept on the workload so that cancelling it can say what becomes of its pods.
    controller_kind: str = ""
    controller_name: str = ""


@dataclass(frozen=True, slots=True)
class Step:
    """A state transition of a known workload, with why; ``lost`` records a preemption event
    (``node-failure`` or ``admin``) for work that vanished without an eviction."""

    workload_id: int
    name: str
    to_state: str
    reason: str
    at: datetime
    lost: str = ""
    # A preemption that ends the workload (a bare pod, nothing makes again; or reclaimed for
    # sitting idle, ``lifecycle.ENDING_REASONS``): not requeued, so it is finished there.
    ends: bool = False

    @property
    def leaves(self) -> bool:
        """Whether the workload stops holding GPUs with this step (a step back to pending
        leaves too: a requeue after an eviction, or a Job's retry of a failed pod)."""
        return self.to_state in (
            WorkloadState.PENDING,
            WorkloadState.PREEMPTED,
            WorkloadState.SUCCEEDED,
            WorkloadState.FAILED,
            WorkloadState.CANCELLED,
        )


@dataclass(frozen=True, slots=True)
class PodEvent:
    """An Event to put on pods after the sync is written."""

    pods: tuple[PodRef, ...]
    reason: str
    message: str
    warning: bool = False


@dataclass(frozen=True, slots=True)
class Release:
    """Pods to delete once the sync is written: the members left of a gang that lost one
    below its minimum, whose workload left (no half-gangs, DESIGN §4)."""

    pods: tuple[PodRef, ...]
    reason: str


@dataclass(frozen=True, slots=True)
class Shrink:
    """A placed gang that lost member pods and still has its minimum (an elastic gang): it
    goes on with the pods left, and holds only their placements from ``at`` -- its usage
    (quota, cost) counts only their GPUs, and the GPUs of the pods gone are free for others.
    ``keep``: each placement kept, as (pod set id, its pod index, the pod index it takes):
    the pods left are the first of their pod sets (``_kept_placements``), the form the
    snapshot reads a placement in (``snapshot._placement``); the others are deleted."""

    workload_id: int
    name: str
    keep: tuple[tuple[int, int, int], ...]
    at: datetime
    # Why the members went, as a gang lost whole says it (``_vanished``): ``node-failure``
    # or ``admin`` cost a preemption event, as they do for a whole gang; ``deleted`` none.
    lost: str = ""


@dataclass
class SyncDecision:
    """Everything one sync decided to write, and the Events to emit (and the pods to
    release) after."""

    at: datetime
    nodes: list[NodeUpdate] = field(default_factory=list)
    gone: list[str] = field(default_factory=list)
    registrations: list[Registration] = field(default_factory=list)
    pod_sets: dict[int, tuple[tuple[PodSetShape, ...], int | None]] = field(default_factory=dict)
    steps: list[Step] = field(default_factory=list)
    checkpoints: dict[int, datetime] = field(default_factory=dict)
    events: list[PodEvent] = field(default_factory=list)
    release: list[Release] = field(default_factory=list)
    shrinks: list[Shrink] = field(default_factory=list)

    @property
    def writes(self) -> bool:
        """Whether anything is to be written."""
        return bool(
            self.nodes
            or self.gone
            or self.registrations
            or self.pod_sets
            or self.steps
            or self.checkpoints
            or self.shrinks
        )


@dataclass(frozen=True, slots=True)
class Overlay:
    """What the cluster adds to a workload in the snapshot."""

    missing_pods: int = 0
    allowed: tuple[frozenset[str] | None, ...] = ()
    excluded: bool = False
    why: str = ""  # an excluded workload's pods no node could hold: what is wrong (``_refused``)
    # an excluded workload's pods whose gpupool.io labels or annotations cannot be used: what
    # is wrong (``_pending``); the loop writes it as the workload's explanation
    malformed: str = ""

    def apply(self, info: WorkloadInfo) -> WorkloadInfo:
        """The workload with the cluster's additions."""
        changes: dict[str, object] = {}
        if self.missing_pods != info.missing_pods:
            changes["missing_pods"] = self.missing_pods
        if any(a is not None for a in self.allowed) and len(self.allowed) == len(info.pod_sets):
            changes["pod_sets"] = tuple(
                pod_set if allowed is None else dataclasses.replace(pod_set, allowed_nodes=allowed)
                for pod_set, allowed in zip(info.pod_sets, self.allowed, strict=True)
            )
        return dataclasses.replace(info, **changes) if changes else info  # type: ignore[arg-type]


# -- the memory the sync keeps between cycles --------------------------------------------------


@dataclass
class SyncMemory:
    """What the sync remembers: complaints already made, overlays, flavors of the database."""

    complaints: dict[WorkloadKey, str] = field(default_factory=dict)
    overlays: dict[str, Overlay] = field(default_factory=dict)
    # The size verdicts of this sync (``_refused``), by distinct pod sets and by each pod
    # set; ``decide_workloads`` starts them afresh (the nodes may have changed).
    verdicts: dict[tuple[PodSetShape, ...], dict[str, str]] = field(default_factory=dict)
    judged: dict[tuple[object, ...], dict[str, str]] = field(default_factory=dict)
    # The last states of placed workloads' bound pods that are gone (``note_departed``), by
    # workload name, kept while the workload is placed: whether a pod was evicted (and by
    # whom), merely deleted, or had ended shows only there.
    departed: dict[str, list[PodFacts]] = field(default_factory=dict)


def note_departed(memory: SyncMemory, changes: Mapping[PodKey, Change[PodFacts]]) -> None:
    """Remember the last state of each bound pod a delta removes (its ``before``: the
    backends give a removed pod's last state there, ``api_objects.with_last_states``)."""
    for change in changes.values():
        before = change.before
        if change.after is None and before is not None and before.node_name is not None:
            memory.departed.setdefault(str(workload_key(before)), []).append(before)


def flavor_selectors(flavors: Mapping[int, Flavor]) -> list[FlavorSelector]:
    """The database's flavors as the inventory module recognises their nodes."""
    return [
        FlavorSelector(
            name=f.name,
            node_labels=dict(f.node_labels or {}),
            sharing="mig" if f.sharing == Sharing.MIG else str(f.sharing),  # type: ignore[arg-type]
            mig_profile=f.mig_profile or None,
        )
        for f in sorted(flavors.values(), key=lambda f: f.name)
    ]


def moment(seconds: float) -> datetime:
    """POSIX seconds as an aware datetime."""
    return datetime.fromtimestamp(seconds, tz=UTC)


# -- nodes -------------------------------------------------------------------------------------


def decide_nodes(
    decision: SyncDecision,
    mirror: ClusterMirror,
    touched: Iterable[str],
    known: Mapping[str, Mapping[str, object]],
    flavors: Mapping[int, Flavor],
) -> None:
    """Nodes the delta touched whose inventory differs from the database (``known``: the
    database's nodes by name, as ``inventory_of`` describes them)."""
    selectors = flavor_selectors(flavors)
    matches = FlavorMatches(selectors)
    ids = {f.name: pk for pk, f in flavors.items()}
    for name in sorted(touched):
        facts = mirror.nodes.get(name)
        if facts is None:
            if name in known and not known[name].get("gone"):
                decision.gone.append(name)
            continue
        inventory = node_inventory(facts, selectors, matches)
        if inventory.flavor is None:
            continue  # not a GPU node of a known flavor: not inventory
        flavor = flavors[ids[inventory.flavor]]
        update = _node_update(inventory, flavor, facts.labels)
        if known.get(name) != inventory_of(update):
            decision.nodes.append(update)


def _node_update(inventory: NodeInventory, flavor: Flavor, labels: Mapping[str, str]) -> NodeUpdate:
    per_card = dict(inventory.mig_layout)
    physical = inventory.gpus
    unhealthy = inventory.unhealthy_gpus
    if flavor.sharing == Sharing.MIG:  # the database counts cards; an instance takes its card
        physical = inventory.physical_gpus or 0
        instances = per_card.get(flavor.mig_profile, 0) or 1
        unhealthy = -(-unhealthy // instances)
    return NodeUpdate(
        name=inventory.name,
        flavor_id=flavor.pk,
        gpus=physical or 0,
        unhealthy_in_cluster=unhealthy,
        cpu=inventory.cpu_milli // MILLI,
        memory_gb=inventory.memory_mib // MIB_PER_GB,
        nvlink_domain=inventory.nvlink_domain,
        zone=inventory.zone or "",
        labels=dict(labels),
        mig_layout=per_card,
        exclusion="" if inventory.schedulable else (inventory.exclusion or "excluded"),
    )


def inventory_of(update: NodeUpdate) -> dict[str, object]:
    """The fields a node sync compares with the database (``gone`` False: it is there)."""
    return {
        "flavor_id": update.flavor_id,
        "gpus": update.gpus,
        "unhealthy_in_cluster": update.unhealthy_in_cluster,
        "cpu": update.cpu,
        "memory_gb": update.memory_gb,
        "nvlink_domain": update.nvlink_domain,
        "zone": update.zone,
        "labels": dict(update.labels),
        "mig_layout": dict(update.mig_layout),
        "exclusion": update.exclusion,
        "gone": False,
    }


# -- workloads -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Known:
    """What the database says about a workload that is not live any more."""

    id: int
    state: str
    eviction_reason: str = ""

    def words(self) -> str:
        """Its end, as the Event on pods that come back under its name says it."""
        return f"{self.state}, {self.eviction_reason}" if self.eviction_reason else self.state


def decide_workloads(
    decision: SyncDecision,
    mirror: ClusterMirror,
    state: LoopState,
    memory: SyncMemory,
    keys: Iterable[WorkloadKey],
    ended: Mapping[WorkloadKey, Known],
    namespace_tenants: Mapping[str, str],
    now: float,
) -> None:
    """Decide every workload whose pods (or whose row) changed; refresh its overlay."""
    parents = {q.parent for q in state.queues}
    leaf_tenants = {q.name: q.tenant for q in state.queues if q.name not in parents}
    classes = {c.name for c in state.classes}
    at = moment(now)
    rows, overlays, running = state.rows, memory.overlays, WorkloadState.RUNNING
    pending, ours = WorkloadState.PENDING, Origin.GPUPOOL
    holders, checkpointed, pods_by_key = mirror.holders, mirror.checkpointed, mirror.pods
    departed, complaints = memory.departed, memory.complaints
    known_nodes = frozenset(state.nodes)
    memory.verdicts.clear()
    memory.judged.clear()
    for key in sorted(keys, key=key_order):
        name = str(key)
        row = rows.get(name)
        if row is not None and key not in checkpointed:  # none reports a checkpoint
            state_now = row.state
            if (
                state_now == running
                and name in holders  # a pod of it holds a node
                and not _gone_members(
                    row, (pods_by_key.get(key) or {}).values(), memory.departed.get(name)
                )
            ):
                overlays.pop(name, None)  # as ``_known``: running where it was placed
                if complaints and key in complaints:  # its pods no longer say a checkpoint
                    _readable_again(memory, key)
                continue
            if state_now == pending and row.origin == ours:
                # As ``_known`` and ``_pending`` decide a pending workload of gpupool's own
                # (10,000 in B1's first sync): only its overlay, the pods it still lacks.
                overlays.pop(name, None)
                if departed:  # placed no more: what its pods left is moot (as below)
                    departed.pop(name, None)
                present = pods_by_key.get(key)
                missing = row.info.pod_count - _waiting(present)
                if missing > 0:
                    overlays[name] = Overlay(missing_pods=missing)
                if present and any(ANNOTATED not in p.annotations for p in present.values()):
                    _strangers(decision, memory, key, present.values())
                continue
        pods = mirror.pods_of(key)
        grouped = mirror.grouped(key, now) if _needs_grouping(row, key, mirror) else None
        if row is None or row.state == pending:
            memory.departed.pop(name, None)  # placed no more: what its pods left is moot
        if row is None:
            memory.overlays.pop(name, None)
            if key in ended:
                _ended_pods(decision, memory, key, ended[key], pods)
                continue
            if grouped is None:
                continue
            if not any(is_live(p) for p in pods):
                continue
            _unknown(
                decision,
                memory,
                mirror,
                key,
                grouped,
                pods,
                state,
                leaf_tenants,
                namespace_tenants,
                classes,
                known_nodes,
            )
            continue
        _known(
            decision,
            memory,
            mirror,
            row,
            key,
            grouped,
            pods,
            state,
            leaf_tenants,
            namespace_tenants,
            classes,
            now,
            at,
        )
    if memory.departed:  # workloads that left by other ways (cancelled through gpupool, ...)
        for name in [n for n in memory.departed if n not in rows]:
            del memory.departed[name]


def _gone_members(
    row: WorkloadRow, pods: Iterable[PodFacts], departed: Sequence[PodFacts] | None
) -> int:
    """How many of a placed workload's pods are gone without having ended: its placements
    less the pods the cluster still has bound (ended ones too), those gone after they
    ended, and -- for an admitted one -- the pods apply is to bind (``_to_bind``: not bound
    yet, or made again by their Job). Nonzero: a member pod vanished (deleted, evicted, lost
    with its node)."""
    bound = waiting = 0
    admitted, ours = row.state == WorkloadState.ADMITTED, row.origin == Origin.GPUPOOL
    for p in pods:
        if p.node_name is not None:
            bound += 1
        elif admitted and _to_bind(p, ours):
            waiting += 1
    ended = sum(1 for p in departed if p.finished) if departed else 0
    return max(len(row.info.placement) - bound - waiting - ended, 0)


def _to_bind(pod: PodFacts, ours: bool) -> bool:
    """Whether an unbound pod of an admitted workload is one apply binds to its placements
    (``ours``: the workload was submitted through gpupool, whose pods only are its own)."""
    return pod.node_name is None and is_live(pod) and (not ours or made_by_gpupool(pod))


def _waiting(pods: Mapping[PodKey, PodFacts] | None) -> int:
    """How many of the pods gpupool made for a workload submitted through it are live and
    bound to no node yet (``made_by_gpupool``: others of its name are not its pods)."""
    if not pods:
        return 0
    return sum(
        1
        for p in pods.values()
        if p.node_name is None and not p.finished and not p.deleting and ANNOTATED in p.annotations
    )


def _strangers(
    decision: SyncDecision, memory: SyncMemory, key: WorkloadKey, pods: Iterable[PodFacts]
) -> None:
    """Pods that name a workload submitted through gpupool but that gpupool did not make
    (made with kubectl, say): never its pods, never scheduled; a Warning Event tells their
    owner to name another workload. Before, they counted as its pods, so gpupool made none
    of its own and the workload held its GPUs admitted with nothing bound, cycle after cycle."""
    strangers = [p for p in pods if is_live(p) and not made_by_gpupool(p)]
    if strangers:
        _complain(
            decision,
            memory,
            key,
            strangers,
            f"workload {key} was submitted through gpupool, which makes its pods: gpupool does "
            "not schedule these pods; give them another gpupool.io/workload label",
        )


def key_order(key: WorkloadKey) -> str:
    """A workload key's sort key, one string (namespace, NUL, name): the pairs' own order,
    since a namespace (a DNS label) holds no NUL, the lowest code point -- a namespace sorts
    before those it is a prefix of either way. Strings compare three times as fast as pairs
    (the first sync sorts 30,000 keys at B1's size)."""
    return f"{key[0]}\0{key[1]}"


def _needs_grouping(row: WorkloadRow | None, key: WorkloadKey, mirror: ClusterMirror) -> bool:
    """Whether what the pods say matters beyond their phases and nodes: pods of a workload
    the database does not know, the pods of a pending one from the cluster (its pod sets), or
    pods that report a checkpoint. Grouping 30,000 workloads costs seconds; most need none."""
    if row is None or (row.origin != Origin.GPUPOOL and row.state == WorkloadState.PENDING):
        return True
    return key in mirror.checkpointed


def _ended_pods(
    decision: SyncDecision,
    memory: SyncMemory,
    key: WorkloadKey,
    known: Known,
    pods: Sequence[PodFacts],
) -> None:
    """Pods that wait under the name of a workload that has ended -- a Job's controller
    recreating the pods of work reclaimed for sitting idle, or a pod made after its Job's
    verdict was taken -- are never scheduled: the workload's end is final (DESIGN §2). Say so on
    them, once, rather than leave them pending without a word. (A Job that retries a failed
    pod while it is active gets its retry run: ``_job_verdict``.)"""
    if any(is_live(p) and p.node_name is None for p in pods):
        _complain(
            decision,
            memory,
            key,
            [p for p in pods if p.node_name is None],
            f"gpupool does not schedule these pods: workload {key} has ended "
            f"({known.words()}). Delete the pods' owner, or give new work another "
            f"{WORKLOAD_LABEL} name.",
        )


# How the Warning Event on placed work's pods that say something malformed begins (``_known``,
# reason ``MalformedAnnotation``).
UNREADABLE = "gpupool cannot read these pods' labels or annotations: "


def _readable_again(memory: SyncMemory, key: WorkloadKey) -> None:
    """Placed work's pods read clean (fixed, or no annotation to read left): forget the
    ``MalformedAnnotation`` complaint, so that the same bad value set again is told again.
    (Other complaints stay: a stranger told while the workload waited is told once.)"""
    said = memory.complaints.get(key)
    if said is not None and said.startswith(UNREADABLE):
        del memory.complaints[key]


def _complain(
    decision: SyncDecision,
    memory: SyncMemory,
    key: WorkloadKey,
    pods: Sequence[PodFacts],
    message: str,
) -> None:
    """A Warning Event on the workload's pods, once per distinct complaint."""
    if memory.complaints.get(key) == message:
        return
    memory.complaints[key] = message
    live = tuple(p.ref for p in pods if is_live(p))
    if live:
        decision.events.append(PodEvent(live, "FailedScheduling", message, warning=True))


def _errors(
    grouped: WorkloadRequest | InvalidWorkload,
    leaf_tenants: Mapping[str, str | None],
    namespace_tenants: Mapping[str, str],
    classes: Iterable[str],
) -> tuple[str, ...]:
    if isinstance(grouped, InvalidWorkload):
        return grouped.errors
    return reference_errors(
        grouped,
        leaf_queue_tenants=leaf_tenants,
        namespace_tenants=namespace_tenants,
        priority_classes=frozenset(classes),
    )


def _unknown(
    decision: SyncDecision,
    memory: SyncMemory,
    mirror: ClusterMirror,
    key: WorkloadKey,
    grouped: WorkloadRequest | InvalidWorkload,
    pods: Sequence[PodFacts],
    state: LoopState,
    leaf_tenants: Mapping[str, str | None],
    namespace_tenants: Mapping[str, str],
    classes: Iterable[str],
    known_nodes: frozenset[str],
) -> None:
    """Pods of a workload the database does not know: register it, or say why not. A
    registered workload's overlay is decided here already, as ``_pending`` decides it for a
    pending one (``known_nodes``: the state's nodes), so it is planned in this cycle."""
    errors = _errors(grouped, leaf_tenants, namespace_tenants, classes)
    if errors or not isinstance(grouped, WorkloadRequest):
        _complain(
            decision,
            memory,
            key,
            pods,
            "gpupool will not schedule these pods: " + "; ".join(errors),
        )
        return
    if any(holds_node(p) for p in pods):
        return  # bound already (a database that lost it): counted as occupied, not adopted
    shapes = pod_set_shapes(grouped, state, memory, key)
    unoffered = _unoffered(grouped, shapes)
    if unoffered:  # refused as malformed pods are: never a row, listed with refused pods
        _complain(decision, memory, key, pods, "gpupool will not schedule these pods: " + unoffered)
        return
    protected = grouped.protected_runtime_s
    capped = _capped(grouped, state, protected)
    if capped is not None and protected is not None:
        message = (
            f"{PROTECTED_RUNTIME}: {protected:g}s is capped to queue {grouped.queue}'s free "
            f"maximum of {capped:g}s (longer protection needs a budgeted priority class)"
        )
        # Not a failure: the pods are scheduled, with the shorter window (DESIGN 2). Said
        # once, with the registration (a Normal Event; it was a FailedScheduling Warning).
        told = tuple(p.ref for p in pods if is_live(p))
        if told:
            decision.events.append(PodEvent(told, PROTECTED_RUNTIME_CAPPED, message))
        protected = capped
    controller = _controller(grouped)
    decision.registrations.append(
        Registration(
            key=key,
            queue=grouped.queue,
            priority_class=grouped.priority_class,
            pod_sets=shapes,
            origin=str(grouped.origin),
            submitted_at=moment(grouped.submitted_at),
            min_member=stored_min_member(grouped),
            topology=grouped.topology or "",
            protected_runtime_s=None if protected is None else round(protected),
            expected_runtime_s=None
            if grouped.expected_runtime_s is None
            else max(round(grouped.expected_runtime_s), 1),
            controller_kind=controller[0],
            controller_name=controller[1],
        )
    )
    if _refused(decision, memory, key, grouped, shapes, pods, state):
        return
    # As ``_pending`` decides once it is a row (a registration refused leaves an overlay of no
    # row, dropped by the next sync that looks at it: ``decide_workloads``).
    memory.complaints.pop(key, None)
    allowed = tuple(mirror.allowed_nodes(ps.constraints, known_nodes) for ps in grouped.pod_sets)
    overlay = Overlay(missing_pods=grouped.missing_pods, allowed=allowed)
    if overlay != Overlay(allowed=tuple(None for _ in allowed)):
        memory.overlays[str(key)] = overlay


def _controller(request: WorkloadRequest) -> tuple[str, str]:
    """The controller a registration keeps: its pods' controlling owner (a Job's pods' is the
    Job), for pods of origin ``controller`` only; none when its kind or name is longer than
    the workload keeps (an owner reference no controller could have: nothing is cut short)."""
    owner = request.owner
    if request.origin != "controller" or owner is None:
        return "", ""
    kind, name = owner
    if not name or len(kind) > CONTROLLER_KIND_MAX or len(name) > CONTROLLER_NAME_MAX:
        return "", ""
    return kind, name


# The reason of the Normal Event that says a protected runtime was capped (``_unknown``).
PROTECTED_RUNTIME_CAPPED = "ProtectedRuntimeCapped"


def _refused(
    decision: SyncDecision,
    memory: SyncMemory,
    key: WorkloadKey,
    request: WorkloadRequest,
    shapes: Sequence[PodSetShape],
    pods: Sequence[PodFacts],
    state: LoopState,
) -> bool:
    """Whether pods of a workload from the cluster ask what no node could hold: the rule of
    submission (``workloads.actions.pod_sets_errors``: past the decision core's bounds, or
    more GPUs than the largest node of every flavor it may use). Such a workload is kept
    (registered, pending: it shows, and can be cancelled) but never planned: excluded from
    the snapshot, with what is wrong as its overlay's ``why`` (the loop writes it as its
    explanation) and in a Warning Event on its pods, once."""
    shapes = tuple(shapes)
    errors = memory.verdicts.get(shapes)
    if errors is None:  # a burst's pods mostly repeat their shapes: judged once a sync
        specs = [shape.spec(state.flavor_rows) for shape in shapes]
        errors = memory.verdicts[shapes] = pod_sets_errors(specs, memory.judged)
    if not errors:
        return False
    words: list[str] = []
    for field_name, why in errors.items():
        index = field_name.split(".")[1] if field_name.count(".") == 2 else None
        if index is None:  # the number of pod sets: each distinct request makes one
            words.append(
                f"the pods make {why} (pods with different requests or node constraints are "
                "separate pod sets)"
            )
            continue
        members = request.pod_sets[int(index)].pods
        more = f" and {len(members) - 1} more like it" if len(members) > 1 else ""
        words.append(f"pod {members[0].name}{more}: {why}")
    why = "; ".join(words)
    _complain(decision, memory, key, pods, "gpupool will not schedule these pods: " + why)
    memory.overlays[str(key)] = Overlay(excluded=True, why=why)
    return True


def stored_min_member(request: WorkloadRequest) -> int | None:
    """The gang minimum the database holds for a workload from the cluster: the declared
    ``min_member``, up to the pods that exist -- a gang whose pods are still arriving is a
    workload of the pods seen so far that waits for the ``missing_pods`` (the overlay's, reason
    ``gang``); its minimum rises as they come, to the declared one once all exist."""
    if request.min_member is None:
        return None
    return min(request.min_member, sum(pod_set.count for pod_set in request.pod_sets))


def _capped(request: WorkloadRequest, state: LoopState, protected: float | None) -> float | None:
    """The queue's free maximum when the request's protection is above it at a free class."""
    if protected is None:
        return None
    queue = next((q for q in state.queues if q.name == request.queue), None)
    if queue is None or queue.max_protected_runtime_s is None:
        return None
    default = next(c for c in state.classes if c.default)
    klass = next(
        (c for c in state.classes if c.name == (request.priority_class or default.name)), default
    )
    if klass.budget_rate > 0 or protected <= queue.max_protected_runtime_s:
        return None
    return queue.max_protected_runtime_s


def pod_set_shapes(
    request: WorkloadRequest, state: LoopState, memory: SyncMemory, key: WorkloadKey
) -> tuple[PodSetShape, ...]:
    """The request's pod sets in the database's terms; a pod set asking GPUs may use every
    flavor of its kind (exclusive, shared, or the MIG profile it names), cheapest first."""
    rows = state.flavor_rows
    shapes: list[PodSetShape] = []
    for index, pod_set in enumerate(request.pod_sets):
        shapes.append(
            PodSetShape(
                name=f"set-{index}",
                count=pod_set.count,
                gpus=pod_set.gpus,
                flavor_ids=_flavor_ids(pod_set, rows) if pod_set.gpus else (),
                gpu_milli=pod_set.gpu_milli,
                cpu=Decimal(pod_set.cpu_milli) / MILLI,
                memory_gb=(Decimal(pod_set.memory_mib) / MIB_PER_GB).quantize(Decimal("0.001")),
            )
        )
    return tuple(shapes)


def _unoffered(request: WorkloadRequest, shapes: Sequence[PodSetShape]) -> str:
    """What no flavor of the database offers among the pod sets' GPU requests (a MIG profile
    no flavor has, a share of a GPU with no shared flavor, whole GPUs with no exclusive
    flavor), said per pod set; "" when every pod set asking GPUs has a flavor. Such pods
    cannot become a workload (a pod set asking GPUs names its flavor): before, the
    registration failed with only a log line, and the pods waited without a word."""
    words: list[str] = []
    for pod_set, shape in zip(request.pod_sets, shapes, strict=True):
        if not pod_set.gpus or shape.flavor_ids:
            continue
        if pod_set.mig_profile is not None:
            what = f"no flavor offers {MIG_RESOURCE_PREFIX}{pod_set.mig_profile}"
        elif pod_set.gpu_milli is not None:
            what = f"no shared flavor offers a share of a GPU ({GPU_MILLI})"
        else:
            what = f"no exclusive flavor offers whole GPUs ({GPU_RESOURCE})"
        members = pod_set.pods
        more = f" and {len(members) - 1} more like it" if len(members) > 1 else ""
        words.append(f"pod {members[0].name}{more}: {what}")
    return "; ".join(words)


def _flavor_ids(pod_set: PodSetRequest, rows: Mapping[int, Flavor]) -> tuple[int, ...]:
    if pod_set.mig_profile is not None:
        kind = [
            f
            for f in rows.values()
            if f.sharing == Sharing.MIG and f.mig_profile == pod_set.mig_profile
        ]
    elif pod_set.gpu_milli is not None:
        kind = [f for f in rows.values() if f.sharing == Sharing.SHARED]
    else:
        kind = [f for f in rows.values() if f.sharing == Sharing.EXCLUSIVE]
    kind.sort(key=lambda f: (f.hourly_price, f.name))
    return tuple(f.pk for f in kind)


def shape_info(shape: PodSetShape, rows: Mapping[int, Flavor]) -> PodSetInfo:
    """The core's form of a pod set shape (to compare with what the database holds)."""
    return PodSetInfo(
        count=shape.count,
        gpus=shape.gpus,
        flavors=tuple(rows[pk].name for pk in shape.flavor_ids),
        cpu_milli=round(shape.cpu * MILLI),
        memory_mib=round(shape.memory_gb * MIB_PER_GB),
        gpu_milli=MILLI if shape.gpu_milli is None else shape.gpu_milli,
    )


def _known(
    decision: SyncDecision,
    memory: SyncMemory,
    mirror: ClusterMirror,
    row: WorkloadRow,
    key: WorkloadKey,
    grouped: WorkloadRequest | InvalidWorkload | None,
    pods: Sequence[PodFacts],
    state: LoopState,
    leaf_tenants: Mapping[str, str | None],
    namespace_tenants: Mapping[str, str],
    classes: Iterable[str],
    now: float,
    at: datetime,
) -> None:
    """A live workload of the database and its pods (``at``: ``now`` as a datetime)."""
    info = row.info
    held = [p for p in pods if holds_node(p)]
    name = info.name
    memory.overlays.pop(name, None)
    if grouped is not None and isinstance(grouped, WorkloadRequest):
        checkpoint = grouped.last_checkpoint_at
        if (
            checkpoint is not None
            and row.state != WorkloadState.PENDING
            and checkpoint != info.last_checkpoint_at
        ):
            decision.checkpoints[row.id] = moment(checkpoint)
    elif isinstance(grouped, InvalidWorkload) and row.state != WorkloadState.PENDING:
        # Placed work whose pods now say something malformed (a ``gpupool.io/last-checkpoint``
        # that is no time): it keeps running, and its pods are told which annotation, once
        # (a Warning, but no FailedScheduling: they are scheduled).
        said = (
            UNREADABLE
            + "; ".join(grouped.errors)
            + "; the workload keeps running as it was admitted (an unreadable checkpoint is "
            "not counted: its last readable one is)"
        )
        if memory.complaints.get(key) != said:
            memory.complaints[key] = said
            told = tuple(p.ref for p in pods if is_live(p))
            if told:
                decision.events.append(PodEvent(told, "MalformedAnnotation", said, warning=True))
    if row.state != WorkloadState.PENDING and not isinstance(grouped, InvalidWorkload):
        _readable_again(memory, key)
    departed = memory.departed.get(name, [])
    if held and row.state in _PLACED and not row.eviction_reason:
        gone = _gone_members(row, pods, departed)
        if gone:  # a member pod vanished while others hold their nodes
            _lost_member(decision, memory, mirror, row, key, pods, held, departed, gone, at)
            return
        if row.state == WorkloadState.RUNNING:
            return  # running where it was placed (most of a sync's work): nothing to decide
    elif held and row.state == WorkloadState.RUNNING:
        return  # being evicted: its pods' going is gpupool's own
    live = [p for p in pods if is_live(p)]
    # Pods that ended and were deleted before a sync saw them end count as ended; a pod
    # deleted (or evicted) while it ran did not end.
    vanished = [p for p in departed if not p.finished]
    ended = [p for p in pods if p.finished] + [p for p in departed if p.finished]
    if row.state == WorkloadState.PENDING:
        _pending(
            decision,
            memory,
            mirror,
            row,
            key,
            grouped,
            pods,
            live,
            state,
            leaf_tenants,
            namespace_tenants,
            classes,
            at,
        )
        return
    placed = len(info.placement)
    if held:
        # A member of gpupool's own that ended on its node ran in this admission (one of an
        # earlier run is deleted and made again before the workload is admitted: ``_work``),
        # so it counts as started; a Job's or kubectl's earlier pods that ended do not.
        ran = (
            [p for p in pods if p.finished and p.node_name is not None]
            if row.origin == Origin.GPUPOOL
            else []
        )
        if (
            row.state == WorkloadState.ADMITTED
            and len(held) + len(ran) >= placed
            and all(p.phase == "Running" for p in held)
        ):
            starts = [p.started_at for p in [*held, *ran] if p.started_at is not None]
            begun = max([info.started_at or now, *starts])
            decision.steps.append(
                Step(row.id, name, WorkloadState.RUNNING, "its pods run", moment(min(begun, now)))
            )
        return
    if live and not row.eviction_reason and row.state == WorkloadState.ADMITTED:
        return  # pods there, not bound yet: apply binds them
    if ended and not live and not vanished and not row.eviction_reason:
        memory.departed.pop(name, None)
        if row.state == WorkloadState.ADMITTED:  # it ran and ended between two syncs
            starts = [p.started_at for p in ended if p.started_at is not None]
            begun = max([info.started_at or now, *starts])
            decision.steps.append(
                Step(row.id, name, WorkloadState.RUNNING, "its pods ran", moment(min(begun, now)))
            )
        if row.origin == Origin.CONTROLLER and _job_verdict(
            decision, memory, mirror, row, key, pods, at
        ):
            return
        failed = [p for p in ended if p.phase == "Failed"]
        if failed:
            decision.steps.append(Step(row.id, name, WorkloadState.FAILED, _failed(failed), at))
        else:
            decision.steps.append(
                Step(row.id, name, WorkloadState.SUCCEEDED, "all its pods succeeded", at)
            )
        return
    # Its pods hold no node any more: evicted, deleted, or lost.
    memory.departed.pop(name, None)
    if row.eviction_reason:
        why = f"evicted ({row.eviction_reason})"
        lost = ""
    elif row.state == WorkloadState.ADMITTED and not departed:
        # Admitted, and no pod of it was seen bound and gone: nothing ran, nothing was lost
        # (a Job's pod not made yet, or made again after a requeue) -- not a preemption; it
        # waits for its pods as work whose pods were deleted does. Before, each such cycle
        # read "its pods were removed outside gpupool": a preemption a cycle.
        why = "its pods were gone before gpupool bound them (nothing ran)"
        _deleted_steps(decision, memory, mirror, row, key, why, at)
        return
    else:
        failed_nodes = [p.node for p in info.placement if _node_failed(mirror.nodes.get(p.node))]
        lost, why = _vanished(failed_nodes, vanished)
        if lost == DELETED:
            _deleted_steps(decision, memory, mirror, row, key, why, at)
            return
    ends = row.eviction_reason in ENDING_REASONS
    if ends:
        why = f"evicted ({row.eviction_reason}): reclaimed, it ends and is not requeued"
    ends = ends or row.origin == Origin.BARE
    decision.steps.append(
        Step(row.id, name, WorkloadState.PREEMPTED, why, at, lost=lost, ends=ends)
    )
    if not ends:
        decision.steps.append(
            Step(row.id, name, WorkloadState.PENDING, "requeued after its eviction", at)
        )
        # It waits, out of the plan, for the pods its Job (or gpupool) makes again, as after
        # a Job's failed pod: planned now, it was admitted with nothing to bind.
        ours = row.origin == Origin.GPUPOOL
        missing = info.pod_count - sum(1 for p in live if not ours or made_by_gpupool(p))
        if missing > 0:
            memory.overlays[name] = Overlay(missing_pods=missing)


# Why placed pods vanished without an eviction of gpupool's (``_vanished``): a preemption
# event's reason (their node was lost; someone evicted them), or a plain delete (no event).
NODE_FAILURE, ADMIN, DELETED = "node-failure", "admin", "deleted"
# The states of placed work, whose lost member pods the sync looks for (``_lost_member``).
_PLACED = frozenset({WorkloadState.ADMITTED, WorkloadState.RUNNING})
# ``DisruptionTarget`` reasons that say the node was lost, not that someone evicted the pod.
_NODE_LOSS = frozenset({"DeletionByTaintManager", "DeletionByPodGC"})


def _vanished(failed_nodes: Sequence[str], vanished: Sequence[PodFacts]) -> tuple[str, str]:
    """Why a placed workload's pods vanished without an eviction of gpupool's, and the words
    of its transition: ``node-failure`` (a node of its placement failed, or the taint manager
    or the pod garbage collector deleted them), ``admin`` (someone evicted them: the Eviction
    API's ``DisruptionTarget``, a drain, a manual eviction), or ``deleted``: deleted (a
    ``kubectl delete``, their owner's cleanup) -- not a preemption. Without their last states
    (``vanished``: a loop that started after they went) it cannot tell: ``admin``."""
    disrupted = [
        (p, p.annotations[DISRUPTED_BY]) for p in vanished if DISRUPTED_BY in p.annotations
    ]
    node_lost = [p for p, reason in disrupted if reason in _NODE_LOSS]
    if failed_nodes or node_lost:
        node = failed_nodes[0] if failed_nodes else node_lost[0].node_name
        return NODE_FAILURE, f"lost: node {node} failed"
    if disrupted:
        pod, reason = disrupted[0]
        return ADMIN, f"pod {pod.name} was evicted outside gpupool ({reason or 'DisruptionTarget'})"
    deleted = [p for p in vanished if p.deleting]
    if deleted:
        more = f" (and {len(deleted) - 1} more)" if len(deleted) > 1 else ""
        return DELETED, f"pod {deleted[0].name}{more} was deleted (not evicted)"
    return ADMIN, "its pods were removed outside gpupool"


def _deleted_steps(
    decision: SyncDecision,
    memory: SyncMemory,
    mirror: ClusterMirror,
    row: WorkloadRow,
    key: WorkloadKey,
    why: str,
    at: datetime,
) -> None:
    """A placed workload whose pods were deleted, not evicted: no preemption. A bare pod's
    workload is cancelled (its owner deleted it; nothing makes it again), and so is a
    controller's whose Job was deleted; a controller's other pods are made again by it, and
    a workload submitted through gpupool gets its pods from gpupool again: requeued as
    itself, waiting for its pods (``running -> pending``, as a Job's retry)."""
    name = row.info.name
    gone = [job for job, facts in mirror.jobs_of(key).items() if facts is None]
    if row.origin == Origin.BARE or gone:
        reason = f"{why}; its Job {gone[0]} was deleted" if gone else why
        decision.steps.append(Step(row.id, name, WorkloadState.CANCELLED, reason, at))
        return
    maker = (
        "its controller makes it again"
        if row.origin == Origin.CONTROLLER
        else "gpupool makes it again"
    )
    decision.steps.append(Step(row.id, name, WorkloadState.PENDING, f"{why}; {maker}", at))
    memory.overlays[name] = Overlay(missing_pods=max(row.info.pod_count, 1))


def _lost_member(
    decision: SyncDecision,
    memory: SyncMemory,
    mirror: ClusterMirror,
    row: WorkloadRow,
    key: WorkloadKey,
    pods: Sequence[PodFacts],
    held: Sequence[PodFacts],
    departed: Sequence[PodFacts],
    gone: int,
    at: datetime,
) -> None:
    """A placed gang -- running, or admitted with its pods not all running yet -- with
    ``gone`` member pods gone (deleted, evicted outside gpupool, or lost with their node)
    while others still hold their nodes. The cluster is the truth about what runs: with
    fewer pods left than its minimum (those running, and an admitted one's pods apply is to
    bind) the gang cannot run, so it leaves as a whole -- its placements, GPUs and usage
    released, the transitions ``_vanished`` and ``_deleted_steps`` say (preempted, and
    requeued unless it was a bare pod; cancelled or requeued when deleted) -- and its
    members left are deleted once that is written (no half-gangs). At its minimum or above
    (an elastic gang) it goes on with the pods left, holding only their placements
    (``Shrink``); unless those cannot be written as a placement (``_kept_placements``):
    then it leaves as a whole too."""
    info = row.info
    name = info.name
    running = [p for p in held if not p.deleting]
    left = len(running)
    if row.state == WorkloadState.ADMITTED:
        ours = row.origin == Origin.GPUPOOL
        left += sum(1 for p in pods if _to_bind(p, ours))
    bound_nodes = [p.node_name for p in pods if p.node_name is not None]
    gone_nodes: list[str] = []
    for placement in info.placement:  # its placements no pod holds any more
        if placement.node in bound_nodes:
            bound_nodes.remove(placement.node)
        else:
            gone_nodes.append(placement.node)
    failed_nodes = [n for n in gone_nodes if _node_failed(mirror.nodes.get(n))]
    vanished = [p for p in departed if not p.finished]
    lost, why = _vanished(failed_nodes, vanished)
    if left >= info.gang_minimum:
        keep = _kept_placements(row, pods, departed, len(info.placement) - gone)
        if keep is not None:
            decision.shrinks.append(Shrink(row.id, name, keep, at, lost))
            ended = [p for p in departed if p.finished]  # their placements stay counted
            if ended:
                memory.departed[name] = ended
            else:
                memory.departed.pop(name, None)
            if running:
                decision.events.append(
                    PodEvent(
                        tuple(p.ref for p in running),
                        "GangShrunk",
                        f"{name} lost a member pod ({why}): it goes on with "
                        f"{counted(left, 'pod')}, at or above its minimum of "
                        f"{info.gang_minimum}, and holds only their GPUs",
                    )
                )
            return
        short = (
            f"{why}: its {left} pods left are not the first of each of its pod sets, which "
            "is all a placement can hold"
        )
    else:
        short = f"{why}: {left} of its pods left, below its minimum of {info.gang_minimum}"
    memory.departed.pop(name, None)
    if lost == DELETED:
        _deleted_steps(decision, memory, mirror, row, key, short, at)
    else:
        ends = row.origin == Origin.BARE
        decision.steps.append(
            Step(row.id, name, WorkloadState.PREEMPTED, short, at, lost=lost, ends=ends)
        )
        if not ends:
            decision.steps.append(
                Step(row.id, name, WorkloadState.PENDING, "requeued: its gang lost a member", at)
            )
            memory.overlays[name] = Overlay(missing_pods=max(info.pod_count, 1))
    rest = tuple(p.ref for p in held if not p.deleting)
    if rest:
        decision.release.append(
            Release(rest, f"{name} lost a member pod ({why}); no half-gangs: the rest go too")
        )


def _kept_placements(
    row: WorkloadRow, pods: Sequence[PodFacts], departed: Sequence[PodFacts], keep: int
) -> tuple[tuple[int, int, int], ...] | None:
    """The ``keep`` placements a gang that lost members keeps, as ``Shrink.keep`` gives
    them: those of its pods still bound, and of those that ended (their placements stay
    counted, as ``_gone_members`` counts them), each on its pod's node and in its pod set
    (``_pod_sets_of``); then, for the pods apply is to bind, the first others of their pod
    set. The pods kept become the first of each pod set, renumbered in order. None when no placement
    is kept, or when a pod set before one that keeps pods lost a pod: the snapshot reads a
    placement as the first of a workload's pods in pod-set order (``snapshot._placement``),
    and that cannot hold it."""
    info = row.info
    placement = info.placement
    slots: list[tuple[int, int]] = []  # each placement's (pod set index, pod index)
    for set_index, pod_set in enumerate(info.pod_sets):
        slots.extend((set_index, index) for index in range(pod_set.count))
    del slots[len(placement) :]
    free: dict[str, list[int]] = {}  # node -> the placements on it not taken yet, in order
    for position, placed in enumerate(placement):
        free.setdefault(placed.node, []).append(position)
    taken: set[int] = set()
    ours = row.origin == Origin.GPUPOOL
    holders = [p for p in pods if p.node_name is not None] + [p for p in departed if p.finished]
    for pod in holders:
        on_node = free.get(pod.node_name or "")
        if not on_node:
            continue
        sets = _pod_sets_of(pod, info.pod_sets, ours)
        mine = [i for i in on_node if slots[i][0] in sets]
        position = (mine or on_node)[0]
        on_node.remove(position)
        taken.add(position)
    # The pods apply is to bind (an admitted gang's): the first placements left of their
    # pod set; then (a pod bound off its placements) the first placements left.
    waiting = [p for p in pods if _to_bind(p, ours)] if row.state == WorkloadState.ADMITTED else []
    for pod in waiting:
        sets = _pod_sets_of(pod, info.pod_sets, ours)
        position = next((i for i, s in enumerate(slots) if i not in taken and s[0] in sets), -1)
        if position >= 0 and len(taken) < keep:
            taken.add(position)
    for position in range(len(placement)):
        if len(taken) >= keep:
            break
        taken.add(position)
    if not taken:
        return None
    counts = [0] * len(info.pod_sets)
    for position in taken:
        counts[slots[position][0]] += 1
    last = max(index for index, count in enumerate(counts) if count)
    if any(counts[index] != info.pod_sets[index].count for index in range(last)):
        return None
    renumbered = [0] * len(info.pod_sets)
    kept: list[tuple[int, int, int]] = []
    for position in sorted(taken):
        set_index, index = slots[position]
        kept.append((row.pod_set_ids[set_index], index, renumbered[set_index]))
        renumbered[set_index] += 1
    return tuple(kept)


def _pod_sets_of(pod: PodFacts, pod_sets: Sequence[PodSetInfo], ours: bool) -> set[int]:
    """The pod sets (by index) a placed pod may be of: the one gpupool made it for (``ours``:
    its pod-set annotation), else those whose pods ask what it asks -- GPUs (or MIG
    instances), milli-GPU, CPU, and memory to the MiB the database's GB round it to. Pod
    sets alike in all that hold the same on a node, so which of them does not matter."""
    if ours:
        text = pod.annotations.get(ANNOTATED, "")
        return {int(text)} if text.isdigit() else set()
    asked = pod.requests
    gpus = asked.gpus or sum(asked.mig.values())
    text = pod.annotations.get(GPU_MILLI, "")
    milli = int(text) if text.isdigit() else MILLI
    return {
        index
        for index, pod_set in enumerate(pod_sets)
        if (pod_set.gpus, pod_set.gpu_milli, pod_set.cpu_milli) == (gpus, milli, asked.cpu_milli)
        and abs(pod_set.memory_mib - asked.memory_mib) <= 1
    }


def _failed(failed: Sequence[PodFacts]) -> str:
    """Which pods failed, as a transition's reason says it."""
    more = f" (and {len(failed) - 1} more)" if len(failed) > 1 else ""
    return f"pod {failed[0].name} failed{more}"


def known_jobs(mirror: ClusterMirror, key: WorkloadKey) -> dict[JobKey, JobFacts] | None:
    """The Jobs of the workload's pods, when it has some and the cache knows every one;
    None otherwise (pods of no Job, or a Job deleted: the pods alone decide)."""
    jobs = mirror.jobs_of(key)
    if not jobs or any(facts is None for facts in jobs.values()):
        return None
    return {job: facts for job, facts in jobs.items() if facts is not None}


def job_outcome(
    jobs: Mapping[JobKey, JobFacts], pods: Sequence[PodFacts]
) -> JobFacts | Literal["wait", "more"]:
    """What the Jobs of a workload whose pods all ended say about it.

    A Job that failed ends the workload failed (that Job's facts are returned); Jobs that all
    completed end it succeeded (the first one's facts). Otherwise some Job is active and makes
    more pods -- the retry of a failed pod, or its further completions: ``more``. But only
    once every active Job has counted the ends the cache shows of its pods: until then its
    verdict may be on its way (the pod's end reaches gpupool and the Job controller at about
    the same time), so ``wait`` -- the Job's status change brings the workload back."""
    failed = [facts for facts in jobs.values() if facts.state == "failed"]
    if failed:
        return failed[0]
    active = [facts for facts in jobs.values() if facts.state == "active"]
    if not active:
        return next(iter(jobs.values()))
    for facts in active:
        mine = [p for p in pods if p.job == facts.key]
        if facts.failed < sum(p.phase == "Failed" for p in mine) or facts.succeeded < sum(
            p.phase == "Succeeded" for p in mine
        ):
            return "wait"
    return "more"


def _job_verdict(
    decision: SyncDecision,
    memory: SyncMemory,
    mirror: ClusterMirror,
    row: WorkloadRow,
    key: WorkloadKey,
    pods: Sequence[PodFacts],
    at: datetime,
) -> bool:
    """A placed workload of a Job whose pods all ended: the Job decides (True), or it has no
    Job the cache knows and the pods decide as for any other work (False).

    A Job still active makes the next pod itself, under the same workload label, so the
    workload is requeued as itself (``running -> pending``, its GPUs released and its usage
    closed; not a preemption: nothing was evicted) and waits, out of the plan, for that pod.
    """
    jobs = known_jobs(mirror, key)
    if jobs is None:
        return False
    name = row.info.name
    # The latest failure first: after a retry the pods of the earlier tries are still there.
    failed = sorted(
        (p for p in pods if p.phase == "Failed"), key=lambda p: p.created_at, reverse=True
    )
    outcome = job_outcome(jobs, pods)
    if outcome == "wait":
        return True
    if isinstance(outcome, JobFacts):
        if outcome.state == "failed":
            reason = outcome.words() if not failed else f"{_failed(failed)}; {outcome.words()}"
            decision.steps.append(Step(row.id, name, WorkloadState.FAILED, reason, at))
        else:
            decision.steps.append(Step(row.id, name, WorkloadState.SUCCEEDED, outcome.words(), at))
        return True
    active = [job for job, facts in jobs.items() if facts.state == "active"]
    retrying = next((p.job for p in failed if p.job in active), active[0])
    if failed:
        reason = f"{_failed(failed)}; its Job {retrying} retries it"
    else:
        reason = f"its pods succeeded; its Job {retrying} runs more"
    decision.steps.append(Step(row.id, name, WorkloadState.PENDING, reason, at))
    memory.overlays[name] = Overlay(missing_pods=max(row.info.pod_count, 1))
    return True


def _node_failed(node: NodeFacts | None) -> bool:
    """Whether the cluster lost the node: gone, not Ready, or being deleted."""
    return node is None or not node.ready or node.deleting


def _pending(
    decision: SyncDecision,
    memory: SyncMemory,
    mirror: ClusterMirror,
    row: WorkloadRow,
    key: WorkloadKey,
    grouped: WorkloadRequest | InvalidWorkload | None,
    pods: Sequence[PodFacts],
    live: Sequence[PodFacts],
    state: LoopState,
    leaf_tenants: Mapping[str, str | None],
    namespace_tenants: Mapping[str, str],
    classes: Iterable[str],
    at: datetime,
) -> None:
    """A pending workload: its overlay, and for one from the cluster its pods' changes."""
    info = row.info
    name = info.name
    if row.origin == Origin.GPUPOOL:
        waiting = [p for p in live if p.node_name is None and made_by_gpupool(p)]
        missing = max(info.pod_count - len(waiting), 0)
        if missing:
            memory.overlays[name] = Overlay(missing_pods=missing)
        _strangers(decision, memory, key, live)
        return
    if not live:
        jobs = known_jobs(mirror, key) if row.origin == Origin.CONTROLLER else None
        if jobs is not None:
            outcome = job_outcome(jobs, pods)
            if isinstance(outcome, JobFacts):
                # A Job that completes while its workload waits (none of gpupool's pods ran
                # it: its successes were counted before) leaves nothing to run: cancelled.
                to_state = (
                    WorkloadState.FAILED if outcome.state == "failed" else WorkloadState.CANCELLED
                )
                decision.steps.append(Step(row.id, name, to_state, outcome.words(), at))
            else:  # its Job makes the next pod: wait for it, out of the plan
                memory.overlays[name] = Overlay(missing_pods=max(info.pod_count, 1))
            return
        gone = [job for job, facts in mirror.jobs_of(key).items() if facts is None]
        why = f"its Job {gone[0]} was deleted" if gone else "its pods were deleted"
        decision.steps.append(Step(row.id, name, WorkloadState.CANCELLED, why, at))
        return
    if grouped is None:
        return
    errors = _errors(grouped, leaf_tenants, namespace_tenants, classes)
    if errors or not isinstance(grouped, WorkloadRequest):
        _complain(
            decision,
            memory,
            key,
            pods,
            "gpupool will not schedule these pods: " + "; ".join(errors),
        )
        memory.overlays[name] = Overlay(excluded=True, malformed="; ".join(errors))
        return
    shapes = pod_set_shapes(grouped, state, memory, key)
    unoffered = _unoffered(grouped, shapes)
    if unoffered:  # left out as pods too large are: it can never run as asked (no pod sets
        # written: a pod set asking GPUs names a flavor), and its explanation says why
        _complain(decision, memory, key, pods, "gpupool will not schedule these pods: " + unoffered)
        memory.overlays[name] = Overlay(excluded=True, why=unoffered)
        return
    wanted = tuple(shape_info(shape, state.flavor_rows) for shape in shapes)
    min_member = stored_min_member(grouped)
    if wanted != info.pod_sets or min_member != info.min_member:
        decision.pod_sets[row.id] = (shapes, min_member)
    if _refused(decision, memory, key, grouped, shapes, pods, state):
        return
    memory.complaints.pop(key, None)
    known = frozenset(state.nodes)
    allowed = tuple(mirror.allowed_nodes(ps.constraints, known) for ps in grouped.pod_sets)
    overlay = Overlay(missing_pods=grouped.missing_pods, allowed=allowed)
    if overlay != Overlay(allowed=tuple(None for _ in allowed)):
        memory.overlays[name] = overlay


# -- what other schedulers hold ---------------------------------------------------------------


def node_with_usage(
    node: NodeInfo, usage: ResourceAmounts, used_gpus: set[int], replicas: int
) -> NodeInfo:
    """The node less what other schedulers' pods (or pods the database does not place) hold:
    their CPU and memory, and as many GPUs as they ask, taken from the highest free indices
    as its ``foreign_gpus`` (not free, but part of the node's size: they come back)."""
    devices = usage.devices(replicas)
    taken: set[int] = set()
    for index in range(node.gpus - 1, -1, -1):
        if len(taken) >= devices:
            break
        if index not in used_gpus and index not in node.unhealthy_gpus:
            taken.add(index)
    return dataclasses.replace(
        node,
        cpu_milli=max(node.cpu_milli - usage.cpu_milli, 0),
        memory_mib=max(node.memory_mib - usage.memory_mib, 0),
        foreign_gpus=frozenset(taken),
    )


def with_foreign_usage(
    snapshot: Snapshot,
    usage: Mapping[str, ResourceAmounts],
    labels: Mapping[str, Mapping[str, str]],
) -> Snapshot:
    """The snapshot's nodes less what pods it does not place hold (``usage``, per node): each
    such node ``node_with_usage``, its GPUs taken around those its workloads are placed on
    (``labels``: the nodes' labels, for a shared GPU's replicas). The loop's view applies the
    cluster's usage (``ControlLoop._with_cluster_usage``), the pages' the recorded one
    (``Node.foreign_usage``, ``control.queries``)."""
    if not usage:
        return snapshot
    used: dict[str, set[int]] = {}
    for workload in snapshot.workloads:
        for pod in workload.placement:
            if pod.node in usage:
                used.setdefault(pod.node, set()).update(pod.gpus)
    nodes: list[NodeInfo] = []
    for node in snapshot.nodes:
        amounts = usage.get(node.name)
        if amounts is None:
            nodes.append(node)
            continue
        replicas = replicas_of(labels.get(node.name, {}))
        nodes.append(node_with_usage(node, amounts, used.get(node.name, set()), replicas))
    return dataclasses.replace(snapshot, nodes=tuple(nodes))
