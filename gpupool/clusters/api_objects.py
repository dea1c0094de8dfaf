"""Kubernetes API objects (the JSON the API server sends) turned into plain facts; no I/O.

The objects come from the API server, which has validated them, so a field of the wrong type
here means a broken server or proxy, not a user mistake: it raises ``ValueError`` and the
caller (the informer) logs it and skips that object. What pods *say* to gpupool (the
``gpupool.io/*`` labels and annotations) is only copied here; ``grouping`` judges it.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from collections.abc import Mapping
from dataclasses import asdict, replace
from fractions import Fraction
from types import MappingProxyType
from typing import Any

from gpupool.clusters import quantities
from gpupool.clusters.base import (
    GPU_RESOURCE,
    MANAGED_BY_LABEL,
    MIG_RESOURCE_PREFIX,
    SCHEDULER_NAME,
    TERMINAL_PHASES,
    WORKLOAD_LABEL,
    Change,
    JobFacts,
    JobKey,
    JobState,
    NewPod,
    NodeFacts,
    NodeSelectorTerm,
    PodFacts,
    PodKey,
    PodRef,
    ResourceAmounts,
    SelectorRequirement,
    Taint,
    Toleration,
)

GPUPOOL_ANNOTATION_PREFIX = "gpupool.io/"
DEFAULT_SCHEDULER = "default-scheduler"
EVENT_MESSAGE_LIMIT = 1024  # what events.k8s.io allows; core/v1 Events are cut the same
# Not an annotation anyone sets: ``pod_facts`` puts under this key of ``PodFacts.annotations``
# the reason of the pod's ``DisruptionTarget`` condition (status True), which Kubernetes sets
# before it deletes a pod it evicts: the Eviction API (``EvictionByEvictionAPI``: a drain, a
# manual eviction, gpupool's own), the taint manager (``DeletionByTaintManager``: a lost
# node), the scheduler's preemption, the pod garbage collector, the kubelet. A plain delete
# (``kubectl delete pod``, a Job's cleanup) sets none. One set on the object is dropped.
DISRUPTED_BY = "gpupool.io/disrupted-by"
DISRUPTION_CONDITION = "DisruptionTarget"

JsonObject = Mapping[str, Any]


def _object(value: Any, what: str) -> JsonObject:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ValueError(f"{what} is not an object")
    return value


def _list(value: Any, what: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise ValueError(f"{what} is not a list")
    return value


def _strings(value: Any, what: str) -> dict[str, str]:
    mapping = _object(value, what)
    return {str(key): str(item) for key, item in mapping.items()}


def parse_time(value: Any) -> float | None:
    """An RFC 3339 time from the API ("2026-01-01T10:00:00Z") in POSIX seconds, or None."""
    if not value:
        return None
    parsed = dt.datetime.fromisoformat(str(value))
    if parsed.tzinfo is None:
        raise ValueError(f"time {value!r} has no offset")
    return parsed.timestamp()


def format_time(posix: float) -> str:
    """POSIX seconds as the API's RFC 3339 form, in UTC with a Z."""
    moment = dt.datetime.fromtimestamp(posix, tz=dt.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


# --- resources ------------------------------------------------------------------------------

ResourceList = dict[str, Fraction]


def _resource_list(value: Any, what: str) -> ResourceList:
    return {
        str(name): quantities.parse_quantity(str(amount))
        for name, amount in _object(value, what).items()
    }


def _add(into: ResourceList, other: ResourceList) -> None:
    for name, amount in other.items():
        into[name] = into.get(name, Fraction(0)) + amount


def _max(into: ResourceList, other: ResourceList) -> None:
    for name, amount in other.items():
        if amount > into.get(name, Fraction(0)):
            into[name] = amount


def pod_resource_requests(spec: JsonObject) -> ResourceList:
    """What a pod asks for, exactly as kube-scheduler adds it up.

    The rule of ``k8s.io/component-helpers/resource.PodRequests``: the sum of the regular
    containers and of the restartable init containers (sidecars, ``restartPolicy: Always``),
    or, if larger per resource, what any ordinary init container needs beside the sidecars
    started before it; pod-level ``resources.requests`` (cpu, memory) replace the containers'
    sum; ``overhead`` (RuntimeClass) comes on top.
    """
    requests: ResourceList = {}
    for container in _list(spec.get("containers"), "spec.containers"):
        resources = _object(_object(container, "container").get("resources"), "resources")
        _add(requests, _resource_list(resources.get("requests"), "resources.requests"))
    sidecars: ResourceList = {}
    init_peak: ResourceList = {}
    for container in _list(spec.get("initContainers"), "spec.initContainers"):
        container = _object(container, "init container")
        resources = _object(container.get("resources"), "resources")
        asked = _resource_list(resources.get("requests"), "resources.requests")
        if container.get("restartPolicy") == "Always":
            _add(requests, asked)
            _add(sidecars, asked)
            _max(init_peak, sidecars)
        else:
            during = dict(asked)
            _add(during, sidecars)
            _max(init_peak, during)
    _max(requests, init_peak)
    pod_level = _object(spec.get("resources"), "spec.resources")
    for name, amount in _resource_list(pod_level.get("requests"), "spec.resources").items():
        if name in ("cpu", "memory") or name.startswith("hugepages-"):
            requests[name] = amount
    _add(requests, _resource_list(spec.get("overhead"), "spec.overhead"))
    return requests


# A pod's requests as ``pod_facts`` gives them, by what they are made of (``_requests_key``):
# the pods of a pod set ask alike, and the exact arithmetic (fractions) cost more than the
# rest of a pod's facts. Cleared whole when full.
_REQUESTS: dict[tuple[Any, ...], ResourceAmounts] = {}
_REQUESTS_HELD = 4096


def _mapping_items(value: Any) -> tuple[Any, ...] | None:
    """A resource list's items as a key (with their types: ``1`` and ``True`` are equal keys
    but not equal quantities), or None when it is not a plain object (or null)."""
    if value is None:
        return ()
    if not isinstance(value, Mapping):
        return None
    return tuple((type(name), name, type(amount), amount) for name, amount in value.items())


def _requests_key(spec: JsonObject) -> tuple[Any, ...] | None:
    """What ``pod_resource_requests`` reads of a pod's spec, as a hashable key; None when
    any of it is not of the plain shape (then the requests are worked out, and checked, as
    always)."""
    parts: list[Any] = []
    for field in ("containers", "initContainers"):
        containers = spec.get(field)
        if containers is None:
            continue
        if not isinstance(containers, list):
            return None
        for container in containers:
            if not isinstance(container, Mapping):
                return None
            resources = container.get("resources")
            if resources is not None and not isinstance(resources, Mapping):
                return None
            asked = _mapping_items(None if resources is None else resources.get("requests"))
            if asked is None:
                return None
            parts.append((field, container.get("restartPolicy"), asked))
    pod_level = spec.get("resources")
    if pod_level is not None and not isinstance(pod_level, Mapping):
        return None
    for items in (
        _mapping_items(None if pod_level is None else pod_level.get("requests")),
        _mapping_items(spec.get("overhead")),
    ):
        if items is None:
            return None
        parts.append(items)
    key = tuple(parts)
    try:
        hash(key)
    except TypeError:
        return None
    return key


def pod_requests(spec: JsonObject) -> ResourceAmounts:
    """``resource_amounts(pod_resource_requests(spec), round_up=True)``, remembered for
    specs that ask alike (``_requests_key``)."""
    key = _requests_key(spec)
    if key is None:
        return resource_amounts(pod_resource_requests(spec), round_up=True)
    amounts = _REQUESTS.get(key)
    if amounts is None:
        amounts = resource_amounts(pod_resource_requests(spec), round_up=True)
        if len(_REQUESTS) >= _REQUESTS_HELD:
            _REQUESTS.clear()
        _REQUESTS[key] = amounts
    return amounts


def resource_amounts(resources: ResourceList, *, round_up: bool) -> ResourceAmounts:
    """CPU, memory, ``nvidia.com/gpu`` and ``nvidia.com/mig-*`` of a resource list."""

    def rounded(amount: Fraction, scale: Fraction = Fraction(1)) -> int:
        value = amount * scale
        return -((-value.numerator) // value.denominator) if round_up else int(value // 1)

    mig = {
        name.removeprefix(MIG_RESOURCE_PREFIX): rounded(amount)
        for name, amount in sorted(resources.items())
        if name.startswith(MIG_RESOURCE_PREFIX) and amount > 0
    }
    return ResourceAmounts(
        cpu_milli=rounded(resources.get("cpu", Fraction(0)), Fraction(1000)),
        memory_mib=rounded(resources.get("memory", Fraction(0)), Fraction(1, quantities.MIB)),
        gpus=rounded(resources.get(GPU_RESOURCE, Fraction(0))),
        mig=MappingProxyType(mig),
    )


# --- scheduling constraints -----------------------------------------------------------------


def taints(values: Any) -> tuple[Taint, ...]:
    """A node's ``spec.taints``."""
    result = []
    for item in _list(values, "spec.taints"):
        item = _object(item, "taint")
        result.append(
            Taint(str(item.get("key", "")), str(item.get("value") or ""), str(item["effect"]))
        )
    return tuple(result)


def tolerations(values: Any) -> tuple[Toleration, ...]:
    """A pod's ``spec.tolerations`` (an empty operator means Equal, as the API defaults it)."""
    result = []
    for item in _list(values, "spec.tolerations"):
        item = _object(item, "toleration")
        result.append(
            Toleration(
                key=str(item.get("key") or ""),
                operator=str(item.get("operator") or "Equal"),
                value=str(item.get("value") or ""),
                effect=str(item.get("effect") or ""),
            )
        )
    return tuple(result)


def _requirements(values: Any, what: str) -> tuple[SelectorRequirement, ...]:
    return tuple(
        SelectorRequirement(
            key=str(_object(item, what).get("key", "")),
            operator=str(item.get("operator", "")),
            values=tuple(str(v) for v in _list(item.get("values"), f"{what}.values")),
        )
        for item in _list(values, what)
    )


def required_node_affinity(affinity: Any) -> tuple[NodeSelectorTerm, ...] | None:
    """The terms of ``requiredDuringSchedulingIgnoredDuringExecution``, or None if unset."""
    node_affinity = _object(_object(affinity, "affinity").get("nodeAffinity"), "nodeAffinity")
    required = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
    if required is None:
        return None
    terms = _list(_object(required, "required").get("nodeSelectorTerms"), "nodeSelectorTerms")
    return tuple(
        NodeSelectorTerm(
            match_expressions=_requirements(
                _object(term, "term").get("matchExpressions"), "matchExpressions"
            ),
            match_fields=_requirements(term.get("matchFields"), "matchFields"),
        )
        for term in terms
    )


# --- objects --------------------------------------------------------------------------------


def _metadata(obj: JsonObject) -> JsonObject:
    metadata = _object(obj.get("metadata"), "metadata")
    if not metadata.get("name"):
        raise ValueError("object without metadata.name")
    return metadata


def node_facts(obj: JsonObject) -> NodeFacts:
    """A Node object as ``NodeFacts``."""
    metadata = _metadata(obj)
    spec = _object(obj.get("spec"), "spec")
    status = _object(obj.get("status"), "status")
    conditions = _list(status.get("conditions"), "status.conditions")
    ready = any(
        _object(c, "condition").get("type") == "Ready" and c.get("status") == "True"
        for c in conditions
    )
    allocatable = _resource_list(status.get("allocatable"), "status.allocatable")
    capacity = _resource_list(status.get("capacity"), "status.capacity")
    return NodeFacts(
        name=str(metadata["name"]),
        uid=str(metadata.get("uid", "")),
        labels=MappingProxyType(_strings(metadata.get("labels"), "labels")),
        taints=taints(spec.get("taints")),
        allocatable=resource_amounts(allocatable, round_up=False),
        capacity=resource_amounts(capacity, round_up=False),
        max_pods=int(allocatable.get("pods", Fraction(0))),
        ready=ready,
        unschedulable=bool(spec.get("unschedulable", False)),
        deleting=bool(metadata.get("deletionTimestamp")),
        created_at=parse_time(metadata.get("creationTimestamp")) or 0.0,
    )


def _controller(metadata: JsonObject) -> tuple[str | None, str | None]:
    for owner in _list(metadata.get("ownerReferences"), "ownerReferences"):
        owner = _object(owner, "ownerReference")
        if owner.get("controller"):
            return str(owner.get("kind", "")), str(owner.get("name", ""))
    return None, None


def scheduler_name(obj: JsonObject) -> str:
    """The pod's ``spec.schedulerName`` (the API defaults it to default-scheduler)."""
    spec = _object(obj.get("spec"), "spec")
    return str(spec.get("schedulerName") or DEFAULT_SCHEDULER)


def pod_key_of(obj: JsonObject) -> tuple[str, str]:
    """A pod object's namespace and name."""
    metadata = _metadata(obj)
    return str(metadata.get("namespace", "")), str(metadata["name"])


def pod_facts(obj: JsonObject) -> PodFacts:
    """A Pod object as ``PodFacts``; of its annotations only the gpupool.io/* ones are kept."""
    metadata = _metadata(obj)
    spec = _object(obj.get("spec"), "spec")
    status = _object(obj.get("status"), "status")
    annotations = {
        key: value
        for key, value in _strings(metadata.get("annotations"), "annotations").items()
        if key.startswith(GPUPOOL_ANNOTATION_PREFIX) and key != DISRUPTED_BY
    }
    disruption = disruption_reason(status)
    if disruption is not None:
        annotations[DISRUPTED_BY] = disruption
    owner_kind, owner_name = _controller(metadata)
    return PodFacts(
        namespace=str(metadata.get("namespace", "")),
        name=str(metadata["name"]),
        uid=str(metadata.get("uid", "")),
        scheduler_name=scheduler_name(obj),
        node_name=str(spec["nodeName"]) if spec.get("nodeName") else None,
        phase=str(status.get("phase") or "Pending"),
        labels=MappingProxyType(_strings(metadata.get("labels"), "labels")),
        annotations=MappingProxyType(annotations),
        requests=pod_requests(spec),
        node_selector=MappingProxyType(_strings(spec.get("nodeSelector"), "nodeSelector")),
        required_node_affinity=required_node_affinity(spec.get("affinity")),
        tolerations=tolerations(spec.get("tolerations")),
        owner_kind=owner_kind,
        owner_name=owner_name,
        deleting=bool(metadata.get("deletionTimestamp")),
        created_at=parse_time(metadata.get("creationTimestamp")) or 0.0,
        started_at=parse_time(status.get("startTime")),
    )


def disruption_reason(status: JsonObject) -> str | None:
    """The reason of a pod status's ``DisruptionTarget`` condition when it is True ("" when
    it gives none), else None: the pod is being evicted, not merely deleted."""
    for item in _list(status.get("conditions"), "status.conditions"):
        condition = _object(item, "status.conditions[]")
        if condition.get("type") == DISRUPTION_CONDITION and str(condition.get("status")) == "True":
            return str(condition.get("reason") or "")
    return None


def disruption_status(status: JsonObject, reason: str, message: str, at: str) -> dict[str, Any]:
    """A pod status with the ``DisruptionTarget`` condition the API server adds before it
    deletes a pod it evicts (the simulated cluster writes it as Kubernetes does)."""
    conditions = [
        c
        for c in _list(status.get("conditions"), "status.conditions")
        if _object(c, "status.conditions[]").get("type") != DISRUPTION_CONDITION
    ]
    conditions.append(
        {
            "type": DISRUPTION_CONDITION,
            "status": "True",
            "reason": reason,
            "message": message,
            "lastTransitionTime": at,
        }
    )
    return {**status, "conditions": conditions}


def with_last_states(
    changes: Mapping[PodKey, Change[PodFacts]], last: Mapping[PodKey, PodFacts]
) -> dict[PodKey, Change[PodFacts]]:
    """A sync's pod changes, each removed pod's ``before`` its last state where the backend
    saw it (``last``: the object of the watch's DELETED event, a store's tombstone): whether
    it was evicted (``DISRUPTED_BY``) or ended is known only there; such a ``before`` is
    ``deleting``. The same pod only (its uid) and the same workload label (the mirror finds
    the pod by it)."""
    out = dict(changes)
    for key, change in changes.items():
        final = last.get(key)
        before = change.before
        if (
            change.after is None
            and final is not None
            and before is not None
            and final.uid == before.uid
            and final.labels.get(WORKLOAD_LABEL) == before.labels.get(WORKLOAD_LABEL)
        ):
            # Deleted, whatever its last object says (a forced delete may set no deletion
            # time): ``deleting`` tells a last state from a ``before`` of an earlier sync.
            out[key] = Change(final if final.deleting else replace(final, deleting=True), None)
    return out


# A Job's conditions, in the order they decide its verdict: the controller sets FailureTarget
# or SuccessCriteriaMet as soon as it has decided (then ends the pods still running) and
# Failed or Complete once they are gone; either says the Job makes no more pods.
_JOB_VERDICTS: tuple[tuple[str, JobState], ...] = (
    ("Failed", "failed"),
    ("FailureTarget", "failed"),
    ("Complete", "complete"),
    ("SuccessCriteriaMet", "complete"),
)


def job_key_of(obj: JsonObject) -> JobKey:
    """A Job object's namespace and name."""
    metadata = _metadata(obj)
    return JobKey(str(metadata.get("namespace", "")), str(metadata["name"]))


def job_facts(obj: JsonObject, scheduler: str = SCHEDULER_NAME) -> JobFacts | None:
    """A batch/v1 Job as ``JobFacts``, or None when its pods do not ask for ``scheduler``
    (the template's ``schedulerName``): such a Job is none of gpupool's business."""
    metadata = _metadata(obj)
    spec = _object(obj.get("spec"), "spec")
    template = _object(spec.get("template"), "spec.template")
    if scheduler_name(template) != scheduler:
        return None
    status = _object(obj.get("status"), "status")
    conditions: dict[str, JsonObject] = {}
    for item in _list(status.get("conditions"), "status.conditions"):
        condition = _object(item, "status.conditions[]")
        if str(condition.get("status")) == "True":
            conditions.setdefault(str(condition.get("type", "")), condition)
    state: JobState = "active"
    reason = message = ""
    for kind, verdict in _JOB_VERDICTS:
        found = conditions.get(kind)
        if found is not None:
            state = verdict
            reason, message = str(found.get("reason") or ""), str(found.get("message") or "")
            break
    uncounted = _object(status.get("uncountedTerminatedPods"), "status.uncountedTerminatedPods")
    template_meta = _object(template.get("metadata"), "spec.template.metadata")
    template_labels = _strings(template_meta.get("labels"), "spec.template.metadata.labels")
    return JobFacts(
        namespace=str(metadata.get("namespace", "")),
        name=str(metadata["name"]),
        uid=str(metadata.get("uid", "")),
        state=state,
        reason=reason,
        message=message,
        active=int(status.get("active") or 0),
        succeeded=int(status.get("succeeded") or 0)
        + len(_list(uncounted.get("succeeded"), "uncountedTerminatedPods.succeeded")),
        failed=int(status.get("failed") or 0)
        + len(_list(uncounted.get("failed"), "uncountedTerminatedPods.failed")),
        workload=template_labels.get(WORKLOAD_LABEL, ""),
    )


def foreign_pod_usage(obj: JsonObject) -> tuple[str, ResourceAmounts] | None:
    """The node and requests of another scheduler's pod that holds capacity, else None.

    A pod holds capacity on its node from binding until it ends (Succeeded or Failed), also
    while it is being deleted (its containers still run through the grace period).
    """
    spec = _object(obj.get("spec"), "spec")
    status = _object(obj.get("status"), "status")
    node = spec.get("nodeName")
    if not node or status.get("phase") in TERMINAL_PHASES:
        return None
    return str(node), resource_amounts(pod_resource_requests(spec), round_up=True)


# --- objects gpupool writes -----------------------------------------------------------------


def pod_manifest(pod: NewPod) -> dict[str, Any]:
    """The Pod object ``create_pods`` sends for a pod submitted through gpupool.

    ``schedulerName: gpupool``, ``restartPolicy: Never``, one container ``main``, and the
    ``app.kubernetes.io/managed-by: gpupool`` label that says gpupool recreates it.
    """
    resources: dict[str, dict[str, str]] = {"requests": {}, "limits": {}}
    if pod.cpu_milli:
        resources["requests"]["cpu"] = f"{pod.cpu_milli}m"
    if pod.memory_mib:
        resources["requests"]["memory"] = f"{pod.memory_mib}Mi"
    if pod.gpus:  # extended resources: requests and limits must be equal
        resources["requests"][pod.gpu_resource] = str(pod.gpus)
        resources["limits"][pod.gpu_resource] = str(pod.gpus)
    container: dict[str, Any] = {"name": "main", "image": pod.image, "resources": resources}
    if pod.command:
        container["command"] = list(pod.command)
    if pod.env:
        container["env"] = [{"name": name, "value": value} for name, value in pod.env.items()]
    spec: dict[str, Any] = {
        "schedulerName": SCHEDULER_NAME,
        "restartPolicy": "Never",
        "containers": [container],
    }
    if pod.node_selector:
        spec["nodeSelector"] = dict(pod.node_selector)
    if pod.tolerations:
        spec["tolerations"] = [
            {key: value for key, value in asdict(t).items() if value} for t in pod.tolerations
        ]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": pod.name,
            "namespace": pod.namespace,
            "labels": {**pod.labels, MANAGED_BY_LABEL: SCHEDULER_NAME},
            "annotations": dict(pod.annotations),
        },
        "spec": spec,
    }


def event_name(pod: PodRef, reason: str, event_type: str, message: str) -> str:
    """A stable Event name for one statement about one pod: ``<pod>.<digest>``.

    The same statement about the same pod (uid included) is always the same Event, so a
    restarted process finds it again instead of adding a second one.
    """
    digest = hashlib.sha256("\0".join((pod.uid, reason, event_type, message)).encode())
    base = pod.name[:200].rstrip("-.")
    return f"{base}.{digest.hexdigest()[:16]}"
