"""The cluster side of gpupool as plain facts, and the one protocol every backend implements.

A backend (Kubernetes, or the simulated cluster) keeps a cache of the cluster's nodes and of
the pods that ask for gpupool (``spec.schedulerName: gpupool``), and acts on them: it binds
whole gangs, evicts victim sets, creates and deletes the pods of workloads submitted through
gpupool, and records Events that explain. Everything here is plain frozen data: no Django, no
Kubernetes client types. Units follow the decision core (``gpupool.scheduler.types``): times
are POSIX seconds, CPU is milli-CPU, memory is MiB, GPUs are whole devices.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Generic, Literal, NamedTuple, Protocol, TypeVar

SCHEDULER_NAME = "gpupool"
GPU_RESOURCE = "nvidia.com/gpu"
MIG_RESOURCE_PREFIX = "nvidia.com/mig-"
PRODUCT_LABEL = "nvidia.com/gpu.product"
CLIQUE_LABEL = "nvidia.com/gpu.clique"
ZONE_LABEL = "topology.kubernetes.io/zone"
# Pods created by create_pods carry this label, so a requeue knows gpupool recreates them.
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
WORKLOAD_LABEL = "gpupool.io/workload"  # the workload a pod belongs to (DESIGN §4)

_EMPTY: Mapping[str, int] = MappingProxyType({})

EventType = Literal["Normal", "Warning"]
JobState = Literal["active", "complete", "failed"]
JOB_KIND = "Job"  # the ownerReference kind of a batch/v1 Job's pods
TERMINAL_PHASES: frozenset[str] = frozenset({"Succeeded", "Failed"})


class ClusterUnavailable(RuntimeError):
    """The backend could not bring its cache up to date (e.g. the API server is unreachable)."""


class PodKey(NamedTuple):
    """A pod's place in the cluster: namespace and name (how caches and deltas key pods)."""

    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"


class JobKey(NamedTuple):
    """A batch/v1 Job's place in the cluster: namespace and name."""

    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True)
class Arrivals:
    """The pods waiting for a node that appeared since the last ``sync()``: how many, when
    (``time.monotonic()``) the first and the latest did, and ``since`` when the counting
    began (the sync; 0: not known)."""

    count: int = 0
    first: float = 0.0
    last: float = 0.0
    since: float = 0.0

    def then(self, at: float) -> Arrivals:
        """These and one more, at ``at``."""
        return Arrivals(self.count + 1, self.first if self.count else at, at, self.since)

    @property
    def mean_gap(self) -> float:
        """The mean time between two of them (0 with fewer than two)."""
        return (self.last - self.first) / (self.count - 1) if self.count > 1 else 0.0

    @property
    def stream_gap(self) -> float:
        """The mean time each took to come, counted from ``since`` (the stretch before the
        first included): a stream's pace that a clump does not speed up (a watch hands pods
        on in clumps, clients make them so), where ``mean_gap`` between the first and the
        last of a clump is near 0. ``mean_gap`` when ``since`` is not known."""
        if self.since <= 0.0 or self.count == 0:
            return self.mean_gap
        return max(self.last - self.since, 0.0) / self.count


@dataclass(frozen=True, slots=True)
class Allowance:
    """A client's limit on the requests it starts, a token bucket as Kubernetes clients keep:
    ``rate`` a second on average, up to ``burst`` kept, and when (``time.monotonic()``) the
    bucket will be full if no request starts before (now or earlier: full already). Turns
    the full bucket cannot hold are lost for good."""

    rate: float
    burst: int
    full_at: float


