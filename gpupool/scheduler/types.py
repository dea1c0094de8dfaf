"""Plain data the decision core reads (a snapshot, a policy) and writes (a plan).

Units inside the core: times are POSIX seconds (floats), GPU quota and usage are milli-GPU
(a whole GPU is ``MILLI``), CPU is milli-CPU and memory is MiB. The scenario format
(scenario.py) speaks in GPUs, cores and GB and converts at the edge. ``MILLI``,
``MIB_PER_GB`` and ``SECONDS_PER_HOUR`` are the core's one copy of each conversion.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final, Literal

MILLI: Final = 1000  # milli-GPU in a whole GPU (and milli-CPU in a core)
MIB_PER_GB: Final = 1024
SECONDS_PER_HOUR: Final = 3600.0

Sharing = Literal["exclusive", "shared"]
Topology = Literal["domain", "preferred"]
PreemptionPolicy = Literal["PreemptLowerPriority", "Never"]
WorkloadState = Literal["pending", "running"]
# DESIGN §2: a budget that runs out demotes its work, never evicts it.
EvictReason = Literal["preempt", "reclaim", "idle"]
PendingReason = Literal[
    "budget",
    "quota",
    "capacity",
    "fragmentation",
    "topology",
    "gang",
    "waiting-for-preemption",
    "behind",
]


@dataclass(frozen=True, slots=True)
class MigInfo:
    """The MIG profile a flavor stands for, e.g. ``3g.20gb`` cut from an ``a100-40gb``."""

    gpu_model: str
    profile: str


@dataclass(frozen=True, slots=True)
class FlavorInfo:
    """A kind of GPU resource and how its GPUs are shared."""

    name: str
    sharing: Sharing = "exclusive"
    gpu_memory_gb: float = 0.0
    hourly_price: float = 0.0
    mig: MigInfo | None = None


@dataclass(frozen=True, slots=True)
class NodeInfo:
    """One node of the pool as inventory: its GPUs, CPU, memory and NVLink domain.

    ``foreign_gpus`` are GPUs that pods gpupool does not place hold (another scheduler's):
    not free this cycle, like ``unhealthy_gpus``, but part of the node's size, since they
    come back when those pods end (what "never fits" is judged against counts them)."""

    name: str
    flavor: str
    gpus: int
    cpu_milli: int
    memory_mib: int
    domain: str
    unhealthy_gpus: frozenset[int] = frozenset()
    cordoned: bool = False
    physical_gpus: int | None = None
    foreign_gpus: frozenset[int] = frozenset()

    # Written out, as ``WorkloadInfo.__init__`` (the first read builds one per node).
    def __init__(
        self,
        name: str,
        flavor: str,
        gpus: int,
        cpu_milli: int,
        memory_mib: int,
        domain: str,
        unhealthy_gpus: frozenset[int] = frozenset(),
        cordoned: bool = False,
        physical_gpus: int | None = None,
        foreign_gpus: frozenset[int] = frozenset(),
    ) -> None:
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "flavor", flavor)
        object.__setattr__(self, "gpus", gpus)
        object.__setattr__(self, "cpu_milli", cpu_milli)
        object.__setattr__(self, "memory_mib", memory_mib)
        object.__setattr__(self, "domain", domain)
        object.__setattr__(self, "unhealthy_gpus", unhealthy_gpus)
        object.__setattr__(self, "cordoned", cordoned)
        object.__setattr__(self, "physical_gpus", physical_gpus)
        object.__setattr__(self, "foreign_gpus", foreign_gpus)

    @property
    def healthy_gpus(self) -> int:
        """GPUs gpupool may allocate now: healthy and not another scheduler's (a cordoned
        node has none)."""
        if self.cordoned:
            return 0
        return self.gpus - len(self.unhealthy_gpus) - len(self.foreign_gpus)

    @property
    def sound_gpus(self) -> int:
        """The GPUs the node holds once its cordon and other schedulers' pods are gone: the
        healthy ones (what "never fits" is judged against)."""
        return self.gpus - len(self.unhealthy_gpus)


@dataclass(frozen=True, slots=True)
class QuotaInfo:
    """A queue's three quota levels for one flavor, in milli-GPU."""

    guarantee: int
    deserved: int
    capability: int


