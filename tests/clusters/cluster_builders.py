"""Builders for API-shaped pods and nodes, read like sentences: ``pod("a-0", gpus=8)``.

They write the JSON the API server sends, and the facts come from ``api_objects``, so every
pure test also goes through the same decoding the informers use.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from gpupool.clusters.api_objects import node_facts, pod_facts
from gpupool.clusters.base import NodeFacts, PodFacts

NOW = 1_795_946_400.0  # 2026-11-29T10:00:00Z
CREATED = "2026-11-29T09:00:00Z"


def expr(key: str, operator: str, *values: str) -> dict[str, Any]:
    """One matchExpressions / matchFields requirement."""
    requirement: dict[str, Any] = {"key": key, "operator": operator}
    if values:
        requirement["values"] = list(values)
    return requirement


def term(*expressions: dict[str, Any], fields: Sequence[dict[str, Any]] = ()) -> dict[str, Any]:
    """One nodeSelectorTerm."""
    result: dict[str, Any] = {}
    if expressions:
        result["matchExpressions"] = list(expressions)
    if fields:
        result["matchFields"] = list(fields)
    return result


def toleration(
    key: str = "", operator: str = "Equal", value: str = "", effect: str = ""
) -> dict[str, str]:
    """One pod toleration as the API spells it."""
    return {
        k: v
        for k, v in {"key": key, "operator": operator, "value": value, "effect": effect}.items()
        if v
    }


def taint(key: str, value: str = "", effect: str = "NoSchedule") -> dict[str, str]:
    """One node taint."""
    spelled = {"key": key, "effect": effect}
    return {**spelled, "value": value} if value else spelled


def pod_object(
    name: str,
    *,
    namespace: str = "team-a",
    queue: str | None = "train",
    workload: str | None = None,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    gpus: int = 0,
    mig: Mapping[str, int] | None = None,
    cpu: str = "1",
    memory: str = "1Gi",
    node: str | None = None,
    phase: str = "Pending",
    scheduler: str = "gpupool",
    node_selector: Mapping[str, str] | None = None,
    terms: Sequence[dict[str, Any]] | None = None,
    tolerations: Sequence[dict[str, str]] = (),
    owner: tuple[str, str] | None = None,
    created: str = CREATED,
    deleting: bool = False,
    uid: str | None = None,
) -> dict[str, Any]:
    """A Pod object as the API returns it."""
    requests: dict[str, str] = {"cpu": cpu, "memory": memory}
    if gpus:
        requests["nvidia.com/gpu"] = str(gpus)
    for profile, count in (mig or {}).items():
        requests[f"nvidia.com/mig-{profile}"] = str(count)
    all_labels = dict(labels or {})
    if queue is not None:
        all_labels["gpupool.io/queue"] = queue
    if workload is not None:
        all_labels["gpupool.io/workload"] = workload
    metadata: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "uid": uid or f"uid-{namespace}-{name}",
        "labels": all_labels,
        "annotations": dict(annotations or {}),
        "creationTimestamp": created,
    }
    if owner is not None:
        metadata["ownerReferences"] = [
            {"apiVersion": "batch/v1", "kind": owner[0], "name": owner[1], "controller": True}
        ]
    if deleting:
        metadata["deletionTimestamp"] = "2026-11-29T09:59:00Z"
    spec: dict[str, Any] = {
        "schedulerName": scheduler,
        "containers": [{"name": "main", "image": "x", "resources": {"requests": requests}}],
        "tolerations": list(tolerations),
    }
    if node is not None:
        spec["nodeName"] = node
    if node_selector:
        spec["nodeSelector"] = dict(node_selector)
    if terms is not None:
        spec["affinity"] = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}
            }
        }
    return {"metadata": metadata, "spec": spec, "status": {"phase": phase}}


def pod(name: str, **options: Any) -> PodFacts:
    """Facts of a pod built by ``pod_object``."""
    return pod_facts(pod_object(name, **options))


def node_object(
    name: str,
    *,
    gpus: int = 8,
    healthy_gpus: int | None = None,
    mig: Mapping[str, int] | None = None,
    labels: Mapping[str, str] | None = None,
    product: str | None = "NVIDIA-H100-80GB-HBM3",
    cpu: str = "128",
    memory: str = "1Ti",
    taints: Sequence[dict[str, str]] = (),
    ready: bool = True,
    unschedulable: bool = False,
) -> dict[str, Any]:
    """A Node object as the API returns it."""
    all_labels = {"kubernetes.io/hostname": name, **(labels or {})}
    if product is not None:
        all_labels["nvidia.com/gpu.product"] = product
    capacity = {"cpu": cpu, "memory": memory, "pods": "110", "nvidia.com/gpu": str(gpus)}
    for profile, count in (mig or {}).items():
        capacity[f"nvidia.com/mig-{profile}"] = str(count)
    allocatable = dict(capacity)
    if healthy_gpus is not None:
        allocatable["nvidia.com/gpu"] = str(healthy_gpus)
    spec: dict[str, Any] = {"taints": list(taints)}
    if unschedulable:
        spec["unschedulable"] = True
    return {
        "metadata": {"name": name, "uid": f"uid-{name}", "labels": all_labels},
        "spec": spec,
        "status": {
            "capacity": capacity,
            "allocatable": allocatable,
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def node(name: str, **options: Any) -> NodeFacts:
    """Facts of a node built by ``node_object``."""
    return node_facts(node_object(name, **options))
