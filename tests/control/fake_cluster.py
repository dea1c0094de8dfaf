"""A test double of the ``ClusterBackend`` protocol for the control loop's tests.

Not a simulated cluster (that is ``gpupool.clusters.simulated``, a product backend): pods do
nothing by themselves here. The test moves them (``run``, ``finish``, ``recreate``), makes
nodes fail, refuses evictions as a disruption budget would, fails bindings, and plays the Job
controller's part in a Job's facts (``set_job``), then runs a cycle and looks at the
database. Deltas follow the protocol: net changes since the last sync.
"""

from __future__ import annotations

import dataclasses
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from gpupool.clusters.base import (
    GPU_RESOURCE,
    MANAGED_BY_LABEL,
    PRODUCT_LABEL,
    SCHEDULER_NAME,
    Allowance,
    Arrivals,
    BindOutcome,
    Change,
    ClusterDelta,
    ClusterView,
    EventRequest,
    EventType,
    EvictOutcome,
    JobFacts,
    JobKey,
    JobSuspendResult,
    NewPod,
    NodeFacts,
    PodBinding,
    PodFacts,
    PodKey,
    PodRef,
    PodResult,
    PodsOutcome,
    ResourceAmounts,
)


@dataclass
class FakeCluster:
    """Nodes and pods in memory, moved by the test."""

    offset: float = 0.0  # the clock is the wall clock plus what ``tick`` added
    nodes: dict[str, NodeFacts] = field(default_factory=dict)
    pods: dict[PodKey, PodFacts] = field(default_factory=dict)
    foreign: dict[str, ResourceAmounts] = field(default_factory=dict)
    jobs: dict[JobKey, JobFacts] = field(default_factory=dict)
    refuse: set[PodKey] = field(default_factory=set)  # a budget refuses evicting these
    fail_binding: set[PodKey] = field(default_factory=set)  # the binding of these fails
    concurrent_apply: bool = False  # a test turns it on to hand apply on to the next cycle
    events: list[tuple[PodRef, str, str, str]] = field(default_factory=list)
    calls: Counter[str] = field(default_factory=Counter)
    bound: Counter[PodKey] = field(default_factory=Counter)  # bindings that moved a pod
    created: list[NewPod] = field(default_factory=list)  # what create_pods was asked
    suspended: set[JobKey] = field(default_factory=set)  # Jobs suspend_job suspended
    revision: int = 0
    _seen_nodes: dict[str, NodeFacts] = field(default_factory=dict)
    _seen_pods: dict[PodKey, PodFacts] = field(default_factory=dict)
    _seen_foreign: dict[str, ResourceAmounts] = field(default_factory=dict)
    _seen_jobs: dict[JobKey, JobFacts] = field(default_factory=dict)
    _uid: int = 0

    # -- the test's handles ---------------------------------------------------------------

    def add_node(
        self,
        name: str,
        gpus: int = 8,
        product: str = "NVIDIA-H100",
        *,
        cpu: int = 192,
        memory_gib: int = 2048,
        ready: bool = True,
        labels: Mapping[str, str] | None = None,
    ) -> None:
        """A GPU node labelled as GPU feature discovery would."""
        amounts = ResourceAmounts(cpu * 1000, memory_gib * 1024, gpus)
        self.nodes[name] = NodeFacts(
            name=name,
            uid=f"node-{name}",
            labels={PRODUCT_LABEL: product, **(labels or {})},
            allocatable=amounts,
            capacity=amounts,
            ready=ready,
        )

    def change_node(self, name: str, **changes: object) -> None:
        """Change a node's facts (``ready=False``, ``unschedulable=True``, ...)."""
        self.nodes[name] = dataclasses.replace(self.nodes[name], **changes)  # type: ignore[arg-type]

    def add_pod(
        self,
        name: str,
        namespace: str = "team-a",
        *,
        queue: str = "team-a",
        gpus: int = 1,
        workload: str | None = None,
        annotations: Mapping[str, str] | None = None,
        owner: str | None = None,
        labels: Mapping[str, str] | None = None,
    ) -> PodKey:
        """A pending pod created with kubectl (or by a Job: ``owner="Job"``)."""
        all_labels = {"gpupool.io/queue": queue, **(labels or {})}
        if workload is not None:
            all_labels["gpupool.io/workload"] = workload
        pod = PodFacts(
            namespace=namespace,
            name=name,
            uid=self._next_uid(),
            labels=all_labels,
            annotations=dict(annotations or {}),
            requests=ResourceAmounts(1000, 1024, gpus),
            owner_kind=owner,
            owner_name=None if owner is None else f"{workload or name}-owner",
            created_at=self.clock,
        )
        self.pods[pod.key] = pod
        return pod.key

    def set_job(self, name: str, namespace: str = "team-a", **status: object) -> JobKey:
        """A Job (of pods added with ``owner="Job"``, named ``<workload>-owner``) and its
        status as the Job controller reports it: ``state``, ``reason``, ``failed``, ..."""
        key = JobKey(namespace, name)
        current = self.jobs.get(key) or JobFacts(namespace, name, uid=f"job-{name}")
        self.jobs[key] = dataclasses.replace(current, **status)  # type: ignore[arg-type]
        return key

    def delete_job(self, name: str, namespace: str = "team-a") -> None:
        """The Job is deleted (its pods stay until the test removes them)."""
        self.jobs.pop(JobKey(namespace, name))

    def run(self, *keys: PodKey) -> None:
        """Bound pods start running (every bound pod when none is named)."""
        for key in keys or tuple(self.pods):
            pod = self.pods[key]
            if pod.node_name is not None and pod.phase == "Pending":
                self.pods[key] = dataclasses.replace(pod, phase="Running", started_at=self.clock)

    def finish(self, key: PodKey, phase: str = "Succeeded") -> None:
        """A pod ends."""
        self.pods[key] = dataclasses.replace(self.pods[key], phase=phase)

    def annotate(self, key: PodKey, **annotations: str) -> None:
        """Set annotations on a pod (``gpupool.io/last-checkpoint``, ...)."""
        pod = self.pods[key]
        self.pods[key] = dataclasses.replace(pod, annotations={**pod.annotations, **annotations})

    def remove(self, key: PodKey) -> PodFacts:
        """A pod disappears (a Job controller's pod evicted, a node lost)."""
        return self.pods.pop(key)

    def tick(self, seconds: float) -> None:
        """Time passes (faster than the wall clock)."""
        self.offset += seconds

    @property
    def clock(self) -> float:
        """The cluster's time: the wall clock plus the ticks."""
        return time.time() + self.offset

    def pods_of(self, workload: str) -> list[PodFacts]:
        """The pods of a workload, by name."""
        return sorted(
            (p for p in self.pods.values() if p.labels.get("gpupool.io/workload") == workload),
            key=lambda p: p.name,
        )

    def _next_uid(self) -> str:
        self._uid += 1
        return f"uid-{self._uid}"

    # -- the protocol ---------------------------------------------------------------------

    def sync(self) -> ClusterView:
        """The view, with what changed since the last sync."""
        nodes = _changes(self._seen_nodes, self.nodes)
        pods = _changes(self._seen_pods, self.pods)
        foreign = frozenset(
            name
            for name in set(self._seen_foreign) | set(self.foreign)
            if self._seen_foreign.get(name) != self.foreign.get(name)
        )
        jobs = _changes(self._seen_jobs, self.jobs)
        delta = ClusterDelta(nodes=nodes, pods=pods, foreign_usage=foreign, jobs=jobs)
        if not delta.empty:
            self.revision += 1
        self._seen_nodes = dict(self.nodes)
        self._seen_pods = dict(self.pods)
        self._seen_foreign = dict(self.foreign)
        self._seen_jobs = dict(self.jobs)
        self.calls["sync"] += 1
        return ClusterView(
            revision=self.revision,
            nodes=MappingProxyType(dict(self.nodes)),
            pods=MappingProxyType(dict(self.pods)),
            foreign_usage=MappingProxyType(dict(self.foreign)),
            delta=delta,
            synced_at=self.clock,
            jobs=MappingProxyType(dict(self.jobs)),
        )

    def bind(self, gang: Sequence[PodBinding]) -> BindOutcome:
        """All or none, as the Kubernetes backend binds."""
        self.calls["bind"] += 1
        done: list[PodRef] = []
        for binding in gang:
            pod = self.pods.get(binding.pod.key)
            problem = None
            if pod is None or (binding.pod.uid and pod.uid != binding.pod.uid):
                problem = "the pod is gone"
            elif binding.pod.key in self.fail_binding:
                problem = "the API server refused the binding"
            elif binding.node not in self.nodes:
                problem = f"node {binding.node} does not exist"
            elif pod.node_name not in (None, binding.node):
                problem = f"the pod is bound to {pod.node_name}"
            if problem is not None:
                for ref in done:
                    self.pods[ref.key] = dataclasses.replace(self.pods[ref.key], node_name=None)
                return BindOutcome(failed=binding.pod, error=problem, rolled_back=tuple(done))
            if pod is not None and pod.node_name is None:
                self.pods[binding.pod.key] = dataclasses.replace(pod, node_name=binding.node)
                self.bound[binding.pod.key] += 1
                done.append(binding.pod)
        return BindOutcome(bound=tuple(b.pod for b in gang))

    def bind_many(self, gangs: Mapping[str, Sequence[PodBinding]]) -> dict[str, BindOutcome]:
        """Each gang as ``bind`` binds it, one after another."""
        return {key: self.bind(gang) for key, gang in gangs.items()}

    def wait_for_change(self, timeout_s: float) -> bool:
        """Nothing changes by itself here: wait it out."""
        time.sleep(max(timeout_s, 0.0))
        return False

    def arrivals(self) -> Arrivals:
        """Nothing arrives by itself here."""
        return Arrivals()

    def allowance(self) -> Allowance | None:
        """No client limit here."""
        return None

    def evict(self, pods: Sequence[PodRef], reason: str) -> EvictOutcome:
        """A budget's refusal of one pod aborts the set; evicted pods are gone at once."""
        self.calls["evict"] += 1
        refused = [p for p in pods if p.key in self.refuse]
        if refused:
            return EvictOutcome(
                tuple(
                    PodResult(
                        p,
                        "refused",
                        "Cannot evict pod as it would violate the pod's disruption budget.",
                    )
                    if p.key in self.refuse
                    else PodResult(p, "skipped")
                    for p in pods
                )
            )
        results = []
        for ref in pods:
            gone = self.pods.pop(ref.key, None)
            results.append(PodResult(ref, "gone" if gone is None else "evicted"))
            self.events.append((ref, "Preempted", reason, "Normal"))
        return EvictOutcome(tuple(results))

    def create_pods(self, pods: Sequence[NewPod]) -> PodsOutcome:
        """Pods of workloads submitted through gpupool."""
        self.calls["create_pods"] += 1
        self.created.extend(pods)
        results = []
        for new in pods:
            key = PodKey(new.namespace, new.name)
            if key in self.pods:
                results.append(PodResult(PodRef(new.namespace, new.name), "exists"))
                continue
            gpus = new.gpus if new.gpu_resource == GPU_RESOURCE else 0
            mig = (
                {}
                if new.gpu_resource == GPU_RESOURCE
                else {new.gpu_resource.removeprefix("nvidia.com/mig-"): new.gpus}
            )
            pod = PodFacts(
                namespace=new.namespace,
                name=new.name,
                uid=self._next_uid(),
                scheduler_name=SCHEDULER_NAME,
                labels={**new.labels, MANAGED_BY_LABEL: SCHEDULER_NAME},
                annotations=dict(new.annotations),
                requests=ResourceAmounts(new.cpu_milli, new.memory_mib, gpus, mig),
                created_at=self.clock,
            )
            self.pods[key] = pod
            results.append(PodResult(pod.ref, "created"))
        return PodsOutcome(tuple(results))

    def delete_pods(self, pods: Sequence[PodRef], reason: str) -> PodsOutcome:
        """Pods removed at once."""
        self.calls["delete_pods"] += 1
        return PodsOutcome(
            tuple(
                PodResult(ref, "deleted" if self.pods.pop(ref.key, None) else "gone")
                for ref in pods
            )
        )

    def suspend_job(self, job: JobKey) -> JobSuspendResult:
        """The Job suspended, as its controller does it: its pods are gone at once."""
        self.calls["suspend_job"] += 1
        owned = [
            key
            for key, pod in self.pods.items()
            if pod.owner_kind == "Job"
            and pod.owner_name == job.name
            and key.namespace == job.namespace
        ]
        if job not in self.jobs and not owned:
            return JobSuspendResult(job, "gone", f'jobs.batch "{job.name}" not found')
        self.suspended.add(job)
        for key in owned:
            del self.pods[key]
        return JobSuspendResult(job, "suspended")

    def record_event(
        self, pod: PodRef, reason: str, message: str, event_type: EventType = "Normal"
    ) -> str:
        """Remember the Event."""
        self.events.append((pod, reason, message, event_type))
        return "created"

    def record_events(self, events: Sequence[EventRequest]) -> list[str]:
        """Remember the Events, in order."""
        self.calls["record_events"] += 1
        return [self.record_event(e.pod, e.reason, e.message, e.event_type) for e in events]

    def now(self) -> float:
        """The test's clock."""
        return self.clock

    def close(self) -> None:
        """Nothing to release."""

    def events_on(self, key: PodKey) -> list[tuple[str, str, str]]:
        """The Events recorded on a pod: (reason, message, type)."""
        return [(r, m, t) for ref, r, m, t in self.events if ref.key == key]


def _changes(before: Mapping[object, object], after: Mapping[object, object]) -> dict:  # type: ignore[type-arg]
    changes = {}
    for key in set(before) | set(after):
        old, new = before.get(key), after.get(key)
        if old != new:
            changes[key] = Change(old, new)
    return changes
