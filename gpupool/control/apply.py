"""Step 5 of a cycle, apply: make the cluster match what the database now says.

Apply runs after the record is committed, and derives its work from the database's state and
the cluster's pods, not from this cycle's plan -- so it is idempotent, and a cycle that crashed
between its record and its apply is completed by the next one:

- a workload submitted through gpupool that has fewer pods than it asks gets the missing ones
  (``create_pods``; pods of a name that still exists answer ``exists``);
- an admitted workload whose pods are not all on the nodes of its placements is bound, whole:
  the pods already on their node count as done, the others take the remaining placements of
  their pod set (``bind_many``: all the cycle's gangs at once where the backend can, each
  all or none); a running elastic gang grown (``Plan.grow``) has the pods it added bound the
  same way, as a gang of their own (``added_bindings``): a failure rolls back only them;
- a workload being evicted whose pods still hold nodes is evicted, one victim set per
  preemptor (``evict``: a budget's refusal aborts that set);
- a cancelled workload's pods are removed (``cancel_pods``): a Job's by suspending the Job,
  whose controller deletes them and makes no more (deleting them, it made them again and
  counted each as a failed try until the Job failed); a bare pod's and gpupool's are deleted;
  those of another controller (which gpupool cannot suspend) are deleted while they hold a
  node, and one it makes again waits, never scheduled, told why;
- pending pods whose explanation changed get an Event with it: about ``EVENTS_PER_CYCLE`` a
  cycle, taken alternately from the newest reasons and the oldest (``explanations_due``), a
  workload's waiting pods all in one cycle; the rest wait for the next ones.

It returns an ``ApplyOutcome`` that ``actions.do_record_apply_outcome`` writes: gangs that
could not be bound go back to pending with the error as the reason, refused victim sets are
cancelled (the victims keep running, their preemptor waits again).
"""

from __future__ import annotations

import logging
import re
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import chain
from typing import TypeVar

from gpupool.clusters.base import (
    GPU_RESOURCE,
    MIG_RESOURCE_PREFIX,
    ClusterBackend,
    EventRequest,
    JobKey,
    NewPod,
    PodBinding,
    PodFacts,
    PodRef,
)
from gpupool.clusters.grouping import (
    EXPECTED_RUNTIME,
    GPU_MILLI,
    MIN_MEMBER,
    PRIORITY_CLASS,
    PROTECTED_RUNTIME,
    QUEUE_LABEL,
    TOPOLOGY,
    WORKLOAD_LABEL,
    WorkloadKey,
    WorkloadRequest,
)
from gpupool.control.cluster import POD_SET_ANNOTATION as POD_SET_ANNOTATION
from gpupool.control.cluster import ClusterMirror, holds_node, is_live
from gpupool.control.snapshot import WorkloadRow
from gpupool.workloads.choices import Origin, WorkloadState

EVENTS_PER_CYCLE = 200
# Pods created a cycle at most: a workload of 100,000 pods (the API's bound) was made in one
# cycle that never ended, the demo's SQLite locked for everyone else meanwhile. The rest are
# made by the next cycles, their workloads kept outstanding until all exist.
CREATES_PER_CYCLE = 2000
_POD_INDEX = re.compile(r"-(\d+)$")
logger = logging.getLogger(__name__)
T = TypeVar("T")


def explanations_due(queued: Sequence[T]) -> Iterator[T]:
    """The workloads whose new reason waits for its Event (``queued``, oldest first), in the
    order their Events go out: the newest, the oldest, the next newest, the next oldest, ...

    After a first cycle that explains thousands of workloads, the budget of Events a cycle
    would take minutes to drain oldest first, and a workload submitted meanwhile would wait
    that long for its first Event; newest first alone would starve the backlog while reasons
    keep changing. Alternating gives each half of the budget."""
    return _from_both_ends(iter(queued), reversed(queued), len(queued))


def queued_explanations_due(
    older: dict[str, str], fresh: dict[str, str]
) -> Iterator[tuple[str, str]]:
    """``explanations_due`` of the queue ``older`` (workload -> sentence, oldest first) with
    the workloads of ``fresh`` moved last, in its order (as ``ControlLoop._remember_written``
    leaves the queue), without building that queue: a cycle sends about
    ``EVENTS_PER_CYCLE`` Events and stops, while thousands may wait (B1's first cycle
    explains 5,000), so only the entries taken from either end are looked at."""
    kept = len(older) - sum(1 for name in fresh if name in older)
    oldest = chain(
        ((name, detail) for name, detail in older.items() if name not in fresh), fresh.items()
    )
    newest = chain(
        reversed(fresh.items()),
        ((name, older[name]) for name in reversed(older) if name not in fresh),
    )
    return _from_both_ends(oldest, newest, kept + len(fresh))