@dataclass(frozen=True, slots=True)
class PodRef:
    """One pod to act on; ``uid`` makes the action refuse a newer pod of the same name."""

    namespace: str
    name: str
    uid: str = ""

    @property
    def key(self) -> PodKey:
        """The namespace/name key of the pod."""
        return PodKey(self.namespace, self.name)

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True)
class ResourceAmounts:
    """CPU, memory and GPU devices: a pod's requests or a node's allocatable capacity."""

    cpu_milli: int = 0
    memory_mib: int = 0
    gpus: int = 0  # nvidia.com/gpu
    mig: Mapping[str, int] = field(default_factory=lambda: _EMPTY)  # profile -> instances

    def plus(self, other: ResourceAmounts) -> ResourceAmounts:
        """The sum of two amounts."""
        mig = dict(self.mig)
        for profile, count in other.mig.items():
            mig[profile] = mig.get(profile, 0) + count
        return ResourceAmounts(
            self.cpu_milli + other.cpu_milli,
            self.memory_mib + other.memory_mib,
            self.gpus + other.gpus,
            MappingProxyType({p: c for p, c in mig.items() if c}) if mig else _EMPTY,
        )

    def minus(self, other: ResourceAmounts) -> ResourceAmounts:
        """This amount less ``other`` (``other`` is assumed to be part of it)."""
        negated = {profile: -count for profile, count in other.mig.items()}
        return self.plus(ResourceAmounts(-other.cpu_milli, -other.memory_mib, -other.gpus, negated))

    @property
    def is_zero(self) -> bool:
        """Whether nothing at all is asked or offered."""
        return not (self.cpu_milli or self.memory_mib or self.gpus or any(self.mig.values()))

    def devices(self, replicas: int = 1) -> int:
        """The GPU devices these amounts take on a node whose GPUs are shared ``replicas``
        ways (``nvidia.com/gpu.replicas``: pods asking one each share a GPU), MIG instances
        included."""
        gpus = self.gpus if replicas <= 1 else -(-self.gpus // replicas)
        return gpus + sum(self.mig.values())

    def as_json(self) -> dict[str, object]:
        """The amounts as a JSON object (``Node.foreign_usage``); ``{}`` when zero."""
        if self.is_zero:
            return {}
        out: dict[str, object] = {
            "cpu_milli": self.cpu_milli,
            "memory_mib": self.memory_mib,
            "gpus": self.gpus,
        }
        if self.mig:
            out["mig"] = dict(sorted(self.mig.items()))
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ResourceAmounts:
        """The amounts ``as_json`` wrote (missing keys are zero)."""
        mig = {str(p): int(c) for p, c in dict(data.get("mig") or {}).items() if int(c)}
        return cls(
            int(data.get("cpu_milli", 0)),
            int(data.get("memory_mib", 0)),
            int(data.get("gpus", 0)),
            MappingProxyType(mig) if mig else _EMPTY,
        )


@dataclass(frozen=True, slots=True)
class Taint:
    """A node taint; only NoSchedule and NoExecute keep pods away (PreferNoSchedule scores)."""

    key: str
    value: str = ""
    effect: str = "NoSchedule"


@dataclass(frozen=True, slots=True)
class Toleration:
    """A pod toleration; an empty key with operator Exists tolerates every taint."""

    key: str = ""
    operator: str = "Equal"  # Equal | Exists
    value: str = ""
    effect: str = ""  # "" tolerates every effect


@dataclass(frozen=True, slots=True)
class SelectorRequirement:
    """One ``matchExpressions`` / ``matchFields`` entry of a node selector term."""

    key: str
    operator: str  # In | NotIn | Exists | DoesNotExist | Gt | Lt
    values: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class NodeSelectorTerm:
    """One term of a required node affinity: all its requirements must hold."""

    match_expressions: tuple[SelectorRequirement, ...] = ()
    match_fields: tuple[SelectorRequirement, ...] = ()


@dataclass(frozen=True, slots=True)
class NodeFacts:
    """A node as the cache knows it: labels, taints, capacity, readiness, cordon."""

    name: str
    uid: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    allocatable: ResourceAmounts = ResourceAmounts()
    capacity: ResourceAmounts = ResourceAmounts()
    max_pods: int = 0
    ready: bool = True
    unschedulable: bool = False  # cordoned (spec.unschedulable)
    deleting: bool = False
    created_at: float = 0.0

    @property
    def gpu_product(self) -> str | None:
        """The GPU model from GPU feature discovery (``nvidia.com/gpu.product``), if labelled."""
        return self.labels.get(PRODUCT_LABEL) or None

    @property
    def nvlink_domain(self) -> str:
        """The NVLink domain: the ``nvidia.com/gpu.clique`` label, else the node itself."""
        return self.labels.get(CLIQUE_LABEL) or self.name

    @property
    def zone(self) -> str | None:
        """The ``topology.kubernetes.io/zone`` label, if any."""
        return self.labels.get(ZONE_LABEL) or None


@dataclass(frozen=True, slots=True)
class PodFacts:
    """A pod that asks for gpupool, as the cache knows it (its gpupool.io/* annotations only)."""

    namespace: str
    name: str
    uid: str
    scheduler_name: str = SCHEDULER_NAME
    node_name: str | None = None
    phase: str = "Pending"
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)  # the gpupool.io/* ones
    requests: ResourceAmounts = ResourceAmounts()
    node_selector: Mapping[str, str] = field(default_factory=dict)
    # None: no required node affinity. Otherwise the terms, ORed.
    required_node_affinity: tuple[NodeSelectorTerm, ...] | None = None
    tolerations: tuple[Toleration, ...] = ()
    owner_kind: str | None = None  # the controlling owner reference (Job, JobSet, ...)
    owner_name: str | None = None
    deleting: bool = False  # metadata.deletionTimestamp is set
    created_at: float = 0.0
    started_at: float | None = None  # status.startTime

    @property
    def key(self) -> PodKey:
        """The namespace/name key of the pod."""
        return PodKey(self.namespace, self.name)

    @property
    def ref(self) -> PodRef:
        """A reference that acts on exactly this pod (its uid included)."""
        return PodRef(self.namespace, self.name, self.uid)

    @property
    def finished(self) -> bool:
        """Whether the pod has ended (Succeeded or Failed)."""
        return self.phase in TERMINAL_PHASES

    @property
    def job(self) -> JobKey | None:
        """The batch/v1 Job that controls the pod, if one does."""
        if self.owner_kind != JOB_KIND or not self.owner_name:
            return None
        return JobKey(self.namespace, self.owner_name)


