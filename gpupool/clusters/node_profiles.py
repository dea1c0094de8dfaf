"""GPU node profiles: a short list of node groups expanded into Kubernetes Node objects.

One profile format serves both clusters gpupool runs on: the local plane creates these Nodes
for KWOK (``hack/k8s_plane.py``, profiles in ``hack/k8s-testenv/profiles/``), and the
simulated cluster holds the same Node objects (``simulated.py``, the demo's pool in
``seed-demo``). So a node carries the same labels, capacity and allocatable in both modes,
and a flavor's node labels pick the same nodes in both.

A profile is ``{"nodeGroups": [group, ...]}``. A group's ``kind``:

- ``hgx``: ``count`` nodes named ``<prefix>-<n>``, each its own NVLink domain;
- ``rack``: ``racks`` x ``nodesPerRack`` nodes named ``<prefix>-r<rack>-<nn>``, one
  ``nvidia.com/gpu.clique`` per rack (GPU feature discovery's ``<cluster UUID>.<clique id>``);
- ``shared``: time-sliced GPUs as the NVIDIA device plugin advertises them: allocatable
  ``nvidia.com/gpu`` is ``gpus x replicas`` and the product label gets a ``-SHARED`` suffix;
- ``mig``: MIG on every GPU as the device plugin's ``mixed`` strategy shows it: allocatable
  ``nvidia.com/mig-<profile>`` (instances per GPU x GPUs) and no whole ``nvidia.com/gpu``;
  ``migLayout`` is checked against the MIG tables of ``gpupool.scheduler.mig``.

Other keys: ``gpus`` (per node), ``product``, ``family``, ``gpuMemoryMiB``, ``cpu``,
``memory``, ``pods``, ``arch``, ``zone``, ``labels`` (extra labels), and for MIG
``migModel``, ``migConfig``, ``migLayout``. Serial numbers are as wide as the largest one
(``h100-0`` .. ``h100-9``, ``h100-00`` .. ``h100-39``), the way ``kwokctl scale`` numbers nodes.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from gpupool.scheduler.mig import mig_layout_errors, mig_profile

KWOK_NODE_ANNOTATION = "kwok.x-k8s.io/node"
GROUP_KINDS = ("hgx", "rack", "shared", "mig")
# Profiles gpupool itself runs on (the demo's pool), shipped with the package; the local
# plane's test profiles live in hack/k8s-testenv/profiles/ and it finds these too.
PACKAGED = Path(__file__).resolve().parent / "profiles"


class ProfileError(ValueError):
    """A node profile that cannot be expanded (unknown kind, bad MIG layout, duplicate names)."""


@dataclass(frozen=True)
class NodeRun:
    """Identical nodes made from one template: a profile's group, or one rack of a rack group."""

    name: str  # nodes are named <name>-<serial number>
    replicas: int
    serial_length: int
    group: Mapping[str, Any]
    clique: str | None = None

    def node_name(self, index: int) -> str:
        """The name of node ``index`` of the run (``%s-%0*d``, as kwokctl numbers them)."""
        return f"{self.name}-{index:0{self.serial_length}d}"

    def manifest(self, name: str) -> dict[str, Any]:
        """The Node object of one node of the run, named ``name``."""
        return gpu_node_manifest(name, self.group, clique=self.clique)

    def manifests(self) -> list[dict[str, Any]]:
        """Every Node object of the run."""
        return [self.manifest(self.node_name(index)) for index in range(self.replicas)]


def load_profile(path: Path) -> dict[str, Any]:
    """A profile read from a YAML file."""
    profile = yaml.safe_load(path.read_text())
    if not isinstance(profile, dict) or not isinstance(profile.get("nodeGroups"), list):
        raise ProfileError(f"{path}: a profile needs a `nodeGroups` list")
    return profile


def packaged_profile(name: str) -> dict[str, Any]:
    """A profile shipped with gpupool (``PACKAGED``), by name: ``demo``."""
    return load_profile(PACKAGED / f"{name}.yaml")


def _serial_length(count: int) -> int:
    return len(str(max(count - 1, 0)))