def _from_both_ends(oldest: Iterator[T], newest: Iterator[T], count: int) -> Iterator[T]:
    """The ``count`` entries of a queue given from its oldest end and from its newest,
    newest first, alternately (``explanations_due``)."""
    for index in range(count):
        yield next(newest) if index % 2 == 0 else next(oldest)


@dataclass(frozen=True, slots=True)
class PodSetRun:
    """What the pods of one pod set run and ask, for ``create_pods``."""

    name: str
    count: int
    image: str
    command: tuple[str, ...]
    env: Mapping[str, str]
    gpu_resource: str
    gpus: int
    gpu_milli: int | None
    cpu_milli: int
    memory_mib: int


@dataclass(frozen=True, slots=True)
class WorkloadRun:
    """A workload submitted through gpupool, as its pods are created."""

    key: WorkloadKey
    queue: str
    priority_class: str
    min_member: int | None
    topology: str
    protected_runtime_s: int
    expected_runtime_s: int | None
    pod_sets: tuple[PodSetRun, ...]


@dataclass
class ApplyWork:
    """What apply is to do this cycle."""

    create: list[NewPod] = field(default_factory=list)
    bind: dict[str, list[PodBinding]] = field(default_factory=dict)  # workload -> gang
    evict: dict[str, tuple[list[str], list[PodRef], str]] = field(default_factory=dict)
    delete: list[PodRef] = field(default_factory=list)
    # Pods gpupool made that ended in an earlier run of a requeued workload: deleted, so that
    # they can be made again under their names (``REMADE``).
    remade: list[PodRef] = field(default_factory=list)
    # A cancelled workload's Jobs to suspend, each with its pods (deleted if it cannot be).
    suspend: dict[JobKey, list[PodRef]] = field(default_factory=dict)
    # Per workload evicted for a drain, the drain in words (``drain_words``): read from the
    # database before the work may go to the applier's thread, which reads none.
    drained: dict[str, str] = field(default_factory=dict)
    events: list[tuple[PodRef, str, str]] = field(default_factory=list)


@dataclass
class ApplyOutcome:
    """What apply did, and what the database must learn from it."""

    bind_failed: dict[str, str] = field(default_factory=dict)  # workload -> why
    refused: dict[str, str] = field(default_factory=dict)  # victim workload -> why
    refused_for: dict[str, str] = field(default_factory=dict)  # victim -> preemptor set key
    counts: dict[str, int] = field(default_factory=lambda: defaultdict(int))

    def count(self, what: str, amount: int = 1) -> None:
        """Add to one of the counts (bound, bind_errors, evicted, evict_errors, ...)."""
        self.counts[what] += amount


def key_of(name: str) -> WorkloadKey:
    """A core name (``namespace/name``) as a workload key."""
    namespace, _, short = name.partition("/")
    return WorkloadKey(namespace, short)


def pod_name(workload: str, pod_set: str, index: int) -> str:
    """The name of a pod gpupool creates: ``<workload>-<pod set>-<index>``."""
    return f"{workload}-{pod_set}-{index}"


def new_pods(run: WorkloadRun, existing: Iterable[str], limit: int | None = None) -> list[NewPod]:
    """The pods of a workload submitted through gpupool that do not exist yet (the first
    ``limit`` of them)."""
    have = set(existing)
    labels = {QUEUE_LABEL: run.queue, WORKLOAD_LABEL: run.key.name}
    common = {PRIORITY_CLASS: run.priority_class, PROTECTED_RUNTIME: str(run.protected_runtime_s)}
    if run.min_member is not None:
        common[MIN_MEMBER] = str(run.min_member)
    if run.topology:
        common[TOPOLOGY] = run.topology
    if run.expected_runtime_s is not None:
        common[EXPECTED_RUNTIME] = str(run.expected_runtime_s)
    pods: list[NewPod] = []
    for set_index, pod_set in enumerate(run.pod_sets):
        annotations = {**common, POD_SET_ANNOTATION: str(set_index)}
        if pod_set.gpu_milli is not None:
            annotations[GPU_MILLI] = str(pod_set.gpu_milli)
        for index in range(pod_set.count):
            if limit is not None and len(pods) >= limit:
                return pods
            name = pod_name(run.key.name, pod_set.name, index)
            if name in have:
                continue
            pods.append(
                NewPod(
                    namespace=run.key.namespace,
                    name=name,
                    image=pod_set.image,
                    labels=labels,
                    annotations=annotations,
                    gpu_resource=pod_set.gpu_resource,
                    gpus=pod_set.gpus,
                    cpu_milli=pod_set.cpu_milli,
                    memory_mib=pod_set.memory_mib,
                    command=pod_set.command,
                    env=pod_set.env,
                )
            )
    return pods


