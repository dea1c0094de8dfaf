"""State changes of the inventory: nodes and their GPUs, as the cluster sync or an admin
makes them."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from django.core.exceptions import ValidationError
from django.db import transaction

from gpupool.inventory.models import Flavor, Gpu, Node


@transaction.atomic
def do_sync_node(
    name: str,
    *,
    flavor: Flavor,
    gpus: int,
    cpu: int,
    memory_gb: int,
    unhealthy_gpus: Iterable[int] = (),
    nvlink_domain: str = "",
    rack: str = "",
    zone: str = "",
    labels: Mapping[str, str] | None = None,
    mig_layout: Mapping[str, int] | None = None,
) -> Node:
    """Create or update node ``name`` and make its GPU rows match ``gpus`` and their health."""
    if gpus < 0:
        raise ValidationError({"gpus": "a node has zero or more GPUs"})
    unhealthy = set(unhealthy_gpus)
    outside = sorted(index for index in unhealthy if not 0 <= index < gpus)
    if outside:
        raise ValidationError(
            {"unhealthy_gpus": f"indices {outside} are not GPUs of a {gpus}-GPU node"}
        )
    node = Node.objects.select_for_update().filter(name=name).first() or Node(name=name)
    node.flavor = flavor
    node.cpu = cpu
    node.memory_gb = memory_gb
    node.nvlink_domain = nvlink_domain or name
    node.rack = rack
    node.zone = zone
    node.labels = dict(labels or {})
    node.mig_layout = dict(mig_layout or {})
    node.full_clean()
    node.save()
    node.gpus.filter(index__gte=gpus).delete()
    existing = {gpu.index: gpu for gpu in node.gpus.all()}
    for index in range(gpus):
        healthy = index not in unhealthy
        gpu = existing.get(index)
        if gpu is None:
            Gpu.objects.create(node=node, index=index, healthy=healthy)
        elif gpu.healthy != healthy:
            gpu.healthy = healthy
            gpu.save(update_fields=["healthy"])
    return node


@transaction.atomic
def do_set_node_cordoned(node: Node, *, cordoned: bool) -> Node:
    """Cordon a node (no new placements) or uncordon it."""
    node.cordoned = cordoned
    node.save(update_fields=["cordoned"])
    return node


@transaction.atomic
def do_set_gpu_health(gpu: Gpu, *, healthy: bool) -> Gpu:
    """Mark one GPU healthy or unhealthy; only healthy GPUs are allocatable."""
    gpu.healthy = healthy
    gpu.save(update_fields=["healthy"])
    return gpu
