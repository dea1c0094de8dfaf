"""Inventory: GPU flavors, nodes and each node's GPUs, as synced from the cluster."""

from __future__ import annotations

from decimal import Decimal
from typing import TYPE_CHECKING, Any

from django.core.exceptions import ValidationError
from django.core.validators import MinValueValidator, RegexValidator
from django.db import models
from django.db.models import Count, Q

from gpupool.clusters.base import ResourceAmounts
from gpupool.clusters.inventory import CORDONED_IN_CLUSTER, named_unhealthy_gpus, replicas_of
from gpupool.inventory.choices import NodeState, Sharing
from gpupool.scheduler import mig
from gpupool.tenancy.models import fixed_field_errors

if TYPE_CHECKING:
    from gpupool.inventory.drains import DrainWait


def _string_map_errors(value: Any) -> str | None:
    """Why ``value`` is not a mapping of strings to strings (Kubernetes labels), or None."""
    if not isinstance(value, dict):
        return "must be an object of label names to values"
    for key, item in value.items():
        if not isinstance(key, str) or not key or not isinstance(item, str):
            return f"label {key!r} must map a non-empty name to a string value"
    return None


validate_flavor_name = RegexValidator(
    r"^[a-z0-9]([a-z0-9.-]{0,61}[a-z0-9])?$",
    "Use lowercase letters, digits, '-' and '.', starting and ending with a letter or digit "
    "(e.g. h100 or a100-3g.20gb).",
)


class Flavor(models.Model):
    """A kind of GPU resource (``h100``, ``a100-3g.40gb``): node labels, memory, price, sharing."""

    name = models.CharField(max_length=63, unique=True, validators=[validate_flavor_name])
    sharing = models.CharField(max_length=16, choices=Sharing.choices, default=Sharing.EXCLUSIVE)
    gpu_model = models.CharField(
        max_length=40,
        blank=True,
        help_text="Card model, e.g. H100-80GB; MIG flavors need it (it picks the profile table).",
    )
    mig_profile = models.CharField(
        max_length=20, blank=True, help_text="MIG flavors only: the profile, e.g. 3g.40gb."
    )
    node_labels = models.JSONField(
        default=dict, blank=True, help_text="Labels that identify this flavor's nodes."
    )
    gpu_memory_gb = models.PositiveIntegerField(help_text="Memory per GPU (or per MIG instance).")
    hourly_price = models.DecimalField(
        max_digits=10,
        decimal_places=4,
        validators=[MinValueValidator(Decimal(0))],
        help_text="Price of one GPU (or instance) for one hour, for cost attribution.",
    )
    description = models.TextField(blank=True)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.CheckConstraint(
                condition=Q(sharing__in=Sharing.values), name="flavor_sharing_valid"
            ),
            models.CheckConstraint(
                condition=Q(hourly_price__gte=0), name="flavor_hourly_price_non_negative"
            ),
            models.CheckConstraint(
                condition=(Q(sharing=Sharing.MIG) & ~Q(mig_profile=""))
                | (~Q(sharing=Sharing.MIG) & Q(mig_profile="")),
                name="flavor_mig_profile_iff_mig",
            ),
        ]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        """Check the name stays as created (pods' flavor labels, quotas and the loop name it),
        the labels, and that a MIG flavor names a known profile of its card."""
        errors: dict[str, str] = fixed_field_errors(self, "name")
        label_error = _string_map_errors(self.node_labels)
        if label_error:
            errors["node_labels"] = label_error
        if self.sharing == Sharing.MIG:
            table = mig.mig_profiles(self.gpu_model)
            if table is None:
                errors["gpu_model"] = (
                    f"a MIG flavor needs a card with a MIG profile table: "
                    f"{', '.join(mig.mig_gpu_models())}"
                )
            elif not self.mig_profile:
                errors["mig_profile"] = "a MIG flavor names its profile, e.g. 3g.40gb"
            else:
                profile = table.get(self.mig_profile)
                if profile is None:
                    known = ", ".join(table)
                    errors["mig_profile"] = (
                        f"{self.mig_profile!r} is not a MIG profile of {self.gpu_model}; "
                        f"known: {known}"
                    )
                elif self.gpu_memory_gb is not None and self.gpu_memory_gb != profile.memory_gb:
                    errors["gpu_memory_gb"] = (
                        f"profile {self.mig_profile} has {profile.memory_gb} GB, "
                        f"not {self.gpu_memory_gb}"
                    )
        elif self.mig_profile:
            errors["mig_profile"] = "only MIG flavors have a MIG profile"
        fractional = self.fractional_quotas() if self.sharing != Sharing.SHARED else []
        if fractional and "sharing" not in errors:
            errors["sharing"] = (
                f"a {self.sharing} flavor's quotas are whole numbers, and these of its queue "
                f"quotas hold a fraction of a GPU: {', '.join(fractional)}; set them to whole "
                "numbers first"
            )
        if errors:
            raise ValidationError(errors)

    def fractional_quotas(self) -> list[str]:
        """The queues whose quota of this flavor, as stored, holds a fraction of a GPU that the
        flavor's sharing (as set on this object) does not take (``whole_gpu_errors``): a shared
        flavor made exclusive or MIG under them would leave quotas no pod can use."""
        if self.pk is None:
            return []
        from gpupool.quotas.validators import whole_gpu_errors  # quotas build on inventory

        return [
            quota.queue.name
            for quota in self.quotas.select_related("queue").order_by("queue__name")
            if whole_gpu_errors(
                self,
                {
                    "guarantee": quota.guarantee,
                    "deserved": quota.deserved,
                    "capability": quota.capability,
                },
            )
        ]