@dataclass(frozen=True, slots=True)
class QueueInfo:
    """A node of the queue tree; leaves receive workloads."""

    name: str
    parent: str | None
    tenant: str | None = None
    weight: float = 1.0
    reclaimable: bool = True
    lending_limit: int | None = None
    max_protected_runtime_s: float | None = None
    default_protected_runtime_s: float = 0.0
    quota: Mapping[str, QuotaInfo] = field(default_factory=dict)
    # The idle policy for its workloads, over their class's (None: the class's).
    idle_alert_after_s: float | None = None
    idle_reclaim_after_s: float | None = None


@dataclass(frozen=True, slots=True)
class PriorityClassInfo:
    """A priority class: its value, its preemption policy, its budget rate and its idle
    policy (seconds idle before its work is alerted about, and reclaimed; None: never)."""

    name: str
    value: int
    default: bool = False
    preemption_policy: PreemptionPolicy = "PreemptLowerPriority"
    budget_rate: float = 0.0
    idle_alert_after_s: float | None = None
    idle_reclaim_after_s: float | None = None


@dataclass(frozen=True, slots=True)
class BudgetInfo:
    """A tenant's priority budget for one class, in GPU-hours."""

    tenant: str
    priority_class: str
    gpu_hours: float
    used: float = 0.0

    @property
    def remaining(self) -> float:
        """GPU-hours left to spend."""
        return self.gpu_hours - self.used


@dataclass(frozen=True, slots=True)
class PodSetInfo:
    """A group of identical pods of a workload; ``flavors`` lists the allowed flavors.

    ``allowed_nodes`` None lets its pods run on any node of those flavors; a set restricts
    them to these nodes (on Kubernetes: the nodes their nodeSelector, required node affinity
    and tolerations admit, DESIGN section 4, since the kubelet refuses any other binding).
    """

    count: int
    gpus: int
    flavors: tuple[str, ...]
    cpu_milli: int = 0
    memory_mib: int = 0
    gpu_milli: int = MILLI
    gpu_memory_gb: float = 0.0
    allowed_nodes: frozenset[str] | None = None


@dataclass(frozen=True, slots=True)
class PodPlacement:
    """Where one pod runs: its node, GPU indices and, on a shared flavor, its milli-GPU."""

    node: str
    gpus: tuple[int, ...]
    milli: int | None = None

    # Written out, as ``WorkloadInfo.__init__`` (the first read builds one per placed pod).
    def __init__(self, node: str, gpus: tuple[int, ...], milli: int | None = None) -> None:
        object.__setattr__(self, "node", node)
        object.__setattr__(self, "gpus", gpus)
        object.__setattr__(self, "milli", milli)