@dataclass(frozen=True, slots=True)
class JobFacts:
    """A batch/v1 Job whose pods ask for gpupool (its template's ``schedulerName``).

    ``state`` is ``complete`` or ``failed`` once the Job controller has decided so (the
    ``Complete``/``SuccessCriteriaMet`` or ``Failed``/``FailureTarget`` condition; ``reason``
    and ``message`` are that condition's), else ``active``: the controller still makes pods
    as its spec asks (a failed pod is retried until the backoff limit). ``succeeded`` and
    ``failed`` count the pods the controller has seen end (its status counts and the ended
    pods it has not counted yet, ``uncountedTerminatedPods``). ``workload`` is the
    ``gpupool.io/workload`` label of its pod template ("" without one): the workload its pods
    join, known from the Job alone while it has no pods (a loop that restarted while the Job
    made the next pod of a requeued workload).
    """

    namespace: str
    name: str
    uid: str = ""
    state: JobState = "active"
    reason: str = ""
    message: str = ""
    active: int = 0
    succeeded: int = 0
    failed: int = 0
    workload: str = ""

    @property
    def key(self) -> JobKey:
        """The namespace/name key of the Job."""
        return JobKey(self.namespace, self.name)

    @property
    def finished(self) -> bool:
        """Whether the controller has given its verdict (complete or failed)."""
        return self.state != "active"

    def words(self) -> str:
        """The Job's verdict as a transition's reason says it."""
        if self.state == "complete":
            return f"its Job {self.key} completed"
        why = ": ".join(part for part in (self.reason, self.message) if part)
        return f"its Job {self.key} failed" + (f" ({why})" if why else "")


K = TypeVar("K")
V = TypeVar("V")


@dataclass(frozen=True, slots=True)
class Change(Generic[V]):
    """How one object differs between two syncs: ``before`` None is added, ``after`` removed."""

    before: V | None
    after: V | None

    @property
    def kind(self) -> Literal["added", "changed", "removed"]:
        """Whether the object was added, changed or removed."""
        if self.before is None:
            return "added"
        return "removed" if self.after is None else "changed"


def _of_kind(changes: Mapping[K, Change[V]], kind: str) -> frozenset[K]:
    return frozenset(key for key, change in changes.items() if change.kind == kind)


