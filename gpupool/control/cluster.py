"""The loop's mirror of the cluster: pods by workload, node facts, and what they say.

The backend's ``ClusterView`` moves on at the next ``sync()``; the mirror keeps what the loop
needs between cycles, updated from each view's delta: the pods of each workload (by
``grouping.workload_key``), the nodes (and the nodes each pod's constraints allow), other
schedulers' usage per node, the Jobs of gpupool's pods and which workloads each Job's pods
belong to (a Job that changes touches them, even when none of their pods changed). It
answers, per workload, how its pods group
(``grouping.group_workload``, cached until a pod of it changes) and which of its pods hold a
node. Nothing here touches the database.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from gpupool.clusters.base import (
    JOB_KIND,
    TERMINAL_PHASES,
    WORKLOAD_LABEL,
    ClusterView,
    JobFacts,
    JobKey,
    NodeFacts,
    PodFacts,
    PodKey,
    ResourceAmounts,
)
from gpupool.clusters.grouping import (
    LAST_CHECKPOINT,
    InvalidWorkload,
    WorkloadKey,
    WorkloadRequest,
    group_workload,
    workload_key,
)
from gpupool.clusters.matching import AllowedNodes, SchedulingConstraints


def holds_node(pod: PodFacts) -> bool:
    """Whether the pod holds capacity on a node: bound and not ended (terminating counts)."""
    return pod.node_name is not None and not pod.finished


def is_live(pod: PodFacts) -> bool:
    """Whether the pod still asks for capacity: not ended, not being deleted."""
    return not pod.finished and not pod.deleting


POD_SET_ANNOTATION = "gpupool.io/pod-set"  # which pod set a pod gpupool created belongs to


def made_by_gpupool(pod: PodFacts) -> bool:
    """Whether gpupool created the pod for a workload submitted through it (its pod-set
    annotation): pods made with kubectl that carry such a workload's name are not its pods --
    they are neither counted nor bound as its own, and they are told so."""
    return POD_SET_ANNOTATION in pod.annotations


@dataclass
class ClusterMirror:
    """What the loop keeps of the cluster between syncs."""

    nodes: dict[str, NodeFacts] = field(default_factory=dict)
    pods: dict[WorkloadKey, dict[PodKey, PodFacts]] = field(default_factory=dict)
    foreign_usage: dict[str, ResourceAmounts] = field(default_factory=dict)
    allowed: AllowedNodes = field(default_factory=AllowedNodes)
    jobs: dict[JobKey, JobFacts] = field(default_factory=dict)
    revision: int = -1
    stale: bool = False
    # The workloads whose pods a Job has made, or that its template names (remembered after
    # those pods are gone, while the Job lives: a requeued workload may wait without pods for
    # the Job's next one, and a loop that restarts meanwhile learns it from the Job alone).
    _job_workloads: dict[JobKey, set[WorkloadKey]] = field(default_factory=dict)
    _workload_jobs: dict[WorkloadKey, set[JobKey]] = field(default_factory=dict)
    _groups: dict[WorkloadKey, WorkloadRequest | InvalidWorkload] = field(default_factory=dict)
    # The workloads (by core name) with a pod that holds a node, kept as their pods change:
    # the loop counts what those the database does not place hold without looking at all.
    holders: dict[str, WorkloadKey] = field(default_factory=dict)
    # The workloads with a pod that carries a checkpoint annotation (``LAST_CHECKPOINT``),
    # kept as their pods change: the sync groups those pods to read it, and need not look at
    # every running workload's pods to find the few that report one.
    checkpointed: set[WorkloadKey] = field(default_factory=set)

    def apply(self, view: ClusterView) -> tuple[set[WorkloadKey], set[str]]:
        """Take in a view's delta; returns the workloads and the nodes it touched."""
        self.stale = view.stale
        self.revision = view.revision
        nodes: set[str] = set()
        for name, change in view.delta.nodes.items():
            nodes.add(name)
            if change.after is None:
                self.nodes.pop(name, None)
                self.allowed.remove(name)
            else:
                self.nodes[name] = change.after
                self.allowed.put(change.after)
        for name in view.delta.foreign_usage:
            usage = view.foreign_usage.get(name)
            if usage is None or usage.is_zero:
                self.foreign_usage.pop(name, None)
            else:
                self.foreign_usage[name] = usage
        touched: set[WorkloadKey] = set()
        flagged: set[WorkloadKey] = set()  # a pod with a checkpoint came or changed
        pods = self.pods
        new_key, label = tuple.__new__, WORKLOAD_LABEL  # ``workload_key``, inlined
        for key, pod_change in view.delta.pods.items():
            before, after = pod_change.before, pod_change.after
            if before is not None:
                old = workload_key(before)
                touched.add(old)
                members = pods.get(old)
                if members is not None:
                    members.pop(key, None)
                    if not members:
                        del pods[old]
            if after is not None:
                workload = new_key(
                    WorkloadKey, (after.namespace, after.labels.get(label) or after.name)
                )
                touched.add(workload)
                members = pods.get(workload)
                if members is None:
                    pods[workload] = {key: after}
                else:
                    members[key] = after
                if LAST_CHECKPOINT in after.annotations:
                    flagged.add(workload)
                if after.owner_kind == JOB_KIND and (job := after.job) is not None:
                    self._job_workloads.setdefault(job, set()).add(workload)
                    self._workload_jobs.setdefault(workload, set()).add(job)
        for job, job_change in view.delta.jobs.items():
            touched |= self._job_workloads.get(job, set())
            if job_change.after is None:
                self.jobs.pop(job, None)
                for workload in self._job_workloads.pop(job, set()):
                    owners = self._workload_jobs.get(workload)
                    if owners is not None:
                        owners.discard(job)
                        if not owners:
                            del self._workload_jobs[workload]
            else:
                self.jobs[job] = job_change.after
                if job_change.after.workload:  # its template names the workload its pods join
                    workload = WorkloadKey(job.namespace, job_change.after.workload)
                    self._job_workloads.setdefault(job, set()).add(workload)
                    self._workload_jobs.setdefault(workload, set()).add(job)
                    touched.add(workload)
        groups, holders, checkpointed = self._groups, self.holders, self.checkpointed
        ended = TERMINAL_PHASES
        for workload in touched:
            groups.pop(workload, None)
            members = pods.get(workload)
            name = f"{workload[0]}/{workload[1]}"  # str(workload)
            held = False
            if members is not None:
                for pod in members.values():  # any(map(holds_node, ...)), inlined
                    if pod.node_name is not None and pod.phase not in ended:
                        held = True
                        break
            if held:
                holders[name] = workload
            else:
                holders.pop(name, None)
            if workload in flagged or workload in checkpointed:
                if members is not None and any(
                    LAST_CHECKPOINT in pod.annotations for pod in members.values()
                ):
                    checkpointed.add(workload)
                else:
                    checkpointed.discard(workload)
        return touched, nodes

    def pods_of(self, key: WorkloadKey) -> list[PodFacts]:
        """The workload's pods the cluster has (ended and terminating ones included)."""
        return list(self.pods.get(key, {}).values())

    def jobs_of(self, key: WorkloadKey) -> dict[JobKey, JobFacts | None]:
        """The Jobs whose pods belong to the workload (its pods' controlling Jobs, and the
        Jobs remembered for it), each with its facts, or None when the cache has no such Job
        (deleted, or not listed yet)."""
        keys = set(self._workload_jobs.get(key, ()))
        keys.update(job for pod in self.pods.get(key, {}).values() if (job := pod.job))
        return {job: self.jobs.get(job) for job in sorted(keys)}

    def grouped(self, key: WorkloadKey, now: float) -> WorkloadRequest | InvalidWorkload | None:
        """How the workload's pods group (None: it has no pods)."""
        found = self._groups.get(key)
        if found is None:
            members = self.pods.get(key)
            if not members:
                return None
            found = self._groups[key] = group_workload(key, members.values(), now)
        return found

    def allowed_nodes(
        self, constraints: SchedulingConstraints, known: Iterable[str]
    ) -> frozenset[str] | None:
        """The nodes pods with these constraints may use; None when that is every node."""
        allowed = self.allowed.for_constraints(constraints)
        if allowed >= self.allowed.all_nodes():
            return None
        return allowed & frozenset(known) if not isinstance(known, frozenset) else allowed & known

    def held_usage(self, pods: Mapping[PodKey, PodFacts]) -> dict[str, ResourceAmounts]:
        """What these pods hold per node (to count pods the database does not place)."""
        usage: dict[str, ResourceAmounts] = {}
        for pod in pods.values():
            if holds_node(pod) and pod.node_name is not None:
                usage[pod.node_name] = usage.get(pod.node_name, ResourceAmounts()).plus(
                    pod.requests
                )
        return usage