def gpu_resource(sharing: str, mig_profile: str) -> str:
    """The device plugin's resource for a flavor: ``nvidia.com/gpu`` or ``nvidia.com/mig-*``."""
    return f"{MIG_RESOURCE_PREFIX}{mig_profile}" if sharing == "mig" else GPU_RESOURCE


def pods_by_set(
    row: WorkloadRow,
    pods: Sequence[PodFacts],
    grouped: WorkloadRequest | None,
    *,
    ended: bool = False,
) -> dict[int, list[PodFacts]]:
    """The workload's live or node-holding pods by the index of their pod set; with
    ``ended`` (a running gang's), those that ended on their node too: such a pod keeps its
    placement there, as the sync counts it (``sync._gone_members``), so no waiting pod is
    bound onto it (``added_bindings``). An admission's are not: an earlier run's pods that
    ended (a Job's failed pod) hold nothing of it."""
    members = [p for p in pods if is_live(p) or holds_node(p) or (ended and p.node_name)]
    by_set: dict[int, list[PodFacts]] = defaultdict(list)
    if row.origin == Origin.GPUPOOL:
        for pod in members:
            text = pod.annotations.get(POD_SET_ANNOTATION, "")
            if text.isdigit():
                by_set[int(text)].append(pod)
    elif grouped is not None:
        # Grouping keeps live pods only: a pod that ended is in none of its pod sets, and a
        # pod set whose pods all ended is not among them (those left may be fewer than the
        # row's, and numbered otherwise: they are ordered by their first live pod). So each
        # pod set, and each pod in none, goes to the row's pod set of its shape where only
        # one has it; else by the grouping's numbering, where that has as many pod sets.
        sets = row.info.pod_sets
        shapes: dict[tuple[int, int, int], list[int]] = defaultdict(list)
        for index, pod_set in enumerate(sets):
            shapes[(pod_set.gpus, pod_set.cpu_milli, pod_set.memory_mib)].append(index)

        def of_shape(shape: tuple[int, int, int], otherwise: int | None) -> int | None:
            matches = shapes.get(shape, [])
            return matches[0] if len(matches) == 1 else otherwise

        same = len(grouped.pod_sets) == len(sets)
        position = {
            key: of_shape((ps.gpus, ps.cpu_milli, ps.memory_mib), index if same else None)
            for index, ps in enumerate(grouped.pod_sets)
            for key in ps.pods
        }
        for pod in members:
            if pod.key in position:
                found = position[pod.key]
            else:  # ended on its node
                asked = pod.requests
                shape = (asked.gpus or sum(asked.mig.values()), asked.cpu_milli, asked.memory_mib)
                found = of_shape(shape, 0 if len(sets) == 1 else None)
            if found is not None:
                by_set[found].append(pod)
    for group in by_set.values():
        if len(group) > 1:
            group.sort(key=_pod_order)
    return by_set


def _pod_order(pod: PodFacts) -> tuple[int, str]:
    found = _POD_INDEX.search(pod.name)
    return (int(found.group(1)) if found else 1 << 30, pod.name)