@dataclass(frozen=True, slots=True)
class ClusterDelta:
    """What changed since the previous ``sync()``: net changes, so an add-then-delete is none.

    The first sync reports every object as added. A pod deleted and recreated under the same
    name between two syncs is ``changed`` with a new ``uid``.
    """

    nodes: Mapping[str, Change[NodeFacts]] = field(default_factory=dict)
    pods: Mapping[PodKey, Change[PodFacts]] = field(default_factory=dict)
    foreign_usage: frozenset[str] = frozenset()  # nodes whose other schedulers' usage changed
    relisted: bool = False  # a full re-list ran (first sync, 410 Gone): the delta is still exact
    jobs: Mapping[JobKey, Change[JobFacts]] = field(default_factory=dict)

    @property
    def empty(self) -> bool:
        """Whether nothing changed."""
        return not (self.nodes or self.pods or self.foreign_usage or self.jobs)

    def nodes_of(self, kind: Literal["added", "changed", "removed"]) -> frozenset[str]:
        """Names of the nodes added, changed or removed."""
        return _of_kind(self.nodes, kind)

    def pods_of(self, kind: Literal["added", "changed", "removed"]) -> frozenset[PodKey]:
        """Keys of the pods added, changed or removed."""
        return _of_kind(self.pods, kind)


def apply_usage_changes(
    usage: dict[str, ResourceAmounts],
    changes: Mapping[PodKey, Change[tuple[str, ResourceAmounts]]],
) -> frozenset[str]:
    """Add other schedulers' pod changes (node, requests) into per-node ``usage``, in place.

    Returns the nodes whose usage really changed (a pod that moved its requests back and
    forth between two syncs leaves its node out).
    """
    touched: dict[str, ResourceAmounts] = {}
    for change in changes.values():
        for side, sign in ((change.before, -1), (change.after, 1)):
            if side is None:
                continue
            node, amounts = side
            current = usage.get(node, ResourceAmounts())
            touched.setdefault(node, current)
            updated = current.plus(amounts) if sign > 0 else current.minus(amounts)
            if updated.is_zero:
                usage.pop(node, None)
            else:
                usage[node] = updated
    return frozenset(
        node for node, before in touched.items() if usage.get(node, ResourceAmounts()) != before
    )


@dataclass(frozen=True, slots=True)
class ClusterView:
    """The cache after one ``sync()``.

    ``nodes``, ``pods`` and ``foreign_usage`` are read-only views of the backend's cache: they
    show the state as of this sync and move on at the next ``sync()``, so keep from a view what
    you need (the facts themselves are immutable) before syncing again. ``revision`` grows by
    one at each sync that changed something and stays put otherwise.
    """

    revision: int
    nodes: Mapping[str, NodeFacts]
    pods: Mapping[PodKey, PodFacts]  # ours only: spec.schedulerName == gpupool
    foreign_usage: Mapping[str, ResourceAmounts]  # per node: requests of others' live pods
    delta: ClusterDelta
    stale: bool = False  # some watch is reconnecting: the cache may lag the cluster
    synced_at: float = 0.0
    # The Jobs whose pod template asks for gpupool (none on a backend without Jobs).
    jobs: Mapping[JobKey, JobFacts] = field(default_factory=lambda: MappingProxyType({}))


@dataclass(frozen=True, slots=True)
class PodBinding:
    """One member of a gang and the node it goes to."""

    pod: PodRef
    node: str


PodActionStatus = Literal[
    "bound", "evicted", "created", "deleted", "exists", "refused", "gone", "skipped", "failed"
]


@dataclass(frozen=True, slots=True)
class PodResult:
    """What happened to one pod: a status from ``PodActionStatus`` and why."""

    pod: PodRef
    status: PodActionStatus
    message: str = ""


@dataclass(frozen=True, slots=True)
class BindOutcome:
    """A gang bind: every member bound (``ok``), or none left bound.

    When a member fails, ``failed`` names it and ``error`` says why; the members that had
    been bound are removed again and listed in ``rolled_back``. ``left_bound`` lists any
    that could not be removed (the API refused or was unreachable): the caller must remove
    them (``delete_pods``) before the workload is retried.
    """

    bound: tuple[PodRef, ...] = ()
    failed: PodRef | None = None
    error: str = ""
    rolled_back: tuple[PodRef, ...] = ()
    left_bound: tuple[PodResult, ...] = ()

    @property
    def ok(self) -> bool:
        """Whether the whole gang is bound."""
        return self.failed is None and not self.error


