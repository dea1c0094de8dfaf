"""Nodes as GPU inventory: which flavor, how many GPUs, which NVLink domain, usable or not.

Pure functions over ``NodeFacts``. The flavors (and the node labels that identify each) live
in the database (``inventory.Flavor.node_labels``); the control loop passes them in as
``FlavorSelector`` values, so nothing here knows a product name.

Identification: a flavor matches a node when the node carries every one of the flavor's
``node_labels`` (a flavor without labels matches nothing). When several match, the one with
the most labels wins (``nvidia.com/gpu.product`` plus ``nvidia.com/gpu.sharing-strategy`` is
more specific than the product alone); a tie is ambiguous and leaves the node out, saying so.

GPU counts come from the device plugin's resources (DESIGN section 4):

- exclusive flavors count ``nvidia.com/gpu`` allocatable;
- shared flavors count physical GPUs: the device plugin offers each one ``replicas`` times
  (label ``nvidia.com/gpu.replicas``, time-slicing or MPS), so allocatable / replicas;
- MIG flavors count instances of their profile (``nvidia.com/mig-<profile>``, the device
  plugin's *mixed* strategy); the physical cards are the ``nvidia.com/gpu.count`` label of GPU
  feature discovery.

GPUs in capacity but not allocatable are the ones the device plugin reports unhealthy. The
device plugin says how many, not which: a health source that knows the index (the simulated
cluster; a node health checker) names them in the label ``gpupool.io/unhealthy-gpus``,
indices joined by ``_`` (``2_5``; ``named_unhealthy_gpus``). The sync marks those first, then
GPUs already known broken (an admin's or DCGM's finding), so a GPU is never counted twice.

A node is left out of scheduling (``schedulable`` False, with ``exclusion`` saying why) when it
is cordoned, not Ready, being deleted, or carries a NoSchedule/NoExecute taint of the node
lifecycle (``node.kubernetes.io/*``, ``node.cloudprovider.kubernetes.io/uninitialized``):
those mark a node that is unhealthy or leaving, whatever a pod tolerates. Any other taint
(``nvidia.com/gpu:NoSchedule``, ``dedicated=team-a:NoSchedule``) keeps the node in the
inventory: it is judged per pod set through its tolerations (``matching``), because a taint
that keeps most pods away is usually there to reserve the node for the pods that tolerate it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from gpupool.clusters.base import PRODUCT_LABEL, NodeFacts, ResourceAmounts

FlavorSharing = Literal["exclusive", "shared", "mig"]
REPLICAS_LABEL = "nvidia.com/gpu.replicas"
GPU_COUNT_LABEL = "nvidia.com/gpu.count"
MIG_CONFIG_LABEL = "nvidia.com/mig.config"
UNHEALTHY_GPUS_LABEL = "gpupool.io/unhealthy-gpus"
LIFECYCLE_TAINT_PREFIX = "node.kubernetes.io/"
UNINITIALIZED_TAINT = "node.cloudprovider.kubernetes.io/uninitialized"
MAX_REPLICAS = 1024  # a label beyond this is not a real sharing configuration


@dataclass(frozen=True, slots=True)
class FlavorSelector:
    """How to recognise one flavor's nodes: its labels, sharing mode and MIG profile."""

    name: str
    node_labels: Mapping[str, str]
    sharing: FlavorSharing = "exclusive"
    mig_profile: str | None = None


@dataclass(frozen=True, slots=True)
class NodeInventory:
    """A node as inventory: flavor, GPUs (or MIG instances), CPU, memory, domain, zone.

    ``gpus`` counts the flavor's devices (whole GPUs; physical GPUs on a shared flavor; MIG
    instances), healthy or not; ``unhealthy_gpus`` of them are not allocatable.
    """

    name: str
    flavor: str | None
    gpus: int = 0
    unhealthy_gpus: int = 0
    physical_gpus: int | None = None
    mig_layout: Mapping[str, int] = field(default_factory=dict)
    cpu_milli: int = 0
    memory_mib: int = 0
    nvlink_domain: str = ""
    zone: str | None = None
    schedulable: bool = True
    exclusion: str | None = None  # why the node takes no new pods


@dataclass(frozen=True, slots=True)
class FlavorMatch:
    """The flavor of a node, or why there is none (no match, or several equally good)."""

    flavor: FlavorSelector | None
    error: str | None = None


def identify_flavor(node: NodeFacts, flavors: Sequence[FlavorSelector]) -> FlavorMatch:
    """The flavor whose node labels the node carries, most specific first."""
    matching = [
        flavor
        for flavor in flavors
        if flavor.node_labels
        and all(node.labels.get(key) == value for key, value in flavor.node_labels.items())
    ]
    if not matching:
        product = node.gpu_product
        said = f" (nvidia.com/gpu.product={product})" if product else ""
        return FlavorMatch(None, f"no flavor's node labels match this node{said}")
    best = max(len(flavor.node_labels) for flavor in matching)
    top = sorted(flavor.name for flavor in matching if len(flavor.node_labels) == best)
    if len(top) > 1:
        return FlavorMatch(None, f"the node matches flavors {', '.join(top)} equally")
    return FlavorMatch(next(f for f in matching if f.name == top[0]))