class FlavorPriceChange(models.Model):
    """A flavor's hourly price from ``effective_from`` on (until the next change): the history
    that past hours are charged at."""

    flavor = models.ForeignKey(Flavor, on_delete=models.CASCADE, related_name="price_changes")
    effective_from = models.DateTimeField()
    hourly_price = models.DecimalField(
        max_digits=10, decimal_places=4, validators=[MinValueValidator(Decimal(0))]
    )

    class Meta:
        ordering = ["flavor", "effective_from"]
        constraints = [
            models.UniqueConstraint(
                fields=["flavor", "effective_from"], name="flavorpricechange_once_per_instant"
            ),
            models.CheckConstraint(
                condition=Q(hourly_price__gte=0), name="flavorpricechange_price_non_negative"
            ),
        ]

    def __str__(self) -> str:
        since = f"{self.effective_from:%Y-%m-%d %H:%M}"
        return f"{self.flavor.name}: {self.hourly_price} per hour from {since}"


class Node(models.Model):
    """A Kubernetes node of one flavor, with its CPU, memory and NVLink domain."""

    name = models.CharField(max_length=253, unique=True)
    flavor = models.ForeignKey(Flavor, on_delete=models.PROTECT, related_name="nodes")
    cpu = models.PositiveIntegerField(help_text="Allocatable CPU cores.")
    memory_gb = models.PositiveIntegerField(help_text="Allocatable memory in GB.")
    nvlink_domain = models.CharField(
        max_length=253,
        blank=True,
        help_text="From the nvidia.com/gpu.clique label; empty means the node is its own domain.",
    )
    rack = models.CharField(max_length=100, blank=True)
    zone = models.CharField(max_length=100, blank=True)
    cordoned = models.BooleanField(default=False)
    labels = models.JSONField(default=dict, blank=True)
    mig_layout = models.JSONField(
        default=dict,
        blank=True,
        help_text='MIG nodes only: instances per card, e.g. {"3g.40gb": 2}, the same on every GPU.',
    )
    last_synced_at = models.DateTimeField(null=True, blank=True)
    cluster_exclusion = models.CharField(
        max_length=200,
        blank=True,
        help_text="Why the cluster takes no new pods here (not Ready, cordoned in the cluster, "
        "a lifecycle taint, gone), as the last sync saw it; empty when schedulable.",
    )
    gone_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="When the node vanished from the cluster: kept for history, never scheduled.",
    )
    drain_requested_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="An admin asked to drain it: cordoned, and its workloads evicted (reason "
        "admin, disruption budgets honoured) by the control loop.",
    )
    drained_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="When the control loop found the draining node empty: no pod of gpupool's "
        "and no other scheduler's pod holding a GPU left there. It stays cordoned until an "
        "admin uncordons it; cleared when the drain ends or work shows up there again.",
    )
    foreign_usage = models.JSONField(
        default=dict,
        blank=True,
        help_text="What other schedulers' live pods on the node ask (cpu_milli, memory_mib, "
        "gpus, mig), as the control loop last saw it; empty when none. The pages' view of the "
        "pool takes it off the node as the loop's own does.",
    )
    updated_at = models.DateTimeField(
        auto_now=True,
        db_index=True,
        help_text="When the node or its GPUs last changed: the control loop re-reads only these.",
    )

    class Meta:
        ordering = ["name"]
        constraints = [
            models.CheckConstraint(
                condition=~Q(nvlink_domain=""), name="node_nvlink_domain_not_empty"
            ),
        ]
        indexes = [models.Index(fields=["nvlink_domain"], name="node_nvlink_domain_idx")]

    def __str__(self) -> str:
        return self.name

    def save(self, *args: Any, **kwargs: Any) -> None:
        """A node outside any clique is its own NVLink domain."""
        if not self.nvlink_domain:
            self.nvlink_domain = self.name
        super().save(*args, **kwargs)

    def clean(self) -> None:
        """Check labels, the MIG layout against the flavor, and one flavor per NVLink domain."""
        errors = self.own_errors()
        domain = self.nvlink_domain or self.name
        flavor = self.flavor if self.flavor_id else None
        if flavor is not None and domain:
            other = (
                Node.objects.filter(nvlink_domain=domain)
                .exclude(pk=self.pk)
                .exclude(flavor=flavor)
                .first()
            )
            if other is not None:
                errors["nvlink_domain"] = (
                    f"domain {domain!r} already holds node {other.name} of flavor {other.flavor}; "
                    f"an NVLink domain has one flavor"
                )
        if errors:
            raise ValidationError(errors)

    def own_errors(self) -> dict[str, str]:
        """``clean``'s rules that need no other row (labels, the MIG layout against the
        flavor), by field; the NVLink domain's one flavor is ``clean``'s, or a bulk caller's
        that read the domains once."""
        errors: dict[str, str] = {}
        label_error = _string_map_errors(self.labels)
        if label_error:
            errors["labels"] = label_error
        flavor = self.flavor if self.flavor_id else None
        if flavor is not None and flavor.sharing == Sharing.MIG:
            if not isinstance(self.mig_layout, dict):
                errors["mig_layout"] = "must be an object of MIG profile to instances per GPU"
            else:
                problems = mig.mig_layout_errors(flavor.gpu_model, self.mig_layout)
                if not problems and flavor.mig_profile not in self.mig_layout:
                    problems = [f"the layout has no {flavor.mig_profile} instance for {flavor}"]
                if problems:
                    errors["mig_layout"] = "; ".join(problems)
        elif self.mig_layout:
            errors["mig_layout"] = "only nodes of a MIG flavor have a MIG layout"
        return errors

    def devices_per_gpu(self) -> int:
        """Devices one physical GPU gives: MIG instances of the flavor's profile, else 1."""
        return devices_per_gpu(self.flavor, self.mig_layout)

    @property
    def state(self) -> NodeState:
        """The node's state in one word, the only place it is decided (the pages and the nodes
        API read it): gone from the cluster; else a drain, *draining* while work
        remains and *drained* once the control loop found it empty (``drained_at``), both
        cordoned until an admin uncordons it; else cordoned; else excluded by the cluster
        (not Ready, cordoned there, a lifecycle taint); else ready."""
        if self.gone_at is not None:
            return NodeState.GONE
        if self.cordoned and self.drain_requested_at is not None:
            return NodeState.DRAINED if self.drained_at is not None else NodeState.DRAINING
        if self.cordoned:
            return NodeState.CORDONED
        if self.cluster_exclusion:
            return NodeState.EXCLUDED
        return NodeState.READY

    def health_reasons(self, drain: DrainWait | None = None) -> list[str]:
        """Why the node cannot give all its GPUs: gone from the cluster, excluded by it, a
        drain under way (what it waits on: ``drains.drain_words``; ``drain``, when the caller
        read it for many nodes, else one query here) or done, its cordon, then each unhealthy
        GPU's reason (reads ``gpus.all()``: prefetch them for a list of nodes). The cluster's
        cordon of a node gpupool cordoned is that cordon, said once."""
        reasons = []
        own_cordon = self.cordoned and self.cluster_exclusion == CORDONED_IN_CLUSTER
        if self.gone_at is not None:
            reasons.append("gone from the cluster")
        elif self.cluster_exclusion and not own_cordon:
            reasons.append(f"the cluster takes no pods here: {self.cluster_exclusion}")
        state = self.state
        if state == NodeState.DRAINED:
            reasons.append("drained: empty, and cordoned until an admin uncordons it")
        elif state == NodeState.DRAINING:
            from gpupool.inventory.drains import drain_waits, drain_words  # (reads workloads)

            reasons.append(drain_words(drain or drain_waits([self.pk])[self.pk]))
        elif self.cordoned:
            reasons.append("cordoned: no new placements")
        reasons += [
            f"gpu {gpu.index}: {gpu.unhealthy_reason}" for gpu in self.gpus.all() if not gpu.healthy
        ]
        if held := self.foreign_gpus:
            reasons.append(f"{held} GPU{'' if held == 1 else 's'} held by other schedulers' pods")
        return reasons

    @property
    def foreign_gpus(self) -> int:
        """GPUs (MIG: instances) other schedulers' pods hold here, as the control loop last
        recorded them (``foreign_usage``), counted as the loop takes them off the node."""
        if not self.foreign_usage:
            return 0
        usage = ResourceAmounts.from_json(self.foreign_usage)
        return usage.devices(replicas_of(self.labels or {}))