@dataclass(frozen=True, slots=True)
class EvictOutcome:
    """One victim set's evictions, pod by pod (statuses: evicted, refused, gone, skipped, failed).

    ``refused`` is a PodDisruptionBudget's 429. When a dry run finds a refusal, no pod of the
    set is evicted (the others are ``skipped``): the caller aborts the victim set.
    """

    results: tuple[PodResult, ...] = ()

    @property
    def refused(self) -> tuple[PodResult, ...]:
        """The pods whose disruption budget refused the eviction."""
        return tuple(r for r in self.results if r.status == "refused")

    @property
    def complete(self) -> bool:
        """Whether every pod is evicted or already gone: the capacity is on its way back."""
        return all(r.status in ("evicted", "gone") for r in self.results)


@dataclass(frozen=True, slots=True)
class PodsOutcome:
    """Pod-by-pod results of ``create_pods`` (created, exists, failed) or ``delete_pods``."""

    results: tuple[PodResult, ...] = ()

    @property
    def ok(self) -> bool:
        """Whether no pod failed."""
        return all(r.status != "failed" for r in self.results)


@dataclass(frozen=True, slots=True)
class NewPod:
    """A pod of a workload submitted through gpupool (``create_pods`` adds schedulerName).

    ``gpu_resource`` is ``nvidia.com/gpu`` or ``nvidia.com/mig-<profile>``; ``labels`` and
    ``annotations`` carry the gpupool.io/* contract (queue, workload, min-member, ...).
    """

    namespace: str
    name: str
    image: str
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    gpu_resource: str = GPU_RESOURCE
    gpus: int = 0
    cpu_milli: int = 0
    memory_mib: int = 0
    command: tuple[str, ...] = ()
    node_selector: Mapping[str, str] = field(default_factory=dict)
    tolerations: tuple[Toleration, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)  # the container's environment


EventOutcome = Literal["created", "updated", "unchanged", "failed"]


@dataclass(frozen=True, slots=True)
class EventRequest:
    """One Event to put on a pod (``record_events`` takes many)."""

    pod: PodRef
    reason: str
    message: str
    event_type: EventType = "Normal"


JobSuspendStatus = Literal["suspended", "gone", "failed"]


@dataclass(frozen=True, slots=True)
class JobSuspendResult:
    """What ``suspend_job`` did: ``suspended`` (the Job's ``spec.suspend`` is true now, or
    already was: its controller deletes its active pods and makes none until it is resumed),
    ``gone`` (no such Job) or ``failed`` (the API refused or was unreachable; ``message``
    says why)."""

    job: JobKey
    status: JobSuspendStatus
    message: str = ""


# On a node gpupool cordoned (``set_node_unschedulable``): its own cordon, the only one it
# lifts; a node cordoned by anyone else (``kubectl cordon``) stays so.
CORDONED_BY_GPUPOOL = "gpupool.io/cordoned"

NodeCordonStatus = Literal["cordoned", "uncordoned", "unchanged", "kept", "gone", "failed"]


@dataclass(frozen=True, slots=True)
class NodeCordonResult:
    """What ``set_node_unschedulable`` did: ``cordoned`` or ``uncordoned`` (the node's
    ``spec.unschedulable`` changed), ``unchanged`` (it already was so), ``kept`` (asked to
    lift a cordon gpupool did not make: left cordoned), ``gone`` (no such node) or
    ``failed`` (the API refused or was unreachable; ``message`` says why)."""

    node: str
    status: NodeCordonStatus
    message: str = ""