def gang_bindings(
    row: WorkloadRow,
    pods: Sequence[PodFacts],
    grouped: WorkloadRequest | None,
    *,
    ended: bool = False,
) -> list[PodBinding] | None:
    """The gang to bind for an admitted workload, or None when every placed pod is on its
    node. Pods already on a placement's node keep it; the others take what is left of their
    pod set's placements, in order. None also when pods are missing: nothing to bind yet.
    ``ended``: pods that ended on a placement's node keep it too (``pods_by_set``)."""
    info = row.info
    placement = info.placement
    wanted: dict[int, list[str]] = {}  # pod set -> its placements' nodes, in order
    cursor = 0
    for set_index, pod_set in enumerate(info.pod_sets):
        placed = [p.node for p in placement[cursor : cursor + pod_set.count]]
        if placed:
            wanted[set_index] = placed
        cursor += pod_set.count
    by_set = pods_by_set(row, pods, grouped, ended=ended)
    gang: list[PodBinding] = []
    unbound = False
    for set_index, nodes in wanted.items():
        members = by_set.get(set_index, [])
        if len(members) < len(nodes):
            return None
        free = list(nodes)
        waiting: list[PodFacts] = []
        for pod in members:
            if pod.node_name is not None and pod.node_name in free:
                free.remove(pod.node_name)
                if not pod.finished:  # one that ended holds its placement, and is not bound
                    gang.append(PodBinding(pod.ref, pod.node_name))
            elif pod.node_name is None and is_live(pod):
                waiting.append(pod)
        for pod, node in zip(waiting, free, strict=False):
            gang.append(PodBinding(pod.ref, node))
            unbound = True
        if len(waiting) < len(free):
            return None  # a pod is bound elsewhere: the cluster decides, the sync will see
    return gang if unbound else None


def added_bindings(
    row: WorkloadRow, pods: Sequence[PodFacts], grouped: WorkloadRequest | None
) -> list[PodBinding] | None:
    """The pods a running elastic gang added (``Plan.grow``) to bind, as ``gang_bindings``
    places them (pods already on a placement's node keep it; each waiting pod takes what is
    left of its pod set's placements, in order), without the pods it runs: bound as a gang of
    their own, all or none, so a binding that fails rolls back only them and never the pods
    the workload ran; a member that ended holds its placement (``ended``), never taken by a
    waiting pod. None when there is nothing to bind (see ``gang_bindings``)."""
    gang = gang_bindings(row, pods, grouped, ended=True)
    if gang is None:
        return None
    on_nodes = {pod.key for pod in pods if pod.node_name is not None}
    return [binding for binding in gang if binding.pod.key not in on_nodes] or None


def explanation_events(
    names: Mapping[str, str], mirror: ClusterMirror
) -> list[tuple[PodRef, str, str]]:
    """Events for pending pods whose workload's explanation changed (``names``: workload ->
    its explanation's sentence)."""
    events: list[tuple[PodRef, str, str]] = []
    for name, detail in names.items():
        for pod in mirror.pods_of(key_of(name)):
            if is_live(pod) and pod.node_name is None:
                events.append((pod.ref, "Waiting", detail))
    return events


CANCELLED = "its workload was cancelled"
REMADE = "it ended in an earlier run of its workload, which was requeued: gpupool makes it again"


def cancel_pods(work: ApplyWork, pods: Iterable[PodFacts]) -> None:
    """Add the removal of a cancelled workload's pods (live or holding a node, not being
    deleted) to ``work``. A pod a batch/v1 Job controls is removed by suspending the Job
    (``spec.suspend``, as Kueue does to a Job it does not admit): its controller deletes the
    Job's active pods and makes none again; deleted, they were made again, deleted again, and
    each counted as a failed try until the Job failed with ``BackoffLimitExceeded``. A bare
    pod, or one gpupool made, is deleted: nothing makes it again. Another controller's
    (a ReplicaSet, a StatefulSet, an operator that owns its pods itself: nothing gpupool can
    suspend; a JobSet's pods are its child Jobs', so those are suspended) is
    deleted while it holds a node, so its GPUs come back; the pod its controller may make
    again is not deleted in turn (that was a fight with no end) but waits, never scheduled,
    with the Event that its workload has ended, until its owner stops the controller."""
    for pod in pods:
        job = pod.job
        if job is not None:
            work.suspend.setdefault(job, []).append(pod.ref)
        elif pod.owner_kind is None or holds_node(pod):  # gpupool's pods have no owner
            work.delete.append(pod.ref)