@dataclass(frozen=True, slots=True)
class WorkloadInfo:
    """A workload (a gang of pod sets), pending or running."""

    name: str
    queue: str
    priority_class: str
    pod_sets: tuple[PodSetInfo, ...]
    submitted_at: float
    state: WorkloadState = "pending"
    min_member: int | None = None
    topology: Topology | None = None
    protected_runtime_s: float = 0.0
    expected_runtime_s: float | None = None
    started_at: float | None = None
    last_checkpoint_at: float | None = None  # a running workload's latest reported checkpoint
    placement: tuple[PodPlacement, ...] = ()
    missing_pods: int = 0
    nominated: bool = False
    evicting_for: str | None = None
    # Placed by backfill on capacity held for this starving workload, which may evict it
    # whatever its queue (DESIGN section 3, backfill).
    backfilled_for: str | None = None
    # Running, and its GPUs have done no work since then as the utilisation source saw them
    # (None: they work, or no source saw them).
    idle_since: float | None = None
    # Running and being evicted with no preemptor (idle, a drain): its pods are on their way.
    leaving: bool = False
    # Running at a class that costs budget: whether its admission reserved its protected
    # window (the plan's ``Admission.budget_reservation``; the loop reads it from the
    # ledger). False: admitted demoted, it reserved nothing and keeps the window its queue
    # caps for its whole run, even once its budget elevates it again; True: paid for, its
    # window holds even when the budget is spent to nothing meanwhile. None: not known (a
    # scenario that does not say): the budget's standing now decides, as for pending work.
    window_reserved: bool | None = None
    # A disruption budget refused its eviction: not chosen as a victim again before this
    # time, whatever its window (the loop's back-off, ``REFUSAL_BACKOFF_S``).
    eviction_refused_until: float | None = None

    # Written out, not generated: compiled, this sets each field natively (0.2 against 3
    # microseconds a workload, the control loop's first read builds 30,000). The same
    # parameters and defaults as the fields above
    # (tests/scheduler/test_types.py::test_the_written_initialisers_match_the_fields).
    def __init__(
        self,
        name: str,
        queue: str,
        priority_class: str,
        pod_sets: tuple[PodSetInfo, ...],
        submitted_at: float,
        state: WorkloadState = "pending",
        min_member: int | None = None,
        topology: Topology | None = None,
        protected_runtime_s: float = 0.0,
        expected_runtime_s: float | None = None,
        started_at: float | None = None,
        last_checkpoint_at: float | None = None,
        placement: tuple[PodPlacement, ...] = (),
        missing_pods: int = 0,
        nominated: bool = False,
        evicting_for: str | None = None,
        backfilled_for: str | None = None,
        idle_since: float | None = None,
        leaving: bool = False,
        window_reserved: bool | None = None,
        eviction_refused_until: float | None = None,
    ) -> None:
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "queue", queue)
        object.__setattr__(self, "priority_class", priority_class)
        object.__setattr__(self, "pod_sets", pod_sets)
        object.__setattr__(self, "submitted_at", submitted_at)
        object.__setattr__(self, "state", state)
        object.__setattr__(self, "min_member", min_member)
        object.__setattr__(self, "topology", topology)
        object.__setattr__(self, "protected_runtime_s", protected_runtime_s)
        object.__setattr__(self, "expected_runtime_s", expected_runtime_s)
        object.__setattr__(self, "started_at", started_at)
        object.__setattr__(self, "last_checkpoint_at", last_checkpoint_at)
        object.__setattr__(self, "placement", placement)
        object.__setattr__(self, "missing_pods", missing_pods)
        object.__setattr__(self, "nominated", nominated)
        object.__setattr__(self, "evicting_for", evicting_for)
        object.__setattr__(self, "backfilled_for", backfilled_for)
        object.__setattr__(self, "idle_since", idle_since)
        object.__setattr__(self, "leaving", leaving)
        object.__setattr__(self, "window_reserved", window_reserved)
        object.__setattr__(self, "eviction_refused_until", eviction_refused_until)

    @property
    def pod_count(self) -> int:
        """Pods over all pod sets."""
        return sum(pod_set.count for pod_set in self.pod_sets)

    @property
    def gang_minimum(self) -> int:
        """Pods that must run together (``min_member``, default all)."""
        return self.pod_count if self.min_member is None else self.min_member


@dataclass(frozen=True, slots=True)
class PreemptionEventInfo:
    """A past eviction: who was evicted and which workload (and tenant) caused it."""

    at: float
    victim: str
    preemptor: str | None = None
    preemptor_tenant: str | None = None


@dataclass(frozen=True, slots=True)
class BackoffPolicy:
    """More than ``max_preemptions`` caused within ``window_s`` costs one priority step."""

    max_preemptions: int = 3
    window_s: float = SECONDS_PER_HOUR
    cooldown_s: float = 1800.0