class ClusterBackend(Protocol):
    """What the control loop needs from a cluster; the Kubernetes and simulated backends.

    Errors: ``sync`` raises ``ClusterUnavailable`` when it cannot produce a view (the first
    list never completed); later it returns the last known state with ``stale`` set while a
    watch reconnects. The acting methods never raise for a refusal or an API error: they
    return outcomes pod by pod (an unreachable API is a ``failed`` result), so one bad pod
    never stops the rest of a cycle's apply.

    ``concurrent_apply`` says whether the acting methods may run in a thread of their own
    while the loop's thread calls ``sync`` and ``record_events`` (the in-process loop's
    pipeline, ``docs/control-loop.md``): True for the Kubernetes backend, whose requests go
    through thread-safe workers; False where one thread must do everything.
    """

    concurrent_apply: bool

    def sync(self) -> ClusterView:
        """Bring the cache up to date (incrementally: never a full re-list per call)."""
        ...

    def bind(self, gang: Sequence[PodBinding]) -> BindOutcome:
        """Bind every member of a gang, or leave none bound. Re-binding to the same node is done."""
        ...

    def bind_many(self, gangs: Mapping[str, Sequence[PodBinding]]) -> dict[str, BindOutcome]:
        """Bind several gangs, each whole or not at all as ``bind`` does, one outcome per key.

        A backend may bind them at once (the Kubernetes one does, within its client limit);
        one gang's failure rolls back that gang only, never another.
        """
        ...

    def wait_for_change(self, timeout_s: float) -> bool:
        """Wait up to ``timeout_s`` seconds for the cluster's pods to change since the last
        ``sync()``; True as soon as they did. A backend that cannot tell waits it out and
        says False (the loop then keeps its period)."""
        ...

    def arrivals(self) -> Arrivals:
        """The pods waiting for a node that appeared since the last ``sync()`` (how many, the
        first's and the latest's time): the loop's batching window ends once they pause.
        None counted when none did, or the backend cannot tell (the window runs its length)."""
        ...

    def allowance(self) -> Allowance | None:
        """The client's request allowance now (its rate, burst and when its bucket will be
        full): the loop starts a cycle for a stream of new pods before turns are lost
        (``runner.wait_next_cycle``). None: no such limit."""
        ...

    def evict(self, pods: Sequence[PodRef], reason: str) -> EvictOutcome:
        """Evict one victim set, honouring disruption budgets; ``reason`` goes in an Event."""
        ...

    def create_pods(self, pods: Sequence[NewPod]) -> PodsOutcome:
        """Create the pods of a workload submitted through gpupool (an existing one is fine)."""
        ...

    def set_node_unschedulable(self, node: str, unschedulable: bool) -> NodeCordonResult:
        """Cordon the node in the cluster (``spec.unschedulable``, as ``kubectl cordon``,
        marked ``CORDONED_BY_GPUPOOL``) or lift gpupool's own cordon; a cordon someone else
        made is neither taken over nor lifted. Idempotent; a conflicting write is retried."""
        ...

    def delete_pods(self, pods: Sequence[PodRef], reason: str) -> PodsOutcome:
        """Delete pods (a cancelled workload); a pod already gone counts as deleted."""
        ...

    def suspend_job(self, job: JobKey) -> JobSuspendResult:
        """Suspend a batch/v1 Job (``spec.suspend: true``, as Kueue does to a Job it does not
        admit): its controller deletes the Job's active pods and makes no new ones, so a
        cancelled workload's pods are removed with the controller rather than against it
        (deleting them, the controller made them again and counted each as a failure until
        the Job failed). Idempotent: a suspended Job is ``suspended`` again."""
        ...

    def record_event(
        self, pod: PodRef, reason: str, message: str, event_type: EventType = "Normal"
    ) -> EventOutcome:
        """Explain something on a pod (``kubectl describe pod`` shows it); repeats are cheap."""
        ...

    def record_events(self, events: Sequence[EventRequest]) -> list[EventOutcome]:
        """Many Events, each as ``record_event`` records it; an outcome per event, in order.
        A backend may send them at once (the Kubernetes one does, within its client limit),
        so a cycle's hundreds of explanations do not wait one round trip after another."""
        ...

    def now(self) -> float:
        """The backend's clock in POSIX seconds (the wall clock on Kubernetes)."""
        ...

    def close(self) -> None:
        """Stop background work and release connections; the backend is unusable afterwards."""
        ...
