"""State changes of the inventory: flavors, nodes and their GPUs, as an admin or the cluster
sync makes them. Each is atomic, validated and audited (``acting_user`` None is the system)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from gpupool.audit.actions import audited_change, delete_audited, model_snapshot, save_audited
from gpupool.inventory.models import Flavor, FlavorPriceChange, Gpu, Node

# The reason a GPU gets when the sync reports it unhealthy without saying why.
UNHEALTHY_AT_SYNC = "reported unhealthy by the cluster sync"


@transaction.atomic
def do_save_flavor(
    flavor: Flavor, *, acting_user: Any, reason: str = "", at: datetime | None = None
) -> Flavor:
    """Create or update a flavor (sharing, card, MIG profile, labels, memory, price); a new
    price enters the price history from ``at`` (default now), so past hours keep theirs."""
    saved = save_audited(
        flavor, action="inventory.save_flavor", acting_user=acting_user, reason=reason
    )
    _record_price(saved, at or timezone.now())
    return saved


def _record_price(flavor: Flavor, at: datetime) -> None:
    """Append the flavor's price to its history when it differs from the price last in force."""
    latest = flavor.price_changes.order_by("-effective_from").first()
    if latest is not None and latest.hourly_price == flavor.hourly_price:
        return
    if latest is not None and at < latest.effective_from:
        raise ValidationError(
            {
                "hourly_price": f"the price history of {flavor} runs to "
                f"{latest.effective_from.isoformat()}; a new price takes effect after that"
            }
        )
    FlavorPriceChange.objects.update_or_create(
        flavor=flavor, effective_from=at, defaults={"hourly_price": flavor.hourly_price}
    )


@transaction.atomic
def do_delete_flavor(flavor: Flavor, *, acting_user: Any, reason: str = "") -> None:
    """Delete a flavor that nothing names (nodes, quotas, pod sets, requests and usage protect
    it: the refusal says which)."""
    delete_audited(flavor, action="inventory.delete_flavor", acting_user=acting_user, reason=reason)


def _node_snapshot(node: Node) -> dict[str, Any]:
    """A node's fields, its GPU count and its unhealthy GPUs with their reasons."""
    gpus = list(node.gpus.order_by("index").values_list("index", "healthy", "unhealthy_reason"))
    return model_snapshot(node, exclude=["last_synced_at"]) | {
        "gpus": len(gpus),
        "unhealthy_gpus": {str(index): why for index, healthy, why in gpus if not healthy},
    }


@transaction.atomic
def do_sync_node(
    name: str,
    *,
    flavor: Flavor,
    gpus: int,
    cpu: int,
    memory_gb: int,
    unhealthy_gpus: Mapping[int, str] | Iterable[int] = (),
    nvlink_domain: str = "",
    rack: str = "",
    zone: str = "",
    labels: Mapping[str, str] | None = None,
    mig_layout: Mapping[str, int] | None = None,
    acting_user: Any = None,
    reason: str = "",
) -> Node:
    """Create or update node ``name`` and make its GPU rows match ``gpus`` and their health.

    ``unhealthy_gpus`` maps GPU indices to why they are unhealthy (DCGM, XID errors); given as
    bare indices, a GPU keeps the reason it has or gets ``UNHEALTHY_AT_SYNC``. The cluster sync
    is the system: ``acting_user`` None.
    """
    if gpus < 0:
        raise ValidationError({"gpus": "a node has zero or more GPUs"})
    reasons = (
        {index: why.strip()[:200] for index, why in unhealthy_gpus.items()}
        if isinstance(unhealthy_gpus, Mapping)
        else dict.fromkeys(unhealthy_gpus, "")
    )
    outside = sorted(index for index in reasons if not 0 <= index < gpus)
    if outside:
        raise ValidationError(
            {"unhealthy_gpus": f"indices {outside} are not GPUs of a {gpus}-GPU node"}
        )
    node = Node.objects.filter(name=name).first() or Node(name=name)
    with audited_change(
        node,
        action="inventory.sync_node",
        acting_user=acting_user,
        reason=reason,
        snapshot=_node_snapshot,
    ):
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
        new: list[Gpu] = []
        for index in range(gpus):
            gpu = existing.get(index) or Gpu(node=node, index=index)
            healthy = index not in reasons
            why = "" if healthy else reasons[index] or gpu.unhealthy_reason or UNHEALTHY_AT_SYNC
            if gpu.pk is None:
                gpu.healthy, gpu.unhealthy_reason = healthy, why
                new.append(gpu)
            elif (gpu.healthy, gpu.unhealthy_reason) != (healthy, why):
                gpu.healthy, gpu.unhealthy_reason = healthy, why
                gpu.save(update_fields=["healthy", "unhealthy_reason"])
        Gpu.objects.bulk_create(new)
    return node


@transaction.atomic
def do_set_node_cordoned(node: Node, *, cordoned: bool, acting_user: Any, reason: str = "") -> Node:
    """Cordon a node (no new placements) or uncordon it; one that already is so is not audited
    again."""
    node.cordoned = cordoned
    with audited_change(
        node,
        action="inventory.set_node_cordoned",
        acting_user=acting_user,
        reason=reason,
        snapshot=_cordon_snapshot,
    ):
        node.save(update_fields=["cordoned"])
    return node


def _cordon_snapshot(node: Node) -> dict[str, Any]:
    """What a cordon changes: the node's name and whether it is cordoned."""
    return {"name": node.name, "cordoned": node.cordoned}


@transaction.atomic
def do_set_gpu_health(gpu: Gpu, *, healthy: bool, reason: str = "", acting_user: Any) -> Gpu:
    """Mark one GPU unhealthy, saying why (a DCGM health check, an XID error, an admin's
    finding), or healthy again (recovery: the reason is cleared). Only healthy GPUs are
    allocatable."""
    gpu.healthy = healthy
    gpu.unhealthy_reason = "" if healthy else reason.strip()[:200]
    with audited_change(
        gpu, action="inventory.set_gpu_health", acting_user=acting_user, reason=reason
    ):
        gpu.full_clean()
        gpu.save(update_fields=["healthy", "unhealthy_reason"])
    return gpu