def _label_int(node: NodeFacts, label: str, limit: int) -> int | None:
    text = node.labels.get(label, "")
    if not text.isdigit():
        return None
    value = int(text)
    return value if 1 <= value <= limit else None


def replicas_of(labels: Mapping[str, str]) -> int:
    """How many pods the device plugin lets share one GPU (``nvidia.com/gpu.replicas``; 1
    without the label or with one that is no real sharing configuration)."""
    text = labels.get(REPLICAS_LABEL, "")
    value = int(text) if text.isdigit() else 0
    return value if 1 <= value <= MAX_REPLICAS else 1


def named_unhealthy_gpus(labels: Mapping[str, str]) -> tuple[int, ...]:
    """The GPU indices a health source names unhealthy (label ``gpupool.io/unhealthy-gpus``:
    ``2_5`` names GPUs 2 and 5), in order, each once; none without the label. A part that is
    no index is skipped: the label is a hint, the device plugin's count stays the measure."""
    text = labels.get(UNHEALTHY_GPUS_LABEL, "")
    return tuple(dict.fromkeys(int(part) for part in text.split("_") if part.isdigit()))


def unhealthy_gpus_label(indices: Iterable[int]) -> str:
    """The label value naming these GPU indices (``named_unhealthy_gpus`` reads it back)."""
    return "_".join(str(index) for index in sorted(set(indices)))


# The exclusion of a node cordoned in the cluster (``spec.unschedulable``), as gpupool's own
# cordons and drains leave it there too.
CORDONED_IN_CLUSTER = "cordoned"


def exclusion(node: NodeFacts) -> str | None:
    """Why a node takes no new pods (cordoned, not Ready, deleting, lifecycle taint), or None."""
    if node.unschedulable:
        return CORDONED_IN_CLUSTER
    if not node.ready:
        return "not Ready"
    if node.deleting:
        return "being deleted"
    for taint in node.taints:
        lifecycle = taint.key.startswith(LIFECYCLE_TAINT_PREFIX) or taint.key == UNINITIALIZED_TAINT
        if lifecycle and taint.effect in ("NoSchedule", "NoExecute"):
            return f"tainted {taint.key}:{taint.effect}"
    return None


def _devices(flavor: FlavorSelector, amounts: ResourceAmounts, replicas: int) -> int:
    """The flavor's devices in ``amounts``: MIG instances, physical GPUs, or whole GPUs."""
    if flavor.sharing == "mig":
        return amounts.mig.get(flavor.mig_profile or "", 0)
    if flavor.sharing == "shared":
        return amounts.gpus // replicas
    return amounts.gpus


class FlavorMatches:
    """``identify_flavor`` for many nodes against one list of flavors, remembered per value
    of the labels the flavors name (and the GPU product, which its message says): nodes
    labelled alike match alike. A first sync looks at every node (5,000 at B1's size)."""

    def __init__(self, flavors: Sequence[FlavorSelector]) -> None:
        self.flavors = flavors
        named = {key for flavor in flavors for key in flavor.node_labels}
        self._keys = tuple(sorted(named | {PRODUCT_LABEL}))
        self._found: dict[tuple[str | None, ...], FlavorMatch] = {}

    def of(self, node: NodeFacts) -> FlavorMatch:
        """The node's flavor match, as ``identify_flavor`` gives it."""
        labels = node.labels
        key = tuple(labels.get(label) for label in self._keys)
        found = self._found.get(key)
        if found is None:
            found = self._found[key] = identify_flavor(node, self.flavors)
        return found


def node_inventory(
    node: NodeFacts, flavors: Sequence[FlavorSelector], matches: FlavorMatches | None = None
) -> NodeInventory:
    """The inventory facts of one node; ``flavor`` None (and not schedulable) if unknown.
    ``matches``: flavor matches of these ``flavors`` remembered across nodes."""
    match = identify_flavor(node, flavors) if matches is None else matches.of(node)
    flavor = match.flavor
    total = allocatable = 0
    physical: int | None = None
    layout: dict[str, int] = {}
    why = match.error
    if flavor is not None:
        replicas = replicas_of(node.labels)
        total = _devices(flavor, node.capacity, replicas)
        allocatable = min(_devices(flavor, node.allocatable, replicas), total)
        if flavor.sharing == "mig":
            physical = _label_int(node, GPU_COUNT_LABEL, MAX_REPLICAS)
            layout = {
                profile: count // physical
                for profile, count in sorted(node.capacity.mig.items())
                if physical and count and count % physical == 0
            }
        elif flavor.sharing == "shared":
            physical = total
        why = exclusion(node)
        if why is None and total == 0:
            why = f"no {flavor.name} devices allocatable"
    return NodeInventory(
        name=node.name,
        flavor=flavor.name if flavor is not None else None,
        gpus=total,
        unhealthy_gpus=total - allocatable,
        physical_gpus=physical,
        mig_layout=layout,
        cpu_milli=node.allocatable.cpu_milli,
        memory_mib=node.allocatable.memory_mib,
        nvlink_domain=node.nvlink_domain,
        zone=node.zone,
        schedulable=why is None,
        exclusion=why,
    )
