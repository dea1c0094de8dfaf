"""State changes of the inventory: flavors, nodes and their GPUs, as an admin or the cluster
sync makes them. Each is atomic, validated and audited (``acting_user`` None is the system)."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Collection, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from gpupool.audit.actions import (
    audited_change,
    delete_audited,
    model_snapshot,
    record_audit_event,
    save_audited,
)
from gpupool.control.clock import pool_now
from gpupool.inventory.models import (
    UNHEALTHY_REASON_MAX_LENGTH,
    Flavor,
    FlavorPriceChange,
    Gpu,
    Node,
)
from gpupool.workloads.choices import unfinished
from gpupool.workloads.models import Workload

# The reason a GPU gets when the sync reports it unhealthy without saying why.
UNHEALTHY_AT_SYNC = "reported unhealthy by the cluster sync"
# Why a node that vanished from the cluster takes no pods.
GONE = "gone from the cluster"
# What a flavor's pod sets and placements mean: whole GPUs or milli shares, which MIG
# instance (and so how many per card). Fixed while unfinished work asks for the flavor.
PLACEMENT_FIELDS = ("sharing", "gpu_model", "mig_profile")


@transaction.atomic
def do_save_flavor(
    flavor: Flavor, *, acting_user: Any, reason: str = "", at: datetime | None = None
) -> Flavor:
    """Create or update a flavor (sharing, card, MIG profile, labels, memory, price); a new
    price enters the price history from ``at`` (default now), so past hours keep theirs.
    Refused, naming the field, when it changes what a pod set or placement on the flavor
    means (``PLACEMENT_FIELDS``) while unfinished workloads ask for it."""
    problems = _placement_change_errors(flavor)
    if problems:
        raise ValidationError(problems)
    saved = save_audited(
        flavor, action="inventory.save_flavor", acting_user=acting_user, reason=reason
    )
    _record_price(saved, at or pool_now())
    return saved


def _placement_change_errors(flavor: Flavor) -> dict[str, str]:
    """``{field: why}`` for each of ``PLACEMENT_FIELDS`` the save would change while unfinished
    workloads ask for the flavor (first choice or a further one) or are placed on its nodes:
    their pod sets and placements would stop meaning what the loop checks them against."""
    if flavor.pk is None:
        return {}
    stored = Flavor.objects.filter(pk=flavor.pk).values(*PLACEMENT_FIELDS).first()
    if stored is None:
        return {}
    changed = [field for field in PLACEMENT_FIELDS if getattr(flavor, field) != stored[field]]
    if not changed:
        return {}
    using = (
        Workload.objects.filter(unfinished())
        .filter(
            Q(pod_sets__flavor=flavor)
            | Q(pod_sets__flavor_choices__flavor=flavor)
            | Q(placements__node__flavor=flavor)
        )
        .distinct()
    )
    count = using.count()
    if not count:
        return {}
    examples = ", ".join(
        f"{namespace}/{name}"
        for namespace, name in using.order_by("namespace", "name").values_list("namespace", "name")[
            :3
        ]
    )
    return {
        field: f"{field} cannot change from {stored[field]!r} while {count} unfinished "
        f"workload{'s' * (count != 1)} ask for {flavor.name} ({examples}"
        f"{', ...' if count > 3 else ''}): their pod sets and placements would no longer "
        f"fit it; change it once they finish, or make a new flavor"
        for field in changed
    }


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


def reported_unhealthy_refusal(gpu: Gpu) -> str:
    """Why a GPU the cluster reports unhealthy cannot be marked healthy (``do_set_gpu_health``)."""
    return (
        f"GPU {gpu.index} of {gpu.node.name} is not allocatable in the cluster (the device "
        "plugin does not offer it in the node's allocatable; the node's label "
        "gpupool.io/unhealthy-gpus names it when a health checker says which); it becomes "
        "healthy at the first sync after the cluster offers it again"
    )


def _node_snapshot(node: Node) -> dict[str, Any]:
    """A node's fields, its GPU count and its unhealthy GPUs with their reasons."""
    gpus = list(node.gpus.order_by("index").values_list("index", "healthy", "unhealthy_reason"))
    return model_snapshot(node, exclude=["last_synced_at", "updated_at"]) | {
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
    cluster_exclusion: str | None = None,
    at: datetime | None = None,
    acting_user: Any = None,
    reason: str = "",
) -> Node:
    """Create or update node ``name`` and make its GPU rows match ``gpus`` and their health;
    ``last_synced_at`` is when its facts were last recorded (``at``, or now for a new node).

    ``unhealthy_gpus`` maps GPU indices to why they are unhealthy (DCGM, XID errors); given as
    bare indices, a GPU keeps the reason it has or gets ``UNHEALTHY_AT_SYNC``. The cluster sync
    is the system: ``acting_user`` None; it also says why the cluster takes no new pods there
    (``cluster_exclusion``: None leaves it as it is) and when it looked (``at``). A node that
    comes back after it was gone is no longer gone.
    """
    if gpus < 0:
        raise ValidationError({"gpus": "a node has zero or more GPUs"})
    reasons = (
        {index: why.strip()[:UNHEALTHY_REASON_MAX_LENGTH] for index, why in unhealthy_gpus.items()}
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
        fields = (
            "flavor_id",
            "cpu",
            "memory_gb",
            "nvlink_domain",
            "rack",
            "zone",
            "labels",
            "mig_layout",
            "cluster_exclusion",
            "gone_at",
            "last_synced_at",
        )
        before = tuple(getattr(node, name) for name in fields)
        node.flavor = flavor
        node.cpu = cpu
        node.memory_gb = memory_gb
        node.nvlink_domain = nvlink_domain or name
        node.rack = rack
        node.zone = zone
        node.labels = dict(labels or {})
        node.mig_layout = dict(mig_layout or {})
        if cluster_exclusion is not None:
            node.cluster_exclusion = cluster_exclusion[:200]
            node.gone_at = None
        # When the node's facts were last recorded: at each sync that changes them (``at``),
        # and when it is made (by a seed as well): an unchanged node is not written again
        # each cycle (5,000 nodes), so this is when they last changed, never a heartbeat
        # (the loop's is its last cycle's time).
        if at is not None:
            node.last_synced_at = at
        elif node.pk is None:
            node.last_synced_at = pool_now()
        node.full_clean()
        # An unchanged node keeps its updated_at: the control loop re-reads changed ones only.
        changed = node.pk is None or before != tuple(getattr(node, name) for name in fields)
        if changed:
            node.save()
        changed = node.gpus.filter(index__gte=gpus).delete()[0] > 0 or changed
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
                changed = True
        Gpu.objects.bulk_create(new)
        if new or changed:
            Node.objects.filter(pk=node.pk).update(updated_at=timezone.now())
    return node


@transaction.atomic
def do_add_nodes(
    nodes: Sequence[tuple[Node, int, Mapping[int, str]]], *, at: datetime, reason: str = ""
) -> list[Node]:
    """Create many nodes the database has never seen at once (a cluster's first sync: hundreds),
    as ``do_sync_node`` would one by one: each ``(node, gpus, unhealthy_gpus)`` -- an unsaved
    node with its fields set, its GPU count, and why GPUs are unhealthy by index -- is checked
    by the model's field rules and ``Node.own_errors`` in Python, and the NVLink domains' one
    flavor against the domains read once; then the nodes and their GPUs go in by bulk
    inserts, with one audit row for them all. Returns the nodes it did not take (a name that
    exists, any rule refused, a domain shared with another flavor) for ``do_sync_node``,
    which refuses a bad one with its usual message."""
    if not nodes:
        return []
    names = [node.name for node, _, _ in nodes]
    taken = set(Node.objects.filter(name__in=names).values_list("name", flat=True))
    domains: dict[str, set[int]] = {}
    for node, _, _ in nodes:
        node.nvlink_domain = node.nvlink_domain or node.name
        domains.setdefault(node.nvlink_domain, set()).add(node.flavor_id)
    for domain, flavor_id in Node.objects.filter(nvlink_domain__in=list(domains)).values_list(
        "nvlink_domain", "flavor_id"
    ):
        domains[domain].add(flavor_id)
    slow: list[Node] = []
    fast: list[tuple[Node, int, Mapping[int, str]]] = []
    for node, gpus, unhealthy in nodes:
        node.last_synced_at = at
        try:
            node.clean_fields(exclude=["flavor"])  # the flavor was read: no SELECT each
        except ValidationError:
            slow.append(node)
            continue
        if (
            node.name in taken
            or node.own_errors()
            or len(domains[node.nvlink_domain]) > 1
            or gpus < 0
            or any(not 0 <= index < gpus for index in unhealthy)
        ):
            slow.append(node)
            continue
        taken.add(node.name)
        fast.append((node, gpus, unhealthy))
    if not fast:
        return slow
    created = Node.objects.bulk_create([node for node, _, _ in fast])
    Gpu.objects.bulk_create(
        Gpu(
            node=node,
            index=index,
            healthy=index not in unhealthy,
            unhealthy_reason=""
            if index not in unhealthy
            else unhealthy[index].strip()[:UNHEALTHY_REASON_MAX_LENGTH] or UNHEALTHY_AT_SYNC,
        )
        for node, gpus, unhealthy in fast
        for index in range(gpus)
    )
    record_audit_event(
        acting_user=None,
        action="inventory.add_nodes",
        instance=created[0],
        before=None,
        after={"nodes": len(created), "names": [node.name for node in created[:50]]},
        reason=reason,
    )
    return slow


@transaction.atomic
def do_set_node_cordoned(node: Node, *, cordoned: bool, acting_user: Any, reason: str = "") -> Node:
    """Cordon a node (no new placements) or uncordon it; one that already is so is not audited
    again. Uncordoning a draining node ends its drain (``do_end_drain``)."""
    if not cordoned and Node.objects.filter(pk=node.pk, drain_requested_at__isnull=False).exists():
        return do_end_drain(node, acting_user=acting_user, reason=reason)
    node.cordoned = cordoned
    with audited_change(
        node,
        action="inventory.set_node_cordoned",
        acting_user=acting_user,
        reason=reason,
        snapshot=_cordon_snapshot,
    ):
        node.save(update_fields=["cordoned", "updated_at"])
    return node


@transaction.atomic
def do_mark_nodes_gone(names: Iterable[str], *, at: datetime) -> list[str]:
    """Mark nodes that vanished from the cluster as gone (kept for history, never scheduled);
    returns the names that were not gone already."""
    marked: list[str] = []
    for node in Node.objects.select_for_update().filter(name__in=list(names), gone_at=None):
        with audited_change(
            node,
            action="inventory.sync_node",
            acting_user=None,
            reason="gone from the cluster",
            snapshot=_node_snapshot,
        ):
            node.gone_at = at
            node.cluster_exclusion = GONE
            node.save(update_fields=["gone_at", "cluster_exclusion", "updated_at"])
        marked.append(node.name)
    return marked


@transaction.atomic
def do_drain_node(node: Node, *, acting_user: Any, reason: str = "") -> Node:
    """Drain a node: cordon it and ask the control loop to evict the workloads placed there
    (reason ``admin``, through the cluster's eviction API, so disruption budgets are honoured;
    a refused eviction is tried again later). Draining a draining node changes nothing."""
    node = Node.objects.select_for_update().get(pk=node.pk)
    if node.drain_requested_at is not None and node.cordoned:
        return node
    with audited_change(
        node,
        action="inventory.drain_node",
        acting_user=acting_user,
        reason=reason,
        snapshot=_drain_snapshot,
    ):
        node.cordoned = True
        # The pool's clock, which also stamps ``drained_at`` (a simulated cluster runs ahead
        # of the wall clock: a minute's drain read as hours).
        node.drain_requested_at = node.drain_requested_at or pool_now()
        node.drained_at = None  # the control loop says when it is empty (``do_record_drained``)
        node.save(update_fields=["cordoned", "drain_requested_at", "drained_at", "updated_at"])
    return node


@transaction.atomic
def do_end_drain(node: Node, *, acting_user: Any, reason: str = "") -> Node:
    """End a node's drain and put it back in service: uncordoned, and the control loop evicts
    nothing more from it (an eviction it already asked for goes on). Ending the drain of a node
    that is not draining changes nothing."""
    node = Node.objects.select_for_update().get(pk=node.pk)
    if node.drain_requested_at is None:
        return node
    with audited_change(
        node,
        action="inventory.end_drain",
        acting_user=acting_user,
        reason=reason,
        snapshot=_drain_snapshot,
    ):
        node.cordoned = False
        node.drain_requested_at = None
        node.drained_at = None
        node.save(update_fields=["cordoned", "drain_requested_at", "drained_at", "updated_at"])
    return node


@transaction.atomic
def do_record_drained(empty: Collection[str], *, at: datetime) -> list[str]:
    """The control loop's word on the nodes being drained (asked to, still cordoned, not
    gone): those in ``empty`` -- no pod of gpupool's, no workload the database places there,
    no other scheduler's pod holding a GPU -- are drained from ``at`` (they stay cordoned
    until an admin uncordons them); a drained node not in ``empty`` has work on it again and
    is draining once more. Only the nodes whose state changes are written and audited (the
    system); returns their names."""
    empty = set(empty)
    changed: list[str] = []
    for node in Node.objects.select_for_update().filter(
        drain_requested_at__isnull=False, cordoned=True, gone_at=None
    ):
        drained = node.name in empty
        if drained == (node.drained_at is not None):
            continue
        with audited_change(
            node,
            action="inventory.record_drained",
            acting_user=None,
            reason="nothing is left on it" if drained else "work is on it again",
            snapshot=_drain_snapshot,
        ):
            node.drained_at = at if drained else None
            # Not ``updated_at``: the scheduler's view of the node is the same (cordoned).
            node.save(update_fields=["drained_at"])
        changed.append(node.name)
    return changed


@transaction.atomic
def do_record_foreign_usage(usage: Mapping[str, Mapping[str, Any]]) -> int:
    """The control loop's word on what other schedulers' pods hold on the nodes named
    (``Node.foreign_usage``: ``ResourceAmounts.as_json``, ``{}`` for none), written as the
    cluster says it, unaudited (an observation, as a GPU's health from the device plugin
    is) and without ``updated_at``: the loop's own view takes it from the cluster; only the
    pages' view reads it back. The nodes of one amount in one statement (a Job's pods
    spread over many nodes ask the same). Returns how many rows were written."""
    groups: dict[str, list[str]] = defaultdict(list)
    for name, amounts in usage.items():
        groups[json.dumps(amounts, sort_keys=True)].append(name)
    return sum(
        Node.objects.filter(name__in=sorted(names)).update(foreign_usage=json.loads(text))
        for text, names in sorted(groups.items())
    )


def _drain_snapshot(node: Node) -> dict[str, Any]:
    """What a drain changes: the node's name, cordon, drain request and whether it is empty."""
    return {
        "name": node.name,
        "cordoned": node.cordoned,
        "drain_requested": node.drain_requested_at is not None,
        "drained": node.drained_at is not None,
    }


def _cordon_snapshot(node: Node) -> dict[str, Any]:
    """What a cordon changes: the node's name and whether it is cordoned."""
    return {"name": node.name, "cordoned": node.cordoned}


@transaction.atomic
def do_set_gpu_health(gpu: Gpu, *, healthy: bool, reason: str = "", acting_user: Any) -> Gpu:
    """Mark one GPU unhealthy, saying why (a DCGM health check, an XID error, an admin's
    finding), or healthy again (recovery: the reason is cleared). Only healthy GPUs are
    allocatable.

    The cluster's verdict wins, whatever recorded the mark: a GPU the cluster reports
    unhealthy (``Gpu.reported_by_cluster``: the sync's ``CLUSTER_UNHEALTHY``, or named by the
    node's ``gpupool.io/unhealthy-gpus`` label, whose reason may be a health source's XID)
    cannot be marked healthy -- a pod bound to it would be refused by the kubelet. It is
    healthy again when the node's allocatable counts it (the next sync after the device
    plugin offers it). An admin's or DCGM's mark on a GPU the cluster offers is theirs to
    lift."""
    # The GPU's mark and its node's labels as stored (the last sync's), not as the caller's
    # copy says them: an admin form has already set its copy healthy.
    stored = Gpu.objects.select_related("node").get(pk=gpu.pk) if gpu.pk else gpu
    if healthy and stored.reported_by_cluster:
        raise ValidationError({"healthy": reported_unhealthy_refusal(stored)})
    gpu.healthy = healthy
    gpu.unhealthy_reason = "" if healthy else reason.strip()[:UNHEALTHY_REASON_MAX_LENGTH]
    with audited_change(
        gpu, action="inventory.set_gpu_health", acting_user=acting_user, reason=reason
    ):
        gpu.full_clean()
        gpu.save(update_fields=["healthy", "unhealthy_reason"])
        # The node's form in the scheduler's snapshot changes with it.
        Node.objects.filter(pk=gpu.node_id).update(updated_at=timezone.now())
    return gpu