@dataclass(frozen=True, slots=True)
class VictimProtectionPolicy:
    """A workload evicted ``evictions`` times within ``window_s`` is protected ``protected_s``."""

    evictions: int = 2
    window_s: float = 6 * SECONDS_PER_HOUR
    protected_s: float = 1800.0


DEFAULT_PHASES: tuple[str, ...] = (
    "idle",
    "enqueue",
    "allocate",
    "preempt",
    "reclaim",
    "backfill",
    "grow",
)

Queueing = Literal["best-effort", "fifo"]
QueueOrder = Literal["dominant-share", "head-rank"]
VictimSearch = Literal["fewest", "greedy"]

DEFAULT_BACKOFF: Final = BackoffPolicy()
DEFAULT_VICTIM_PROTECTION: Final = VictimProtectionPolicy()


@dataclass(frozen=True, slots=True)
class PolicyInfo:
    """Knobs of one scheduling cycle; ``PolicyInfo()`` is the product's policy.

    - ``placement``: "gpupool" (fragmentation-aware) or "bestfit".
    - ``starvation_limit_s``: a workload pending longer is held capacity for (None: never).
    - ``backoff``, ``victim_protection``: the contracts' timers (None: off).
    - ``phases``: which of the phases run, in order (``DEFAULT_PHASES``: all of them; a
      policy without ``grow`` never grows a running elastic gang).
    - ``preemption_attempts_per_queue``: victim searches per queue per cycle, per phase.
    - ``queueing``: "best-effort" (a workload that cannot be admitted does not block the
      ones behind it) or "fifo" (strict order inside a queue: nothing behind a blocked head).
    - ``queue_order``: which queue allocate serves next -- "dominant-share" (the smallest
      weighted dominant share, DRF) or "head-rank" (the best-ranked head of all queues: not
      borrowing first, then priority, then submit time, as Kueue without fair sharing).
    - ``fair_reclaim``: whether a queue at or above its deserved share may still reclaim
      borrowed capacity from a queue that stays fairer off (Kueue's fair-sharing
      preemption); without it only queues below their deserved share reclaim.
    - ``victim_search``: "fewest" (the product's: a lone victim if one is enough, the
      smallest such; else the smaller of a biggest-first and a preference-order set;
      preference counts from the last checkpoint) or "greedy" (Kueue's: remove candidates in
      preference order until the preemptor fits, put back what is not needed; preference by
      start time).

    Scenario files may still say ``"fair_sharing": true|false``, the older switch for both
    ``queue_order`` and ``fair_reclaim`` (the reader translates it; see scenario.py).
    """

    placement: str = "gpupool"
    starvation_limit_s: float | None = None
    backoff: BackoffPolicy | None = DEFAULT_BACKOFF
    victim_protection: VictimProtectionPolicy | None = DEFAULT_VICTIM_PROTECTION
    phases: tuple[str, ...] = DEFAULT_PHASES
    preemption_attempts_per_queue: int = 1
    queueing: Queueing = "best-effort"
    queue_order: QueueOrder = "dominant-share"
    fair_reclaim: bool = True
    victim_search: VictimSearch = "fewest"


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Everything one cycle decides on: inventory, queues, classes, budgets, workloads."""

    flavors: tuple[FlavorInfo, ...]
    nodes: tuple[NodeInfo, ...]
    queues: tuple[QueueInfo, ...]
    priority_classes: tuple[PriorityClassInfo, ...]
    workloads: tuple[WorkloadInfo, ...]
    budgets: tuple[BudgetInfo, ...] = ()
    preemption_history: tuple[PreemptionEventInfo, ...] = ()


@dataclass(frozen=True, slots=True)
class PodRef:
    """Which pod of a workload: its pod set (index in ``WorkloadInfo.pod_sets``) and its
    index within that pod set."""

    pod_set: int
    index: int

    # Written out, as ``WorkloadInfo.__init__`` (one per pod admitted or placed).
    def __init__(self, pod_set: int, index: int) -> None:
        object.__setattr__(self, "pod_set", pod_set)
        object.__setattr__(self, "index", index)


@dataclass(frozen=True, slots=True)
class Admission:
    """A workload to bind, pod by pod: ``placement[i]`` is where pod ``pod_refs[i]`` goes.

    An elastic gang (``min_member`` below its pod count) may be admitted with fewer pods than
    it has: the first ones in pod-set order. ``backfill_for`` names the starving workload on
    whose held capacity backfill placed it, and which may evict it later (None: none).
    ``budget_reservation`` is the GPU-hours the cycle reserved from its tenant's budget for
    its protected window as it admitted it (``Cycle.spend_budget``): 0 for work at a class
    that costs no budget, with no protected window, or that the budget no longer covered
    when its turn came (admitted demoted, at the default class). The loop reserves exactly
    this on the ledger (``BudgetBook.admit``), never a standing derived again.
    """

    workload: str
    placement: tuple[PodPlacement, ...]
    pod_refs: tuple[PodRef, ...]
    backfill_for: str | None = None
    budget_reservation: float = 0.0

    # Written out, as ``WorkloadInfo.__init__`` (one per workload admitted).
    def __init__(
        self,
        workload: str,
        placement: tuple[PodPlacement, ...],
        pod_refs: tuple[PodRef, ...],
        backfill_for: str | None = None,
        budget_reservation: float = 0.0,
    ) -> None:
        object.__setattr__(self, "workload", workload)
        object.__setattr__(self, "placement", placement)
        object.__setattr__(self, "pod_refs", pod_refs)
        object.__setattr__(self, "backfill_for", backfill_for)
        object.__setattr__(self, "budget_reservation", budget_reservation)


@dataclass(frozen=True, slots=True)
class Eviction:
    """A running workload to evict, and for whom."""

    workload: str
    reason: EvictReason
    preemptor: str | None

    # Written out, as ``WorkloadInfo.__init__`` (one per workload evicted).
    def __init__(self, workload: str, reason: EvictReason, preemptor: str | None) -> None:
        object.__setattr__(self, "workload", workload)
        object.__setattr__(self, "reason", reason)
        object.__setattr__(self, "preemptor", preemptor)


@dataclass(frozen=True, slots=True)
class PendingExplanation:
    """Why a workload stays pending: one reason, a sentence, its position and the facts."""

    workload: str
    reason: PendingReason
    detail: str
    position: int
    facts: Mapping[str, object] = field(default_factory=dict)

    # Written out, as ``WorkloadInfo.__init__`` (one per pending workload a cycle). ``facts``
    # left out is a new empty dict each time, as the field's factory makes it.
    def __init__(
        self,
        workload: str,
        reason: PendingReason,
        detail: str,
        position: int,
        facts: Mapping[str, object] | None = None,
    ) -> None:
        object.__setattr__(self, "workload", workload)
        object.__setattr__(self, "reason", reason)
        object.__setattr__(self, "detail", detail)
        object.__setattr__(self, "position", position)
        object.__setattr__(self, "facts", {} if facts is None else facts)


@dataclass(frozen=True, slots=True)
class IdleAlert:
    """A running workload idle past its alert timeout: since when, and when it is reclaimed
    (None: its policy never reclaims it)."""

    workload: str
    idle_since: float
    reclaim_at: float | None


@dataclass(frozen=True, slots=True)
class Plan:
    """The outcome of one cycle; each list sorted by workload name.

    ``grow`` lists running elastic gangs that add pods this cycle (the ``grow`` phase): each
    ``Admission`` names only the pods added -- the next ones in pod-set order after those the
    workload runs -- and where they go, with no ``backfill_for`` and no budget reservation. A
    workload is never both admitted and grown, nor grown and evicted."""

    admit: tuple[Admission, ...]
    evict: tuple[Eviction, ...]
    pending: tuple[PendingExplanation, ...]
    idle_alerts: tuple[IdleAlert, ...] = ()
    grow: tuple[Admission, ...] = ()