def _suspend_jobs(backend: ClusterBackend, work: ApplyWork, outcome: ApplyOutcome) -> list[PodRef]:
    """Suspend the cancelled workloads' Jobs, telling their pods why first; the pods of those
    that could not be suspended (gone, or refused: deleted as before, so their GPUs come
    back), to delete."""
    backend.record_events(
        [
            EventRequest(pod, "Cancelled", f"gpupool suspends its Job {job}: {CANCELLED}")
            for job, pods in sorted(work.suspend.items())
            for pod in pods
        ]
    )
    delete: list[PodRef] = []
    for job, pods in sorted(work.suspend.items()):
        result = backend.suspend_job(job)
        if result.status == "suspended":
            outcome.count("suspended")
            continue
        if result.status == "failed":
            logger.warning("could not suspend Job %s (%s): its pods are deleted", job,
                           result.message)  # fmt: skip
        delete.extend(pods)
    return delete


# An eviction's words in its pods' ``Preempted`` Event, at most (the Event is cut at 1,024).
EVICTION_WORDS_MAX = 900


def drain_words(work: ApplyWork) -> dict[str, str]:
    """For the workloads evicted for ``admin``, the drain that caused it in the pages' words
    ("for the drain of node h100-04, drained by ada: swap PSU": who drained it and why are
    the audit log's, ``workloads.queries.drain_words_of``, two queries); none when no set is
    an admin eviction. The evictions' records are committed before apply runs; the loop reads
    them into ``ApplyWork.drained`` in its own thread, before the work may be handed on."""
    admin = [name for victims, _, reason in work.evict.values() if reason == "admin"
             for name in victims]  # fmt: skip
    if not admin:
        return {}
    from gpupool.workloads.queries import drain_words_of  # (a Django app's queries)

    return drain_words_of(admin)


def eviction_words(reason: str, victims: Sequence[str], drained: Mapping[str, str]) -> str:
    """What the evicted pods are told after "evicted by gpupool: ": the reason, and for a
    drain which one (``drain_words``), within ``EVICTION_WORDS_MAX`` characters."""
    said = next((drained[name] for name in victims if name in drained), "")
    words = f"{reason}, {said}" if said else reason
    return words if len(words) <= EVICTION_WORDS_MAX else words[: EVICTION_WORDS_MAX - 3] + "..."


def run_apply(backend: ClusterBackend, work: ApplyWork) -> ApplyOutcome:
    """Do the work through the backend; every refusal or failure comes back in the outcome."""
    outcome = ApplyOutcome()
    delete = list(work.delete)
    if work.suspend:
        delete.extend(_suspend_jobs(backend, work, outcome))
    if delete:
        result = backend.delete_pods(delete, CANCELLED)
        outcome.count("deleted", sum(1 for r in result.results if r.status == "deleted"))
    if work.remade:
        result = backend.delete_pods(work.remade, REMADE)
        outcome.count("deleted", sum(1 for r in result.results if r.status == "deleted"))
    if work.create:
        created = backend.create_pods(work.create)
        outcome.count("created", sum(1 for r in created.results if r.status == "created"))
        outcome.count("create_errors", sum(1 for r in created.results if r.status == "failed"))
    for victims_key, (victims, pods, reason) in sorted(work.evict.items()):
        evicted = backend.evict(pods, eviction_words(reason, victims, work.drained))
        refused = evicted.refused
        failed = [r for r in evicted.results if r.status == "failed"]
        outcome.count("evicted", sum(1 for r in evicted.results if r.status == "evicted"))
        if refused:
            why = f"eviction refused by a disruption budget: {refused[0].message}".strip()
            for victim in victims:
                outcome.refused[victim] = why
                outcome.refused_for[victim] = victims_key
            outcome.count("evict_errors", len(refused))
        elif failed:
            outcome.count("evict_errors", len(failed))
    bind_outcomes = backend.bind_many(dict(sorted(work.bind.items())))
    for workload, gang in sorted(work.bind.items()):
        bound = bind_outcomes[workload]
        if bound.ok:
            outcome.count("bound", len(gang))
            continue
        outcome.bind_failed[workload] = bound.error or "binding failed"
        outcome.count("bind_errors")
        if bound.left_bound:
            backend.delete_pods([r.pod for r in bound.left_bound], "half a gang left bound")
    if work.events:
        backend.record_events(
            [EventRequest(pod, reason, message) for pod, reason, message in work.events]
        )
        outcome.count("events", len(work.events))
    return outcome


def placed_state(row: WorkloadRow) -> bool:
    """Whether the database says the workload holds its placements (admitted or running)."""
    return row.state in (WorkloadState.ADMITTED, WorkloadState.RUNNING)
