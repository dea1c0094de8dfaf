"""The simulated cluster: the embedded default backend, a small Kubernetes in one module.

``SimulatedCluster`` plays the parts of a Kubernetes cluster that gpupool talks to, over the
same objects (Nodes, Pods, PodDisruptionBudgets, Events as the API spells them, kept in a
``SimulatedStore``) and with the same rules:

- the **API server**: pods are created (``exists`` if the name is taken), bound through a
  Binding (checked first, so a gang is bound whole or not at all), evicted under disruption
  budgets (a pod that would break its budget is refused with the API's 429 message; pending
  and ended pods ignore budgets, as the eviction subresource does), deleted with a uid
  precondition; Events are created once per name and counted when repeated;
- the **kubelet** (as KWOK plays it on the local plane, plus the kubelet's admission): a bound
  pod starts at once on a Ready node and is given device slots (whole GPUs, time-sliced
  replicas or MIG instances) on healthy GPUs; a pod that does not fit the node's allocatable
  resources, or whose node selector or required affinity the node fails, is rejected
  (``Failed``, reason ``OutOf<resource>`` / ``NodeAffinity``). A running pod *succeeds after
  its run time*: the ``sleep`` of its command (``["sleep", "3600"]``, GNU units ``s m h d``)
  if it runs one, else its ``gpupool.io/expected-runtime`` annotation (the submitter's
  estimate, taken as the truth); a pod with neither runs until it is deleted;
- the **device plugin**: an unhealthy GPU leaves the node's allocatable (capacity stays), and
  the pod using it fails (``GPUUnhealthy``);
- the **node lifecycle controller**: a NotReady node gets the ``node.kubernetes.io/unreachable``
  taints, and its pods are deleted ``not_ready_eviction_s`` later (the 300 s of the default
  ``tolerationSeconds``) unless it comes back first;
- Events expire after ``event_ttl_s`` (the API server's one hour).

Faults come in through explicit methods (``set_node_ready``, ``set_gpu_health``,
``cordon``), and so do objects made outside gpupool (``add_nodes``, ``add_pod`` for pods of
Jobs or of other schedulers, ``add_disruption_budget``); ``gpupool sim`` exposes them for the
demo. Time is the cluster's ``clock``: a ``VirtualClock`` that tests move by hand, or a
``ScaledClock``, the wall clock sped up (an hour of trace in a minute at speed 60).

``SimulatedBackend`` is the ``ClusterBackend`` over such a cluster: it keeps its own cache of
facts and reads the store's changes since its last revision at each ``sync()`` (a re-list
when it fell too far behind), so deltas are exactly what the Kubernetes backend reports.
Whatever happens on its own (pods starting and ending, evictions from lost nodes) happens
when somebody looks: every call first lets the controllers catch up with the clock.
"""

from __future__ import annotations

import functools
import operator
import re
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from types import MappingProxyType
from typing import Any, Protocol, cast

from gpupool.clusters import api_objects
from gpupool.clusters.base import (
    CORDONED_BY_GPUPOOL,
    GPU_RESOURCE,
    MIG_RESOURCE_PREFIX,
    SCHEDULER_NAME,
    TERMINAL_PHASES,
    Allowance,
    Arrivals,
    BindOutcome,
    ClusterDelta,
    ClusterUnavailable,
    ClusterView,
    EventOutcome,
    EventRequest,
    EventType,
    EvictOutcome,
    JobKey,
    JobSuspendResult,
    NewPod,
    NodeCordonResult,
    NodeFacts,
    PodBinding,
    PodFacts,
    PodKey,
    PodRef,
    PodResult,
    PodsOutcome,
    ResourceAmounts,
    apply_usage_changes,
)
from gpupool.clusters.grouping import EXPECTED_RUNTIME, AnnotationError, parse_duration
from gpupool.clusters.informer import Delete, Replace, Store, Upsert
from gpupool.clusters.inventory import (
    GPU_COUNT_LABEL,
    UNHEALTHY_GPUS_LABEL,
    unhealthy_gpus_label,
)
from gpupool.clusters.matching import affinity_matches, selector_matches
from gpupool.clusters.simulated_store import (
    MemoryStore,
    ObjectKey,
    SimulatedStore,
    StoredObject,
    StoreTransaction,
)

UNREACHABLE_TAINT = "node.kubernetes.io/unreachable"
NOT_READY_EVICTION_S = 300.0  # DefaultTolerationSeconds for not-ready / unreachable
EVENT_TTL_S = 3600.0  # kube-apiserver's --event-ttl
PDB_REFUSAL = "Cannot evict pod as it would violate the pod's disruption budget."
SEVERAL_PDBS = "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."  # noqa: E501
_SLEEP_UNITS = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_SLEEP_ARGUMENT = re.compile(r"^([0-9]+(?:\.[0-9]*)?|\.[0-9]+)([smhd]?)$")


@dataclass(frozen=True, slots=True)
class GpuHolding:
    """The physical GPUs of its node a running pod holds, and since when (what a DCGM
    exporter would label with the pod)."""

    pod: PodFacts
    node: str
    gpus: tuple[int, ...]
    started_at: float
    gpu_model: str = ""


# --- clocks ---------------------------------------------------------------------------------


class Clock(Protocol):
    """Where the simulated cluster reads the time (POSIX seconds)."""

    def now(self) -> float:
        """The current time."""
        ...


class VirtualClock:
    """A clock that only moves when told to (tests, replays)."""

    def __init__(self, start: float) -> None:
        self._now = start

    def now(self) -> float:
        """The current virtual time."""
        return self._now

    def advance(self, seconds: float) -> float:
        """Move the clock forward; returns the new time."""
        if seconds < 0:
            raise ValueError("a clock does not go back")
        self._now += seconds
        return self._now


@dataclass(frozen=True, slots=True)
class ScaledClock:
    """The wall clock sped up ``speed`` times from a common origin (the demo's clock).

    At wall time ``wall_origin`` it reads ``origin``; every process that builds it from the
    same three numbers reads the same time.
    """

    origin: float
    wall_origin: float
    speed: float = 1.0
    wall: Callable[[], float] = time.time

    def now(self) -> float:
        """The simulated time now."""
        return self.origin + (self.wall() - self.wall_origin) * self.speed


# --- what pods run --------------------------------------------------------------------------


def sleep_seconds(command: Sequence[str]) -> float | None:
    """What ``sleep`` would wait for this command (GNU units, arguments added), else None."""
    if len(command) < 2 or command[0].rsplit("/", 1)[-1] != "sleep":
        return None
    total = 0.0
    for argument in command[1:]:
        match = _SLEEP_ARGUMENT.match(argument)
        if match is None:
            return None
        total += float(match.group(1)) * _SLEEP_UNITS[match.group(2)]
    return total


def pod_runtime_s(body: Mapping[str, Any]) -> float | None:
    """How long a pod runs once started: its command's ``sleep``, else the expected-runtime
    annotation, else None (until it is deleted)."""
    containers = (body.get("spec") or {}).get("containers") or []
    for container in containers:
        seconds = sleep_seconds([str(word) for word in container.get("command") or ()])
        if seconds is not None:
            return seconds
    annotation = ((body.get("metadata") or {}).get("annotations") or {}).get(EXPECTED_RUNTIME)
    if annotation is not None:
        try:
            return parse_duration(EXPECTED_RUNTIME, str(annotation))
        except AnnotationError:
            return None
    return None


# --- devices --------------------------------------------------------------------------------


def _gpu_resources(capacity: ResourceAmounts) -> dict[str, int]:
    """The device-plugin resources of a node: ``nvidia.com/gpu`` and ``nvidia.com/mig-*``."""
    resources = {GPU_RESOURCE: capacity.gpus} if capacity.gpus else {}
    resources.update({MIG_RESOURCE_PREFIX + p: n for p, n in capacity.mig.items() if n})
    return resources