# The longest reason a GPU is unhealthy for (``Gpu.unhealthy_reason``): an admin's mark is
# refused past it (the API's and the Cluster page's forms, whose input says it), the cluster
# sync's reasons are cut to it.
UNHEALTHY_REASON_MAX_LENGTH = 200


class Gpu(models.Model):
    """One physical GPU of a node, by index, with its health and why it is unhealthy."""

    node = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="gpus")
    index = models.PositiveSmallIntegerField()
    healthy = models.BooleanField(default=True)
    unhealthy_reason = models.CharField(
        max_length=UNHEALTHY_REASON_MAX_LENGTH,
        blank=True,
        help_text="Why the GPU is unhealthy (e.g. an XID error); cleared when it recovers.",
    )
    uuid = models.CharField(max_length=64, blank=True, help_text="The device UUID, when known.")

    class Meta:
        ordering = ["node__name", "index"]
        verbose_name = "GPU"
        constraints = [
            models.UniqueConstraint(fields=["node", "index"], name="gpu_unique_node_index"),
            models.CheckConstraint(
                condition=(Q(healthy=True) & Q(unhealthy_reason=""))
                | (Q(healthy=False) & ~Q(unhealthy_reason="")),
                name="gpu_unhealthy_iff_reason",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.node.name}/gpu{self.index}"

    def clean(self) -> None:
        """An unhealthy GPU says why."""
        if not self.healthy and not self.unhealthy_reason.strip():
            raise ValidationError({"unhealthy_reason": "say why the GPU is unhealthy"})

    @property
    def reported_by_cluster(self) -> bool:
        """Whether the cluster reports this GPU unhealthy, whatever recorded its mark: the sync
        marked it because the device plugin leaves it out of the node's allocatable
        (``CLUSTER_UNHEALTHY``), or the node's label ``gpupool.io/unhealthy-gpus`` (as the last
        sync recorded the node's labels) names it -- a health source's reason (an XID, the
        demo's seeded findings) on such a GPU does not make it liftable. No mark lifts the
        cluster's verdict (``do_set_gpu_health``); the sync does once the cluster offers it."""
        from gpupool.control.snapshot import CLUSTER_UNHEALTHY  # (the snapshot reads models)

        if self.unhealthy_reason == CLUSTER_UNHEALTHY:
            return True
        return self.index in named_unhealthy_gpus(self.node.labels or {})


def devices_per_gpu(flavor: Flavor, mig_layout: dict[str, Any] | None) -> int:
    """Devices one physical GPU of a node of ``flavor`` with ``mig_layout`` gives: MIG
    instances of the flavor's profile, else 1."""
    if flavor.sharing == Sharing.MIG:
        count = (mig_layout or {}).get(flavor.mig_profile, 0)
        return count if isinstance(count, int) else 0
    return 1


def takes_pods() -> Q:
    """The nodes that take new pods, as the control loop's snapshot decides it
    (``control.snapshot.read_nodes``: a node is out when an admin cordoned it or the cluster
    excludes it -- not Ready, cordoned there, a lifecycle taint, gone): not cordoned, no
    ``cluster_exclusion``, not gone. ``Node.state`` READY says the same of one node. Healthy
    capacity, the pages' and the API's, the quota checks' and the cost roll-up's, counts only
    these nodes' healthy GPUs, so they agree with the scheduler."""
    return Q(cordoned=False, cluster_exclusion="", gone_at__isnull=True)


def healthy_capacity(flavor: Flavor) -> Decimal:
    """GPUs (MIG: instances) of ``flavor`` that can be allocated: healthy, on nodes that take
    pods (``takes_pods``: not cordoned, not excluded by the cluster, not gone). One query of
    values per node (no model instance: 227 nodes cost 10-40 ms as models)."""
    nodes = (
        Node.objects.filter(takes_pods(), flavor=flavor)
        .values("pk", "mig_layout")
        .annotate(healthy_gpus=Count("gpus", filter=Q(gpus__healthy=True)))
        .values_list("mig_layout", "healthy_gpus")
        .order_by()
    )
    return Decimal(sum(gpus * devices_per_gpu(flavor, layout) for layout, gpus in nodes))