def node_runs(profile: Mapping[str, Any]) -> list[NodeRun]:
    """The runs of a profile: one per group, one per rack of a rack group."""
    runs: list[NodeRun] = []
    for group in profile["nodeGroups"]:
        kind = group.get("kind", "hgx")
        prefix = str(group["prefix"])
        if kind == "rack":
            per_rack = int(group["nodesPerRack"])
            for rack in range(int(group["racks"])):
                # GPU feature discovery writes <NVLink cluster UUID>.<clique id>.
                cluster_uuid = uuid.uuid5(uuid.NAMESPACE_DNS, f"{prefix}-rack{rack}.gpupool.local")
                runs.append(
                    NodeRun(
                        f"{prefix}-r{rack}",
                        per_rack,
                        _serial_length(per_rack),
                        group,
                        clique=f"{cluster_uuid}.1",
                    )
                )
        elif kind in GROUP_KINDS:
            count = int(group["count"])
            runs.append(NodeRun(prefix, count, _serial_length(count), group))
        else:
            raise ProfileError(
                f"node group {prefix!r}: unknown kind {kind!r} ({', '.join(GROUP_KINDS)})"
            )
    names = [m["metadata"]["name"] for run in runs for m in run.manifests()]
    if len(set(names)) != len(names) or len({run.name for run in runs}) != len(runs):
        raise ProfileError("the profile yields duplicate node names")
    return runs


def node_manifests(profile: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Every Node object of a profile, in profile order."""
    return [manifest for run in node_runs(profile) for manifest in run.manifests()]


def gpu_node_manifest(
    name: str, group: Mapping[str, Any], clique: str | None = None
) -> dict[str, Any]:
    """One GPU Node (labels, capacity, allocatable) from a profile's node group."""
    gpus = int(group["gpus"])
    kind = group.get("kind", "hgx")
    labels = {
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": str(group.get("arch", "amd64")),
        "type": "kwok",
        "topology.kubernetes.io/zone": str(group.get("zone", "zone-a")),
        "nvidia.com/gpu.present": "true",
        "nvidia.com/gpu.product": str(group["product"]),
        "nvidia.com/gpu.count": str(gpus),
        "nvidia.com/gpu.memory": str(group.get("gpuMemoryMiB", 81559)),
    }
    if "family" in group:
        labels["nvidia.com/gpu.family"] = str(group["family"])
    if clique is not None:
        labels["nvidia.com/gpu.clique"] = clique
    gpu_resources = {"nvidia.com/gpu": str(gpus)}
    if kind == "shared":
        # Each physical GPU is offered `replicas` times; the product label gets -SHARED.
        replicas = int(group.get("replicas", 4))
        gpu_resources["nvidia.com/gpu"] = str(gpus * replicas)
        labels["nvidia.com/gpu.product"] = f"{group['product']}-SHARED"
        labels["nvidia.com/gpu.replicas"] = str(replicas)
        labels["nvidia.com/gpu.sharing-strategy"] = "time-slicing"
    elif kind == "mig":
        gpu_resources = mig_resources(group, labels)
    labels.update({str(k): str(v) for k, v in (group.get("labels") or {}).items()})
    resources = {
        "cpu": str(group.get("cpu", "128")),
        "memory": str(group.get("memory", "1Ti")),
        "pods": str(group.get("pods", 110)),
        **gpu_resources,
    }
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": labels,
            "annotations": {KWOK_NODE_ANNOTATION: "fake", "node.alpha.kubernetes.io/ttl": "0"},
        },
        "spec": {},
        "status": {"capacity": dict(resources), "allocatable": dict(resources)},
    }


def mig_resources(group: Mapping[str, Any], labels: dict[str, str]) -> dict[str, str]:
    """A node with MIG on every GPU, as the device plugin's ``mixed`` strategy shows it.

    Each profile becomes a resource ``nvidia.com/mig-<profile>`` (instances per GPU x GPUs)
    and a ``nvidia.com/mig-<profile>.count`` label; whole GPUs are no longer offered.
    """
    gpus = int(group["gpus"])
    model, layout = str(group["migModel"]), dict(group["migLayout"])
    errors = mig_layout_errors(model, layout)
    if errors:
        raise ProfileError(f"node group {group['prefix']!r}: MIG layout: {'; '.join(errors)}")
    labels["nvidia.com/mig.capable"] = "true"
    labels["nvidia.com/mig.strategy"] = "mixed"
    labels["nvidia.com/mig.config"] = str(group["migConfig"])
    labels["nvidia.com/mig.config.state"] = "success"
    resources = {"nvidia.com/gpu": "0"}
    for profile_name, per_gpu in sorted(layout.items()):
        profile = mig_profile(model, profile_name)
        if profile is None:  # mig_layout_errors names unknown profiles: never here
            raise ProfileError(f"node group {group['prefix']!r}: unknown profile {profile_name}")
        resources[f"nvidia.com/mig-{profile_name}"] = str(int(per_gpu) * gpus)
        labels[f"nvidia.com/mig-{profile_name}.count"] = str(int(per_gpu) * gpus)
        labels[f"nvidia.com/mig-{profile_name}.slices.gi"] = str(profile.compute_slices)
    return resources