def _requested(requests: ResourceAmounts) -> dict[str, int]:
    return _gpu_resources(requests)


def _physical_gpus(node: NodeFacts) -> int:
    text = node.labels.get(GPU_COUNT_LABEL, "")
    if text.isdigit() and int(text) > 0:
        return int(text)
    return node.capacity.gpus


def _slots_per_gpu(node: NodeFacts, resource: str) -> int:
    """Device slots of ``resource`` on one physical GPU (replicas, MIG instances, or 1)."""
    capacity = _gpu_resources(node.capacity).get(resource, 0)
    return max(capacity // max(_physical_gpus(node), 1), 1)


def _allocatable_json(
    node: NodeFacts, capacity: Mapping[str, Any], unhealthy: int
) -> dict[str, Any]:
    """The node's allocatable resources with ``unhealthy`` GPUs' devices taken away."""
    allocatable = dict(capacity)
    for resource, count in _gpu_resources(node.capacity).items():
        allocatable[resource] = str(max(count - unhealthy * _slots_per_gpu(node, resource), 0))
    return allocatable


# --- the cluster ----------------------------------------------------------------------------


@functools.lru_cache(maxsize=64)
def _format(posix: float) -> str:  # a batch of bindings starts its pods at one time
    return api_objects.format_time(posix)


class SimulatedCluster:
    """A Kubernetes cluster simulated over a ``SimulatedStore`` (see the module docstring)."""

    def __init__(
        self,
        store: SimulatedStore,
        clock: Clock,
        *,
        not_ready_eviction_s: float = NOT_READY_EVICTION_S,
        event_ttl_s: float = EVENT_TTL_S,
    ) -> None:
        self.store = store
        self.clock = clock
        self.not_ready_eviction_s = not_ready_eviction_s
        self.event_ttl_s = event_ttl_s
        # ``gpus_in_use`` kept by the store's changes: the holding of each running pod, and
        # the store revision it reflects (a read at B1's size decoded 30,000 pods each time).
        self._holdings: dict[PodKey, GpuHolding] = {}
        self._holdings_seen = 0
        # What each node's live pods take as the kubelet's admission counts it, kept from one
        # ``bind_many`` to the next with the store revision it reflects (``_kept_loads``): the
        # first admission on a node otherwise reads its pods (2,000 nodes in B1-loop's first
        # cycle, whose pods the pool's load bound).
        self._loads: dict[str, _NodeLoad] = {}
        self._loads_seen = 0

    # - the controllers -

    def advance(self) -> int:
        """Let the kubelets and controllers do what is due by now; the objects they changed."""
        now = self.clock.now()
        due = self.store.next_due()
        if due is None or due > now:
            return 0
        with self.store.transaction() as tx:
            return self._advance(tx, now)

    def _advance(self, tx: StoreTransaction, now: float) -> int:
        changed = 0
        for obj in tx.due(now):
            changed += 1
            if obj.kind == "Event":
                tx.remove(obj)
            elif obj.kind == "Pod":
                self._pod_due(tx, obj, now)
            else:
                tx.put(obj.evolve(due_at=None))
        return changed

    def _pod_due(self, tx: StoreTransaction, obj: StoredObject, now: float) -> None:
        sim = dict(obj.sim)
        evict_at = sim.get("evict_at")
        if evict_at is not None and evict_at <= now:
            # The taint eviction controller deletes the pods of a node lost for too long.
            tx.remove(
                _deleted(
                    obj,
                    evict_at,
                    ("DeletionByTaintManager", "Taint manager: deleting due to NoExecute taint"),
                )
            )
            self._event(tx, _ref(obj), "TaintManagerEviction",
                        f"Marking for deletion Pod {obj.namespace}/{obj.name}", "Normal",
                        evict_at)  # fmt: skip
            return
        facts = _pod(obj)
        ends_at = sim.get("ends_at")
        if evict_at is None and ends_at is not None and ends_at <= now and facts.phase == "Running":
            status = {**obj.body.get("status", {}), "phase": "Succeeded", "reason": "Completed"}
            tx.put(
                obj.evolve(
                    body={**obj.body, "status": status},
                    sim={**sim, "devices": {}},
                    due_at=None,
                    facts=_pod_with(facts, phase="Succeeded"),
                )
            )
            return
        tx.put(obj.evolve(due_at=_next_due(sim, facts)))

    # - nodes -

    def add_nodes(self, manifests: Iterable[Mapping[str, Any]]) -> list[str]:
        """Create Nodes (from ``node_profiles``); an existing name is replaced. Ready at once."""
        names = []
        now = self.clock.now()
        with self.store.transaction() as tx:
            for manifest in manifests:
                name = str(manifest["metadata"]["name"])
                metadata = {
                    **manifest["metadata"],
                    "uid": str(uuid.uuid5(uuid.NAMESPACE_DNS, f"{name}.node.gpupool.local")),
                    "creationTimestamp": _format(now),
                }
                status = {**manifest.get("status", {}), "conditions": [_ready_condition(True)]}
                body = {**manifest, "metadata": metadata, "status": status}
                tx.put(StoredObject("Node", "", name, body, sim={"unhealthy": {}}))
                names.append(name)
        return names

    def remove_node(self, name: str) -> bool:
        """Delete a Node (its pods stay bound to nothing, as on Kubernetes). False if absent."""
        with self.store.transaction() as tx:
            obj = tx.get("Node", "", name)
            if obj is None:
                return False
            tx.remove(obj)
            return True

    def set_node_ready(self, name: str, ready: bool) -> None:
        """A node's kubelet stops (or starts again) posting status: NotReady, tainted, and its
        pods deleted ``not_ready_eviction_s`` later unless it comes back first."""
        now = self.clock.now()
        with self.store.transaction() as tx:
            self._advance(tx, now)
            node = self._node_or_raise(tx, name)
            facts = _node(node)
            if facts.ready == ready:
                return
            taints = [t for t in node.body.get("spec", {}).get("taints", ())
                      if t.get("key") != UNREACHABLE_TAINT]  # fmt: skip
            if not ready:
                taints += [
                    {"key": UNREACHABLE_TAINT, "effect": "NoSchedule", "timeAdded": _format(now)},
                    {"key": UNREACHABLE_TAINT, "effect": "NoExecute", "timeAdded": _format(now)},
                ]
            spec = {**node.body.get("spec", {}), "taints": taints}
            if not taints:
                spec.pop("taints")
            status = {**node.body["status"], "conditions": [_ready_condition(ready)]}
            tx.put(node.evolve(body={**node.body, "spec": spec, "status": status}, facts=None))
            for pod in tx.select("Pod", node=name):
                self._node_readiness_reaches_pod(tx, pod, ready, now)

    def _node_readiness_reaches_pod(
        self, tx: StoreTransaction, pod: StoredObject, ready: bool, now: float
    ) -> None:
        facts = _pod(pod)
        sim = dict(pod.sim)
        if not ready:
            sim["evict_at"] = now + self.not_ready_eviction_s
            tx.put(pod.evolve(sim=sim, due_at=_next_due(sim, facts)))
            return
        sim.pop("evict_at", None)
        if facts.phase == "Pending":  # bound while the node was away: it starts now
            node = tx.get("Node", "", facts.node_name or "")
            if node is not None:
                self._start(tx, pod.evolve(sim=sim), _node(node), now)
                return
        tx.put(pod.evolve(sim=sim, due_at=_next_due(sim, facts)))

    def cordon(self, name: str, cordoned: bool = True) -> None:
        """Mark a node unschedulable (``kubectl cordon``) or schedulable again."""
        with self.store.transaction() as tx:
            node = self._node_or_raise(tx, name)
            spec = {**node.body.get("spec", {}), "unschedulable": cordoned}
            if not cordoned:
                spec.pop("unschedulable")
            tx.put(node.evolve(body={**node.body, "spec": spec}, facts=None))

    def set_unschedulable(self, name: str, unschedulable: bool) -> NodeCordonResult:
        """gpupool's cordon of a node, as the Kubernetes backend makes it (``ClusterBackend.
        set_node_unschedulable``): marked ``CORDONED_BY_GPUPOOL``; only that cordon is lifted,
        one made by ``cordon`` (someone else's) is neither taken over nor lifted."""
        with self.store.transaction() as tx:
            node = tx.get("Node", "", name)
            if node is None:
                return NodeCordonResult(name, "gone", "the node no longer exists")
            metadata = dict(node.body.get("metadata") or {})
            annotations = dict(metadata.get("annotations") or {})
            spec = dict(node.body.get("spec") or {})
            ours = CORDONED_BY_GPUPOOL in annotations
            cordoned = bool(spec.get("unschedulable"))
            if unschedulable and cordoned:
                return NodeCordonResult(name, "unchanged")
            if not unschedulable and not ours:
                if cordoned:
                    return NodeCordonResult(name, "kept", "cordoned by someone else: left cordoned")
                return NodeCordonResult(name, "unchanged")
            if unschedulable:
                spec["unschedulable"] = True
                annotations[CORDONED_BY_GPUPOOL] = "true"
            else:
                spec.pop("unschedulable", None)
                annotations.pop(CORDONED_BY_GPUPOOL, None)
            metadata["annotations"] = annotations
            body = {**node.body, "metadata": metadata, "spec": spec}
            tx.put(node.evolve(body=body, facts=None))
        return NodeCordonResult(name, "cordoned" if unschedulable else "uncordoned")

    def set_gpu_health(self, name: str, index: int, healthy: bool, reason: str = "") -> None:
        """GPU ``index`` of a node turns unhealthy (its devices leave allocatable and the pod
        using it fails) or healthy again."""
        now = self.clock.now()
        with self.store.transaction() as tx:
            self._advance(tx, now)
            node = self._node_or_raise(tx, name)
            facts = _node(node)
            if not 0 <= index < _physical_gpus(facts):
                raise ValueError(
                    f"node {name} has GPUs 0..{_physical_gpus(facts) - 1}, not {index}"
                )
            unhealthy = dict(node.sim.get("unhealthy", {}))
            if healthy:
                unhealthy.pop(str(index), None)
            else:
                unhealthy[str(index)] = reason or "unhealthy"
            allocatable = _allocatable_json(facts, node.body["status"]["capacity"], len(unhealthy))
            status = {**node.body["status"], "allocatable": allocatable}
            # As a node health checker does: the label names the GPUs (the device plugin's
            # allocatable says only how many).
            metadata = dict(node.body["metadata"])
            labels = metadata["labels"] = dict(metadata.get("labels") or {})
            labels.pop(UNHEALTHY_GPUS_LABEL, None)
            if unhealthy:
                labels[UNHEALTHY_GPUS_LABEL] = unhealthy_gpus_label(int(i) for i in unhealthy)
            tx.put(
                node.evolve(
                    body={**node.body, "metadata": metadata, "status": status},
                    sim={**node.sim, "unhealthy": unhealthy},
                    facts=None,
                )
            )
            if healthy:
                return
            for pod in tx.select("Pod", node=name):
                if _holds_gpu(pod, facts, index):
                    why = f"GPU {index} of node {name} is unhealthy: {unhealthy[str(index)]}"
                    self._fail(tx, pod, "GPUUnhealthy", why)

    def _node_or_raise(self, tx: StoreTransaction, name: str) -> StoredObject:
        node = tx.get("Node", "", name)
        if node is None:
            raise KeyError(f"no node {name}")
        return node

    # - pods made outside gpupool, and budgets -

    def add_pod(self, manifest: Mapping[str, Any]) -> PodRef:
        """Create any pod (``kubectl create``): another scheduler's (bound by ``nodeName``, it
        starts at once), a Job's, or one for gpupool. Raises ``ValueError`` if it exists."""
        now = self.clock.now()
        with self.store.transaction() as tx:
            self._advance(tx, now)
            obj = self._new_pod(tx, manifest, now)
            job = _pod(obj).job
            if job is not None and _suspended(tx, job):
                raise ValueError(f"Job {job} is suspended: its controller makes no pods")
            node_name = obj.body.get("spec", {}).get("nodeName")
            if node_name:
                node = tx.get("Node", "", str(node_name))
                if node is not None:
                    obj = obj.evolve(node=str(node_name))
                    self._start(tx, obj, _node(node), now)
                    return _ref(obj)
            tx.put(obj)
            return _ref(obj)

    def _new_pod(
        self, tx: StoreTransaction, manifest: Mapping[str, Any], now: float
    ) -> StoredObject:
        metadata = dict(manifest.get("metadata") or {})
        namespace = str(metadata.get("namespace") or "default")
        name = str(metadata["name"])
        if tx.get("Pod", namespace, name) is not None:
            raise ValueError(f'pods "{name}" already exists')
        metadata.update(namespace=namespace, uid=str(uuid.uuid4()), creationTimestamp=_format(now))
        body = {**manifest, "metadata": metadata, "status": {"phase": "Pending"}}
        # Decoded once here, so a store that keeps objects (in memory) never decodes it again.
        facts = api_objects.pod_facts(body)
        return StoredObject(
            "Pod", namespace, name, body, sim={"runtime_s": pod_runtime_s(body)}, facts=facts
        )

    def patch_pod_metadata(
        self,
        namespace: str,
        name: str,
        *,
        labels: Mapping[str, str] | None = None,
        annotations: Mapping[str, str] | None = None,
    ) -> None:
        """Add or change a pod's labels or annotations (e.g. ``gpupool.io/last-checkpoint``)."""
        with self.store.transaction() as tx:
            pod = tx.get("Pod", namespace, name)
            if pod is None:
                raise KeyError(f"no pod {namespace}/{name}")
            metadata = dict(pod.body["metadata"])
            if labels:
                metadata["labels"] = {**metadata.get("labels", {}), **labels}
            if annotations:
                metadata["annotations"] = {**metadata.get("annotations", {}), **annotations}
            tx.put(pod.evolve(body={**pod.body, "metadata": metadata}, facts=None))

    def add_disruption_budget(
        self,
        namespace: str,
        name: str,
        match_labels: Mapping[str, str],
        *,
        min_available: int | None = None,
        max_unavailable: int | None = None,
    ) -> None:
        """A PodDisruptionBudget (whole numbers only) over the pods with these labels."""
        if (min_available is None) == (max_unavailable is None):
            raise ValueError("a budget has one of min_available and max_unavailable")
        spec: dict[str, Any] = {"selector": {"matchLabels": dict(match_labels)}}
        if min_available is not None:
            spec["minAvailable"] = min_available
        else:
            spec["maxUnavailable"] = max_unavailable
        body = {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": name, "namespace": namespace},
            "spec": spec,
        }
        with self.store.transaction() as tx:
            tx.put(StoredObject("PodDisruptionBudget", namespace, name, body))

    def events_of(self, pod: PodRef) -> list[Mapping[str, Any]]:
        """The Events about a pod (``kubectl describe pod``), oldest first."""
        with self.store.transaction() as tx:
            events = [
                e.body
                for e in tx.select("Event", namespace=pod.namespace)
                if e.body["involvedObject"]["name"] == pod.name
                and (not pod.uid or e.body["involvedObject"].get("uid") == pod.uid)
            ]
        return sorted(events, key=lambda e: (e["firstTimestamp"], e["metadata"]["name"]))

    def pods(self) -> list[PodFacts]:
        """Every pod now (ours and other schedulers'), by namespace and name."""
        self.advance()
        with self.store.transaction() as tx:
            return sorted((_pod(p) for p in tx.select("Pod")), key=lambda p: p.key)

    def nodes(self) -> list[NodeFacts]:
        """Every node now, by name, and the unhealthy GPUs of each."""
        with self.store.transaction() as tx:
            return sorted((_node(n) for n in tx.select("Node")), key=lambda n: n.name)

    def gpus_in_use(self) -> list[GpuHolding]:
        """The physical GPUs each running pod holds, by pod, as of the cluster's last step (for
        the simulated source of GPU utilisation, ``gpupool.utilization.simulated``, which the
        loop reads right after its sync stepped the cluster: reading does not step it again).

        Kept between reads from the store's changes: only pods written since the last read,
        and the pods of nodes written since, are looked at again (all of them after a
        re-list)."""
        changes = self.store.changes_since(self._holdings_seen)
        holdings = self._holdings
        with self.store.transaction() as tx:
            if changes.relist:
                holdings.clear()
                names = {(o.namespace, o.name) for o in changes.objects if o.kind == "Pod"}
            else:
                names = set()
                for obj in changes.objects:
                    if obj.kind == "Pod":
                        names.add((obj.namespace, obj.name))
                    elif obj.kind == "Node":
                        names.update((p.namespace, p.name) for p in tx.select("Pod", node=obj.name))
            nodes: dict[str, NodeFacts | None] = {}
            for namespace, name in names:
                pod = tx.get("Pod", namespace, name)
                holding = None if pod is None or pod.deleted else self._holding(tx, pod, nodes)
                if holding is None:
                    holdings.pop(PodKey(namespace, name), None)
                else:
                    holdings[holding.pod.key] = holding
        # Changes written between the two reads above are looked at again next time.
        self._holdings_seen = changes.revision
        return sorted(holdings.values(), key=lambda h: h.pod.key)

    @staticmethod
    def _holding(
        tx: StoreTransaction, pod: StoredObject, nodes: dict[str, NodeFacts | None]
    ) -> GpuHolding | None:
        """The GPUs a stored pod holds (None: it runs on none)."""
        facts = _pod(pod)
        node_name = facts.node_name or ""
        if facts.phase != "Running" or not node_name:
            return None
        if node_name not in nodes:
            stored = tx.get("Node", "", node_name)
            nodes[node_name] = None if stored is None or stored.deleted else _node(stored)
        node = nodes[node_name]
        if node is None:
            return None
        held: set[int] = set()
        for resource, slots in pod.sim.get("devices", {}).items():
            per_gpu = _slots_per_gpu(node, resource)
            held.update(slot // per_gpu for slot in slots)
        if not held:
            return None
        started = float(pod.sim.get("started_at") or facts.started_at or 0.0)
        return GpuHolding(facts, node.name, tuple(sorted(held)), started, node.gpu_product or "")

    def unhealthy_gpus(self, name: str) -> dict[int, str]:
        """A node's unhealthy GPUs and why."""
        with self.store.transaction() as tx:
            node = self._node_or_raise(tx, name)
            return {int(i): why for i, why in node.sim.get("unhealthy", {}).items()}

    # - the API gpupool uses -

    def create_pod(self, pod: NewPod) -> PodResult:
        """Create a pod submitted through gpupool (``exists`` if the name is taken)."""
        now = self.clock.now()
        with self.store.transaction() as tx:
            self._advance(tx, now)
            if tx.get("Pod", pod.namespace, pod.name) is not None:
                return PodResult(pod_ref(pod), "exists", f'pods "{pod.name}" already exists')
            obj = tx.put(self._new_pod(tx, api_objects.pod_manifest(pod), now))
        return PodResult(_ref(obj), "created")

    def bind(self, gang: Sequence[PodBinding]) -> BindOutcome:
        """Bind a whole gang or nothing: every member is checked before any is bound."""
        if not gang:
            return BindOutcome()
        return self.bind_many({"": gang})[""]

    def bind_many(self, gangs: Mapping[str, Sequence[PodBinding]]) -> dict[str, BindOutcome]:
        """Bind gangs in order, each whole or not at all (as ``bind``), in one transaction of
        the store: the controllers catch up once, and the kubelets' admissions keep what
        each node's pods take (``_NodeLoad``) instead of listing them for every pod bound."""
        outcomes: dict[str, BindOutcome] = {key: BindOutcome() for key in gangs}
        if not any(gangs.values()):
            return outcomes
        now = self.clock.now()
        with self.store.transaction() as tx:
            self._advance(tx, now)
            loads = self._kept_loads(tx)
            self._loads = {}  # kept again only once every gang is through
            for key, gang in gangs.items():
                if gang:
                    outcomes[key] = self._bind(tx, gang, now, loads)
            revision = tx.revision
        # Kept once the transaction is through (a store in the database may yet fail to commit).
        self._loads, self._loads_seen = loads, revision
        return outcomes

    def _kept_loads(self, tx: StoreTransaction) -> dict[str, _NodeLoad]:
        """The loads kept from the last ``bind_many``, less those of the nodes written since
        and of the nodes a pod written since was (or is) bound to; none after a re-list."""
        loads = self._loads
        if not loads:
            return {}
        changes = tx.changes_since(self._loads_seen)
        if changes.relist:
            return {}
        pods: set[ObjectKey] = set()
        for obj in changes.objects:
            if obj.kind == "Node":
                loads.pop(obj.name, None)
            elif obj.kind == "Pod":
                pods.add(obj.key)
                loads.pop(obj.node, None)
        if pods:
            # And the nodes whose loads count a pod written since: a deleted pod's tombstone
            # names no node, and a pod of the same name made again may be bound elsewhere.
            for node in [n for n, load in loads.items() if not pods.isdisjoint(load.members)]:
                del loads[node]
        return loads

    def _bind(
        self,
        tx: StoreTransaction,
        gang: Sequence[PodBinding],
        now: float,
        loads: dict[str, _NodeLoad],
    ) -> BindOutcome:
        get = tx.get
        pods = [get("Pod", b.pod.namespace, b.pod.name) for b in gang]  # read before any write
        for binding, obj in zip(gang, pods, strict=True):
            why = self._unbindable(tx, binding, obj)
            if why is not None:
                return BindOutcome(failed=binding.pod, error=why)
        for binding, obj in zip(gang, pods, strict=True):
            assert obj is not None
            facts = _pod(obj)
            if facts.node_name == binding.node:
                continue  # bound there already: done
            node = tx.get("Node", "", binding.node)
            assert node is not None
            self._start(tx, obj, _node(node), now, loads, bind=True)
        return BindOutcome(bound=tuple(b.pod for b in gang))

    def _unbindable(
        self, tx: StoreTransaction, binding: PodBinding, obj: StoredObject | None
    ) -> str | None:
        if obj is None:
            return "the pod no longer exists"
        facts = _pod(obj)
        if binding.pod.uid and facts.uid != binding.pod.uid:
            return "the pod was replaced by a newer one of the same name"
        if facts.deleting or facts.finished:
            return f"the pod is {'being deleted' if facts.deleting else facts.phase}"
        if facts.node_name and facts.node_name != binding.node:
            return f"the pod is already bound to node {facts.node_name}"
        if tx.get("Node", "", binding.node) is None:
            return f"node {binding.node} does not exist"
        return None

    def evict(self, pods: Sequence[PodRef], reason: str) -> EvictOutcome:
        """The eviction subresource for a victim set: every pod judged first (a dry run), the
        set left alone if any is refused or fails, else each evicted in turn."""
        if not pods:
            return EvictOutcome()
        now = self.clock.now()
        with self.store.transaction() as tx:
            self._advance(tx, now)
            trial = [self._eviction(tx, pod, disrupted={}) for pod in pods]
            blocking = [r for r in trial if r.status not in ("evicted", "gone")]
            if blocking:
                first = blocking[0]
                return EvictOutcome(
                    tuple(
                        r
                        if r.status != "evicted"
                        else PodResult(r.pod, "skipped", f"not evicted: {first.pod} {first.status}")
                        for r in trial
                    )
                )
            results = []
            disrupted: dict[str, int] = {}
            for pod, tried in zip(pods, trial, strict=True):
                result = tried if tried.status == "gone" else self._eviction(tx, pod, disrupted)
                if result.status == "evicted":
                    obj = tx.get("Pod", pod.namespace, pod.name)
                    assert obj is not None
                    # As the API server: the DisruptionTarget condition first, then the delete.
                    tx.remove(
                        _deleted(obj, now, ("EvictionByEvictionAPI", "Eviction API: evicting"))
                    )
                    self._event(tx, pod, "Preempted", f"evicted by gpupool: {reason}", "Normal",
                                now, uid=_pod(obj).uid)  # fmt: skip
                results.append(result)
        return EvictOutcome(tuple(results))

    def _eviction(self, tx: StoreTransaction, pod: PodRef, disrupted: dict[str, int]) -> PodResult:
        """Would the API evict this pod now? ``disrupted`` counts this call's evictions per
        budget (the API takes each from the budget's allowed disruptions)."""
        obj = tx.get("Pod", pod.namespace, pod.name)
        if obj is None:
            return PodResult(pod, "gone", "the pod no longer exists")
        facts = _pod(obj)
        if pod.uid and facts.uid != pod.uid:
            return PodResult(pod, "gone", "the pod was replaced by a newer one")
        if facts.phase in ("Pending", *TERMINAL_PHASES) or facts.deleting:
            return PodResult(pod, "evicted")  # the API deletes these without asking budgets
        budgets = [
            b
            for b in tx.select("PodDisruptionBudget", namespace=pod.namespace)
            if _selects(b, facts.labels)
        ]
        if len(budgets) > 1:
            return PodResult(pod, "failed", f"HTTP 500: {SEVERAL_PDBS}")
        if not budgets:
            return PodResult(pod, "evicted")
        budget = budgets[0]
        healthy, needed = self._budget_state(tx, budget)
        allowed = healthy - needed - disrupted.get(budget.name, 0)
        if allowed <= 0:
            cause = (
                f"The disruption budget {budget.name} needs {needed} healthy pods and has "
                f"{healthy} currently"
            )
            return PodResult(pod, "refused", f"{PDB_REFUSAL}; {cause}")
        disrupted[budget.name] = disrupted.get(budget.name, 0) + 1
        return PodResult(pod, "evicted")

    def _budget_state(self, tx: StoreTransaction, budget: StoredObject) -> tuple[int, int]:
        """A budget's healthy pods, and how many of its pods must stay healthy."""
        members = [
            _pod(p)
            for p in tx.select("Pod", namespace=budget.namespace)
            if _selects(budget, _pod(p).labels) and not _pod(p).finished
        ]
        ready_nodes = {n.name for n in map(_node, tx.select("Node")) if n.ready}
        healthy = sum(
            1
            for p in members
            if p.phase == "Running" and not p.deleting and p.node_name in ready_nodes
        )
        spec = budget.body["spec"]
        if "minAvailable" in spec:
            needed = int(spec["minAvailable"])
        else:
            needed = len(members) - int(spec["maxUnavailable"])
        return healthy, needed

    def delete_pods(self, pods: Sequence[PodRef], reason: str) -> PodsOutcome:
        """Delete pods (uid as precondition); an Event says why first."""
        now = self.clock.now()
        results = []
        with self.store.transaction() as tx:
            self._advance(tx, now)
            for pod in pods:
                obj = tx.get("Pod", pod.namespace, pod.name)
                if obj is None:
                    results.append(PodResult(pod, "gone", f'pods "{pod.name}" not found'))
                    continue
                if pod.uid and _pod(obj).uid != pod.uid:
                    results.append(
                        PodResult(pod, "gone", "the uid precondition names an older pod")
                    )
                    continue
                self._event(tx, pod, "Deleted", f"deleted by gpupool: {reason}", "Normal", now,
                            uid=_pod(obj).uid)  # fmt: skip
                tx.remove(_deleted(obj, now))
                results.append(PodResult(pod, "deleted"))
        return PodsOutcome(tuple(results))

    def suspend_job(self, job: JobKey) -> JobSuspendResult:
        """Suspend a Job as its controller does: the Job is marked suspended (a ``Job`` object
        of the store, ``spec.suspend``) and its pods that have not ended are deleted; it makes
        no pod again (``add_pod`` refuses one of a suspended Job's). The simulated cluster
        keeps no Job otherwise: a Job exists while a pod names it its controller (``gone``
        when none does and it was never suspended)."""
        now = self.clock.now()
        with self.store.transaction() as tx:
            self._advance(tx, now)
            pods = [
                obj for obj in tx.select("Pod", namespace=job.namespace) if _pod(obj).job == job
            ]
            if not pods and not _suspended(tx, job):
                return JobSuspendResult(job, "gone", f'jobs.batch "{job.name}" not found')
            body = {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "metadata": {"name": job.name, "namespace": job.namespace},
                "spec": {"suspend": True},
            }
            tx.put(StoredObject("Job", job.namespace, job.name, body))
            for obj in pods:
                if not _pod(obj).finished:
                    self._event(tx, _ref(obj), "Killing", f"Stopping container: Job {job} "
                                "is suspended", "Normal", now)  # fmt: skip
                    tx.remove(_deleted(obj, now))
        return JobSuspendResult(job, "suspended")

    def record_event(
        self, pod: PodRef, reason: str, message: str, event_type: EventType = "Normal"
    ) -> EventOutcome:
        """Create the Event, or count one more of the same (same pod, reason, type, message)."""
        now = self.clock.now()
        with self.store.transaction() as tx:
            return self._event(tx, pod, reason, message, event_type, now)

    def _event(
        self,
        tx: StoreTransaction,
        pod: PodRef,
        reason: str,
        message: str,
        event_type: str,
        now: float,
        *,
        uid: str | None = None,
    ) -> EventOutcome:
        pod = PodRef(pod.namespace, pod.name, pod.uid or uid or "")
        message = message[: api_objects.EVENT_MESSAGE_LIMIT]
        name = api_objects.event_name(pod, reason, event_type, message)
        existing = tx.get("Event", pod.namespace, name)
        stamp = _format(now)
        if existing is not None:
            body = {**existing.body, "count": int(existing.body["count"]) + 1,
                    "lastTimestamp": stamp}  # fmt: skip
            tx.put(existing.evolve(body=body, due_at=now + self.event_ttl_s))
            return "updated"
        involved = {"apiVersion": "v1", "kind": "Pod", "name": pod.name,
                    "namespace": pod.namespace}  # fmt: skip
        if pod.uid:
            involved["uid"] = pod.uid
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": name, "namespace": pod.namespace},
            "involvedObject": involved,
            "reason": reason,
            "message": message,
            "type": event_type,
            "source": {"component": SCHEDULER_NAME},
            "reportingComponent": SCHEDULER_NAME,
            "reportingInstance": "simulated",
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "count": 1,
        }
        tx.put(StoredObject("Event", pod.namespace, name, body, due_at=now + self.event_ttl_s))
        return "created"

    # - the kubelet -

    def _start(
        self,
        tx: StoreTransaction,
        pod: StoredObject,
        node: NodeFacts,
        now: float,
        loads: dict[str, _NodeLoad] | None = None,
        *,
        bind: bool = False,
    ) -> None:
        """The node's kubelet admits a bound pod and runs it, or rejects it (``Failed``).
        ``loads``: what the nodes' pods take, kept through one transaction (``bind_many``)
        and updated here with what this pod takes. ``bind``: the pod is bound to ``node``
        first, in the same write (a binding and its start as one new object, not two)."""
        facts = _pod(pod)  # before a binding here: the admission reads no node name
        body = pod.body
        if bind:
            body = {**body, "spec": {**body["spec"], "nodeName": node.name}}
            if not node.ready:  # bound, and not started: as written by a binding alone
                facts = _pod_with(facts, node_name=node.name)
                pod = pod.evolve(node=node.name, body=body, facts=facts)
        sim = dict(pod.sim)
        if not node.ready:  # nobody there to start it; evicted if the node stays away
            sim["evict_at"] = now + self.not_ready_eviction_s
            tx.put(pod.evolve(sim=sim, due_at=_next_due(sim, facts)))
            if loads is not None:
                _took(loads, node.name, pod.key, facts.requests, {})
            return
        rejection = self._admission(tx, pod, facts, node, loads)
        if loads is not None:
            _took(loads, node.name, pod.key, facts.requests, rejection)
        if isinstance(rejection, tuple):
            reason, message = rejection
            if bind:
                bound = _pod_with(facts, node_name=node.name)
                pod = pod.evolve(node=node.name, body=body, facts=bound)
            self._fail(tx, pod, reason, message)
            return
        runtime = sim.get("runtime_s")
        sim.update(devices=rejection, started_at=now)
        sim["ends_at"] = None if runtime is None else now + float(runtime)
        status = {"phase": "Running", "startTime": _format(now),
                  "conditions": [{"type": "Ready", "status": "True"}]}  # fmt: skip
        running = _pod_with(
            facts,
            node_name=node.name if bind else facts.node_name,
            phase="Running",
            started_at=_seconds(now),
        )
        tx.put(
            pod.evolve(
                body={**body, "status": status},
                sim=sim,
                due_at=_next_due(sim, running),
                node=node.name if bind else pod.node,
                facts=running,
            )
        )

    def _admission(
        self,
        tx: StoreTransaction,
        pod: StoredObject,
        facts: PodFacts,
        node: NodeFacts,
        loads: dict[str, _NodeLoad] | None = None,
    ) -> dict[str, list[int]] | tuple[str, str]:
        """The device slots the kubelet gives the pod, or why it rejects it."""
        if not (
            selector_matches(facts.node_selector, node.labels)
            and affinity_matches(facts.required_node_affinity, node.name, node.labels)
        ):
            return "NodeAffinity", "Pod was rejected: Predicate NodeAffinity failed"
        load = _load_of(tx, node.name, pod.key, loads)
        for resource, asked, have, taken in (
            ("cpu", facts.requests.cpu_milli, node.allocatable.cpu_milli, load.cpu_milli),
            ("memory", facts.requests.memory_mib, node.allocatable.memory_mib, load.memory_mib),
            ("pods", 1, node.max_pods or 110, len(load.members)),
        ):
            if asked and taken + asked > have:
                return f"OutOf{resource}", (
                    f"Pod was rejected: Node didn't have enough resource: {resource}, "
                    f"requested: {asked}, used: {taken}, capacity: {have}"
                )
        held = load.held
        slots = load.slots if loads is not None else None
        if slots is None:  # the node's device slots (kept through a transaction: bind_many)
            slots = _DeviceSlots(
                _gpu_resources(node.capacity),
                {int(i) for i in _node_sim(tx, node.name).get("unhealthy", {})},
            )
            if loads is not None:
                load.slots = slots
        capacity, unhealthy = slots.capacity, slots.unhealthy
        devices: dict[str, list[int]] = {}
        for resource, asked in _requested(facts.requests).items():
            per_gpu = slots.per_gpu.get(resource)
            if per_gpu is None:
                per_gpu = slots.per_gpu[resource] = _slots_per_gpu(node, resource)
            taken_slots = held.get(resource, set())
            free = [
                slot
                for slot in range(capacity.get(resource, 0))
                if slot not in taken_slots and slot // per_gpu not in unhealthy
            ]
            if len(free) < asked:
                total = capacity.get(resource, 0) - per_gpu * len(unhealthy)
                return f"OutOf{resource}", (
                    f"Pod was rejected: Node didn't have enough resource: {resource}, "
                    f"requested: {asked}, used: {len(taken_slots)}, capacity: {total}"
                )
            devices[resource] = free[:asked]
        return devices

    def _fail(self, tx: StoreTransaction, pod: StoredObject, reason: str, message: str) -> None:
        status = {**pod.body.get("status", {}), "phase": "Failed", "reason": reason,
                  "message": message}  # fmt: skip
        sim = {**pod.sim, "devices": {}, "ends_at": None}
        facts = _pod_with(_pod(pod), phase="Failed")
        tx.put(pod.evolve(body={**pod.body, "status": status}, sim=sim,
                       due_at=_next_due(sim, facts), facts=facts))  # fmt: skip


_POD_FIELDS = tuple(f.name for f in fields(PodFacts))
_POD_POSITION = {name: position for position, name in enumerate(_POD_FIELDS)}
_POD_VALUES = operator.attrgetter(*_POD_FIELDS)


_NEW = object.__new__
# The slots' own setters, in the fields' order: a frozen dataclass's ``__init__`` sets each
# of PodFacts' 17 fields through an ``object.__setattr__`` call, about twice the cost (every
# pod bound, started, ended or failed gets new facts).
(_SET_NAMESPACE, _SET_NAME, _SET_UID, _SET_SCHEDULER_NAME, _SET_NODE_NAME, _SET_PHASE,
 _SET_LABELS, _SET_ANNOTATIONS, _SET_REQUESTS, _SET_NODE_SELECTOR, _SET_AFFINITY,
 _SET_TOLERATIONS, _SET_OWNER_KIND, _SET_OWNER_NAME, _SET_DELETING, _SET_CREATED_AT,
 _SET_STARTED_AT) = (getattr(PodFacts, name).__set__ for name in _POD_FIELDS)  # fmt: skip


def _pod_with(facts: PodFacts, **changes: Any) -> PodFacts:
    """Facts with some fields changed (``dataclasses.replace``, without its cost; held equal
    to it by ``test_simulated_cluster.py::test_pod_with_is_dataclasses_replace``)."""
    values = list(_POD_VALUES(facts))
    for name, value in changes.items():
        values[_POD_POSITION[name]] = value
    (namespace, name, uid, scheduler_name, node_name, phase, labels, annotations, requests,
     node_selector, affinity, tolerations, owner_kind, owner_name, deleting, created_at,
     started_at) = values  # fmt: skip
    pod: PodFacts = _NEW(PodFacts)
    _SET_NAMESPACE(pod, namespace)
    _SET_NAME(pod, name)
    _SET_UID(pod, uid)
    _SET_SCHEDULER_NAME(pod, scheduler_name)
    _SET_NODE_NAME(pod, node_name)
    _SET_PHASE(pod, phase)
    _SET_LABELS(pod, labels)
    _SET_ANNOTATIONS(pod, annotations)
    _SET_REQUESTS(pod, requests)
    _SET_NODE_SELECTOR(pod, node_selector)
    _SET_AFFINITY(pod, affinity)
    _SET_TOLERATIONS(pod, tolerations)
    _SET_OWNER_KIND(pod, owner_kind)
    _SET_OWNER_NAME(pod, owner_name)
    _SET_DELETING(pod, deleting)
    _SET_CREATED_AT(pod, created_at)
    _SET_STARTED_AT(pod, started_at)
    return pod


@dataclass(slots=True)
class _DeviceSlots:
    """A node's device slots as the kubelet's admission counts them: per device resource,
    how many (``capacity``) and how many to a physical GPU (``per_gpu``, filled as asked
    for); the GPUs marked unhealthy. Fixed while a transaction binds pods (``bind_many``)."""

    capacity: dict[str, int]
    unhealthy: set[int]
    per_gpu: dict[str, int] = field(default_factory=dict)


@dataclass(slots=True)
class _NodeLoad:
    """What the live pods bound to a node take there, as the kubelet's admission counts it:
    CPU, memory, the pods (``members``, by store key) and the device slots held; and the
    node's device slots (``slots``, once the first admission there has read them)."""

    cpu_milli: int = 0
    memory_mib: int = 0
    members: set[ObjectKey] = field(default_factory=set)
    held: dict[str, set[int]] = field(default_factory=dict)
    slots: _DeviceSlots | None = None

    def add(
        self, key: ObjectKey, requests: ResourceAmounts, devices: Mapping[str, Iterable[int]]
    ) -> None:
        """Count one more pod."""
        self.cpu_milli += requests.cpu_milli
        self.memory_mib += requests.memory_mib
        self.members.add(key)
        for resource, slots in devices.items():
            self.held.setdefault(resource, set()).update(slots)


def _node_load(tx: StoreTransaction, node: str, leave_out: ObjectKey | None = None) -> _NodeLoad:
    """What the node's live pods (but ``leave_out``) take, from the store."""
    load = _NodeLoad()
    for other in tx.select("Pod", node=node):
        key = other.key
        if key == leave_out:
            continue
        facts = _pod(other)
        if facts.phase not in TERMINAL_PHASES:
            load.add(key, facts.requests, other.sim.get("devices", {}))
    return load


def _load_of(
    tx: StoreTransaction, node: str, pod: ObjectKey, loads: dict[str, _NodeLoad] | None
) -> _NodeLoad:
    """What the node's other live pods take: kept in ``loads`` through a transaction (read
    from the store the first time), else read now."""
    if loads is None:
        return _node_load(tx, node, pod)
    load = loads.get(node)
    if load is None:
        load = loads[node] = _node_load(tx, node)
    if pod in load.members:  # counted already (bound there before): leave it out
        return _node_load(tx, node, pod)
    return load


def _took(
    loads: dict[str, _NodeLoad],
    node: str,
    pod: ObjectKey,
    requests: ResourceAmounts,
    devices: Mapping[str, Iterable[int]] | tuple[str, str],
) -> None:
    """A pod bound to the node, admitted with ``devices`` (or rejected: the kubelet's
    reason), into the node's kept load: counted while it lives. A pod counted already
    drops the load, read again from the store when next needed."""
    load = loads.get(node)
    if load is None:
        return  # not read yet: the store has the pod when it is
    if pod in load.members:
        del loads[node]
    elif not isinstance(devices, tuple):
        load.add(pod, requests, devices)


def _seconds(now: float) -> float:
    """A time as the API shows it (whole seconds), so facts equal a decode of the object."""
    return float(int(now))


def _ready_condition(ready: bool) -> dict[str, str]:
    if ready:
        return {"type": "Ready", "status": "True", "reason": "KubeletReady"}
    return {"type": "Ready", "status": "Unknown", "reason": "NodeStatusUnknown",
            "message": "Kubelet stopped posting node status."}  # fmt: skip


def _deleted(
    obj: StoredObject, now: float, disruption: tuple[str, str] | None = None
) -> StoredObject:
    """A pod as its last watch event shows it when it is deleted: its deletion time set and,
    when it is evicted (``disruption``: the reason and message), the ``DisruptionTarget``
    condition the API server (or the taint manager) adds first; a plain delete adds none."""
    stamp = _format(now)
    metadata = {**obj.body.get("metadata", {}), "deletionTimestamp": stamp}
    body = {**obj.body, "metadata": metadata}
    if disruption is not None:
        reason, message = disruption
        body["status"] = api_objects.disruption_status(
            obj.body.get("status") or {}, reason, message, stamp
        )
    return obj.evolve(body=body, facts=None)


def _suspended(tx: StoreTransaction, job: JobKey) -> bool:
    """Whether the Job was suspended (``SimulatedCluster.suspend_job``)."""
    obj = tx.get("Job", job.namespace, job.name)
    return obj is not None and bool(obj.body.get("spec", {}).get("suspend"))


def _pod(obj: StoredObject) -> PodFacts:
    facts = obj.decoded()
    assert isinstance(facts, PodFacts)
    return facts


def _node(obj: StoredObject) -> NodeFacts:
    facts = obj.decoded()
    assert isinstance(facts, NodeFacts)
    return facts


def _node_sim(tx: StoreTransaction, name: str) -> Mapping[str, Any]:
    node = tx.get("Node", "", name)
    return node.sim if node is not None else {}


def _ref(obj: StoredObject) -> PodRef:
    return PodRef(obj.namespace, obj.name, str(obj.body["metadata"].get("uid", "")))


def pod_ref(pod: NewPod) -> PodRef:
    """The reference of a pod to be created (no uid yet)."""
    return PodRef(pod.namespace, pod.name)


def _next_due(sim: Mapping[str, Any], facts: PodFacts) -> float | None:
    """When a controller next acts on a pod on its own: eviction from a lost node, or the end
    of its run."""
    evict_at = sim.get("evict_at")
    if evict_at is not None:  # a lost node's pod: evicted then, whether it runs or not
        return float(evict_at)
    ends_at = sim.get("ends_at")
    return float(ends_at) if ends_at is not None and facts.phase == "Running" else None


def _holds_gpu(pod: StoredObject, node: NodeFacts, index: int) -> bool:
    """Whether a live pod holds a device slot of physical GPU ``index``."""
    if _pod(pod).phase in TERMINAL_PHASES:
        return False
    return any(
        slot // _slots_per_gpu(node, resource) == index
        for resource, slots in pod.sim.get("devices", {}).items()
        for slot in slots
    )


def _selects(budget: StoredObject, labels: Mapping[str, str]) -> bool:
    wanted = budget.body["spec"]["selector"].get("matchLabels") or {}
    return all(labels.get(key) == value for key, value in wanted.items())


# --- the backend ----------------------------------------------------------------------------


@dataclass(slots=True)
class _Sent:
    sent_at: float


class SimulatedBackend:
    """``ClusterBackend`` over a ``SimulatedCluster``: the loop's view of it, with deltas.

    Like the Kubernetes backend it keeps a cache of facts (nodes, our pods, other schedulers'
    usage per node) and answers ``sync()`` with the net changes since the last one; it reads
    the store's changes since the revision it last saw, or re-lists when it fell behind the
    store's compaction (``delta.relisted``). Events repeated within ``event_refresh_s`` cost
    nothing, as on Kubernetes.
    """

    concurrent_apply = False  # the cluster's store is one thread's (and the demo's database)

    def __init__(
        self,
        cluster: SimulatedCluster,
        *,
        scheduler_name: str = SCHEDULER_NAME,
        event_refresh_s: float = 600.0,
    ) -> None:
        self.cluster = cluster
        self._scheduler_name = scheduler_name
        self._event_refresh_s = event_refresh_s
        self._nodes: Store[str, NodeFacts] = Store()
        self._pods: Store[PodKey, PodFacts] = Store()
        self._foreign: Store[PodKey, tuple[str, ResourceAmounts]] = Store()
        self._usage: dict[str, ResourceAmounts] = {}
        self._seen = 0  # the store revision the cache reflects
        # Deleted pods' last states since the last sync (their tombstones): the ``before`` of
        # their removal, as the Kubernetes backend gives it from the DELETED event.
        self._last_states: dict[PodKey, PodFacts] = {}
        self._revision = 0
        self._sent: dict[PodKey, dict[str, _Sent]] = {}
        self._closed = False

    def _check_open(self) -> None:
        if self._closed:
            raise ClusterUnavailable("the backend is closed")

    def sync(self) -> ClusterView:
        """Let the cluster catch up with its clock, then apply its changes to the cache."""
        self._check_open()
        try:
            self.cluster.advance()
            changes = self.cluster.store.changes_since(self._seen)
        except ClusterUnavailable:
            raise
        except Exception as exc:  # the store's storage failed (a database error)
            raise ClusterUnavailable(f"the simulated cluster's store failed: {exc}") from exc
        self._seen = changes.revision
        if changes.relist:
            nodes: dict[str, NodeFacts] = {}
            pods: dict[PodKey, PodFacts] = {}
            foreign: dict[PodKey, tuple[str, ResourceAmounts]] = {}
            ours = self._scheduler_name
            for obj in changes.objects:  # ``_sort``, inlined: a re-list is every object
                kind = obj.kind
                if kind == "Pod":
                    facts = cast(PodFacts, obj.decoded())
                    if facts.scheduler_name == ours:
                        pods[PodKey(facts.namespace, facts.name)] = facts
                    elif (usage := _usage_of(facts)) is not None:
                        foreign[facts.key] = usage
                elif kind == "Node":
                    nodes[obj.name] = cast(NodeFacts, obj.decoded())
            self._nodes.apply(Replace(nodes))
            self._pods.apply(Replace(pods))
            self._foreign.apply(Replace(foreign))
        else:
            for obj in changes.objects:
                self._apply(obj)
        foreign_changes = self._foreign.take_changes()
        last_states, self._last_states = self._last_states, {}
        delta = ClusterDelta(
            nodes=self._nodes.take_changes(),
            pods=api_objects.with_last_states(self._pods.take_changes(), last_states),
            foreign_usage=apply_usage_changes(self._usage, foreign_changes),
            relisted=changes.relist,
        )
        if not delta.empty:
            self._revision += 1
        for key, change in delta.pods.items():
            if change.after is None:
                self._sent.pop(key, None)
        return ClusterView(
            revision=self._revision,
            nodes=MappingProxyType(self._nodes.items),
            pods=MappingProxyType(self._pods.items),
            foreign_usage=MappingProxyType(self._usage),
            delta=delta,
            stale=False,
            synced_at=self.cluster.clock.now(),
        )

    def _apply(self, obj: StoredObject) -> None:
        """Apply one changed object (or tombstone) to the cache."""
        if obj.kind == "Node":
            if obj.deleted:
                self._nodes.apply(Delete(obj.name))
            else:
                self._nodes.apply(Upsert(obj.name, _node(obj)))
        elif obj.kind == "Pod":
            key = PodKey(obj.namespace, obj.name)
            facts = None if obj.deleted else _pod(obj)
            if obj.deleted and obj.body:  # its last state: evicted, or merely deleted
                last = api_objects.pod_facts(obj.body)
                if last.scheduler_name == self._scheduler_name:
                    self._last_states[key] = last
            ours = facts is not None and facts.scheduler_name == self._scheduler_name
            usage = _usage_of(facts) if facts is not None and not ours else None
            self._pods.apply(Upsert(key, facts) if ours and facts else Delete(key))
            self._foreign.apply(Upsert(key, usage) if usage is not None else Delete(key))

    def bind(self, gang: Sequence[PodBinding]) -> BindOutcome:
        """Bind every member of a gang, or none (see ``SimulatedCluster.bind``)."""
        self._check_open()
        try:
            return self.cluster.bind(gang)
        except Exception as exc:
            first = gang[0].pod if gang else None
            return BindOutcome(failed=first, error=f"the simulated cluster failed: {exc}")

    def bind_many(self, gangs: Mapping[str, Sequence[PodBinding]]) -> dict[str, BindOutcome]:
        """Bind gangs one after another, in one transaction of the store (see
        ``SimulatedCluster.bind_many``; the store is not shared between threads). Should the
        store fail there, each gang is bound again in a transaction of its own, so one
        gang's failure is that gang's only (gangs bound already count as done)."""
        self._check_open()
        try:
            return self.cluster.bind_many(gangs)
        except Exception:
            return {key: self.bind(gang) for key, gang in gangs.items()}

    def wait_for_change(self, timeout_s: float) -> bool:
        """Wait ``timeout_s`` of wall-clock time and say False: the simulated cluster moves
        on its own clock, at each ``sync()``, so the loop keeps its period."""
        self._check_open()
        time.sleep(max(timeout_s, 0.0))
        return False

    def arrivals(self) -> Arrivals:
        """None counted: pods appear at ``sync()``, on the simulated clock."""
        return Arrivals()

    def allowance(self) -> Allowance | None:
        """No client limit here."""
        return None

    def evict(self, pods: Sequence[PodRef], reason: str) -> EvictOutcome:
        """Evict one victim set under the disruption budgets (see ``SimulatedCluster.evict``)."""
        self._check_open()
        try:
            return self.cluster.evict(pods, reason)
        except Exception as exc:
            return EvictOutcome(tuple(PodResult(p, "failed", str(exc)) for p in pods))

    def set_node_unschedulable(self, node: str, unschedulable: bool) -> NodeCordonResult:
        """gpupool's cordon of the node (see ``SimulatedCluster.set_unschedulable``)."""
        self._check_open()
        try:
            return self.cluster.set_unschedulable(node, unschedulable)
        except Exception as exc:
            return NodeCordonResult(node, "failed", str(exc))

    def create_pods(self, pods: Sequence[NewPod]) -> PodsOutcome:
        """Create pods submitted through gpupool, labelled managed-by gpupool."""
        self._check_open()
        results = []
        for pod in pods:
            try:
                results.append(self.cluster.create_pod(pod))
            except Exception as exc:
                results.append(PodResult(pod_ref(pod), "failed", str(exc)))
        return PodsOutcome(tuple(results))

    def delete_pods(self, pods: Sequence[PodRef], reason: str) -> PodsOutcome:
        """Delete pods; one already gone counts as deleted (``gone``)."""
        self._check_open()
        try:
            return self.cluster.delete_pods(pods, reason)
        except Exception as exc:
            return PodsOutcome(tuple(PodResult(p, "failed", str(exc)) for p in pods))

    def suspend_job(self, job: JobKey) -> JobSuspendResult:
        """Suspend the Job: its pods that have not ended are deleted, and none made again
        (see ``SimulatedCluster.suspend_job``)."""
        self._check_open()
        try:
            return self.cluster.suspend_job(job)
        except Exception as exc:
            return JobSuspendResult(job, "failed", str(exc))

    def record_event(
        self, pod: PodRef, reason: str, message: str, event_type: EventType = "Normal"
    ) -> EventOutcome:
        """An Event on the pod; the same again within ``event_refresh_s`` costs nothing."""
        self._check_open()
        message = message[: api_objects.EVENT_MESSAGE_LIMIT]
        name = api_objects.event_name(pod, reason, event_type, message)
        now = self.cluster.clock.now()
        sent = self._sent.get(pod.key, {}).get(name)
        if sent is not None and now - sent.sent_at < self._event_refresh_s:
            return "unchanged"
        try:
            outcome = self.cluster.record_event(pod, reason, message, event_type)
        except Exception:
            return "failed"
        self._sent.setdefault(pod.key, {})[name] = _Sent(now)
        return outcome

    def record_events(self, events: Sequence[EventRequest]) -> list[EventOutcome]:
        """Each Event in turn (the simulated cluster answers at once)."""
        return [self.record_event(e.pod, e.reason, e.message, e.event_type) for e in events]

    def now(self) -> float:
        """The cluster's clock."""
        return self.cluster.clock.now()

    def close(self) -> None:
        """Nothing runs in the background; later calls raise ``ClusterUnavailable``."""
        self._closed = True


def _usage_of(facts: PodFacts) -> tuple[str, ResourceAmounts] | None:
    """Node and requests of another scheduler's pod that holds capacity (bound, not ended)."""
    if facts.node_name is None or facts.phase in TERMINAL_PHASES:
        return None
    return facts.node_name, facts.requests


def simulated_pool(
    manifests: Iterable[Mapping[str, Any]], clock: Clock, store: SimulatedStore | None = None
) -> SimulatedBackend:
    """A backend over a fresh simulated cluster with these nodes (in memory by default)."""
    cluster = SimulatedCluster(store if store is not None else MemoryStore(), clock)
    cluster.add_nodes(manifests)
    return SimulatedBackend(cluster)
