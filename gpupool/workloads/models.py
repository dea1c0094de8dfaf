"""Workloads: pod sets, placements on nodes, and the record of every state transition."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator, RegexValidator
from django.db import models
from django.db.models import F, Q, Sum
from django.utils import timezone

from gpupool.clusters.base import JOB_KIND
from gpupool.inventory.choices import Sharing
from gpupool.inventory.models import Flavor, Node
from gpupool.number_formats import counted
from gpupool.quotas.models import PriorityClass, Queue
from gpupool.text_limits import too_many
from gpupool.workloads.choices import PENDING_REASON_CHOICES, Origin, Topology, WorkloadState

PENDING_REASONS = [reason for reason, _ in PENDING_REASON_CHOICES]

# What a pod set's pods run, as Kubernetes takes it: bounds keep one pod spec reasonable.
MAX_COMMAND_ITEMS = 256
MAX_ENV_VARS = 256
MAX_ARGUMENT_LENGTH = 4096
ENV_NAME = re.compile(r"^[-._a-zA-Z][-._a-zA-Z0-9]*$")  # Kubernetes' C_IDENTIFIER-like rule


validate_namespace = RegexValidator(
    r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$",
    "A Kubernetes namespace: lowercase letters, digits and '-', starting and ending with a "
    "letter or digit, at most 63 characters.",
)


# The longest controller kind and name a workload keeps (a kind is a DNS label, lowercased; a
# name a DNS subdomain): the cluster sync leaves longer ones out rather than fail to register.
CONTROLLER_KIND_MAX = 63
CONTROLLER_NAME_MAX = 253


def qualified_name(namespace: str, name: str) -> str:
    """A workload's name in the decision core and in scenario files: ``namespace/name``."""
    return f"{namespace}/{name}"


def copied_from_workload(
    to: type[models.Model], *, related_name: str, null: bool = False, db_index: bool = True
) -> Any:
    """A reference copied from the workload a row is about (its queue, tenant or class), kept
    on the row so usage and history are summed by them without a join: indexed (unless
    ``db_index`` is False because a composite index of the model leads with it), protected by
    the ORM (``PROTECT``: a referenced row is not deleted through Django while it is
    referenced), and without a database constraint, since the row's own key to its workload
    is constrained and the workload's keys are: a second check of the same fact at every
    COMMIT cost about 10 us a key, a fifth of the first cycle's record (docs/benchmarks.md,
    B1-loop round 7)."""
    return models.ForeignKey(
        to,
        null=null,
        blank=null,
        on_delete=models.PROTECT,
        related_name=related_name,
        db_constraint=False,
        db_index=db_index,
    )


class Workload(models.Model):
    """A job of one or more pod sets, queued in a leaf queue and scheduled as a gang."""

    namespace = models.CharField(
        max_length=63,
        default="default",
        validators=[validate_namespace],
        help_text="The Kubernetes namespace the workload's pods live in; with the name, it "
        "addresses the workload.",
    )
    name = models.CharField(max_length=253)
    queue = models.ForeignKey(Queue, on_delete=models.PROTECT, related_name="workloads")
    priority_class = models.ForeignKey(
        PriorityClass, on_delete=models.PROTECT, related_name="workloads"
    )
    submitter = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="workloads",
        # Indexed only where set (``workload_submitter_idx``): the loop's workloads have none.
        db_index=False,
    )
    min_member = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(1)],
        help_text="Pods that must be placed together (gang); empty means all pods.",
    )
    topology = models.CharField(max_length=16, choices=Topology.choices, blank=True, default="")
    protected_runtime_s = models.PositiveIntegerField(
        default=0, help_text="After it starts, for this long it is not preempted or reclaimed."
    )
    expected_runtime_s = models.PositiveIntegerField(
        null=True, blank=True, help_text="The submitter's estimate, used for start estimates."
    )
    state = models.CharField(
        max_length=16, choices=WorkloadState.choices, default=WorkloadState.PENDING
    )
    submitted_at = models.DateTimeField(default=timezone.now)
    admitted_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    # What only the running control loop knows: it writes these each cycle, nobody else does.
    last_checkpoint_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="When the running workload last checkpointed, from its pods' "
        "gpupool.io/last-checkpoint annotation (written by the control loop); an eviction "
        "loses only the progress since then.",
    )
    nominated = models.BooleanField(
        default=False,
        help_text="Pending and waiting for its victims to leave: the capacity they free is "
        "held for it, and it is served first once they are gone (written by the control loop).",
    )
    evicting_for = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="victims_leaving",
        # Indexed only where set (``workload_evicting_for_idx``): a few rows at a time are.
        db_index=False,
        help_text="Running, being evicted to make room for this pending workload, and not "
        "gone yet (written by the control loop).",
    )
    origin = models.CharField(
        max_length=16,
        choices=Origin.choices,
        default=Origin.GPUPOOL,
        help_text="Who made its pods, and so who makes them again after an eviction: gpupool "
        "(submitted through the product), a controller such as a Job, or nobody (a bare pod).",
    )
    controller_kind = models.CharField(
        max_length=CONTROLLER_KIND_MAX,
        blank=True,
        default="",
        help_text="The kind of the controller that owns its pods (Job, ReplicaSet, ...), as "
        "its pods' controlling owner reference said when the cluster sync registered it; empty "
        "for a bare pod's and gpupool's own (written by the control loop).",
    )
    controller_name = models.CharField(
        max_length=CONTROLLER_NAME_MAX,
        blank=True,
        default="",
        help_text="The name of that controller, in the workload's namespace; empty with its "
        "kind (written by the control loop).",
    )
    eviction_reason = models.CharField(
        max_length=16,
        blank=True,
        help_text="Running and being evicted (preempt, reclaim, idle, admin, ...) until its "
        "pods are gone; empty otherwise (written by the control loop).",
    )
    eviction_refusal = models.JSONField(
        null=True,
        blank=True,
        default=None,
        help_text="Running, and the eviction gpupool last asked for was refused by a "
        "PodDisruptionBudget: when, the budget, why it was evicted (admin for a drain) and for "
        "whom, on which nodes. Cleared once an eviction is accepted or no longer wanted "
        "(written by the control loop).",
    )
    idle_since = models.DateTimeField(
        null=True,
        blank=True,
        help_text="Placed, and its GPUs have done no work since then, as the utilisation source "
        "last saw them; empty while they work or when no source saw them (written by the "
        "utilisation sampler).",
    )
    idle_alerted_since = models.DateTimeField(
        null=True,
        blank=True,
        help_text="The idle spell (its idle_since) its owner and team leads were last alerted "
        "about; an alert is sent once per spell (written by the control loop).",
    )
    updated_at = models.DateTimeField(
        auto_now=True,
        db_index=True,
        help_text="When the row last changed: the control loop re-reads only what changed.",
    )
    estimated_start_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="When it is expected to start, replaying the running workloads' expected "
        "ends (written by the control loop; empty when unknown).",
    )

    class Meta:
        ordering = ["submitted_at", "name"]
        indexes = [
            models.Index(fields=["state", "queue"], name="workload_state_queue_idx"),
            # Lists page through workloads in this order (the API, the pages).
            models.Index(fields=["submitted_at", "name"], name="workload_submitted_idx"),
            # "The pending workloads of a queue": positions are counted on it (their ranks,
            # ``WorkloadExplanation.queue_rank``, read and sorted, a few hundred a queue at
            # most).
            models.Index(
                fields=["queue"],
                condition=Q(state=WorkloadState.PENDING),
                name="workload_pending_queue_idx",
            ),
            # Keys almost always empty are indexed only where set (migration 0009): a full
            # index costs an entry for every row written, the loop's included. Every lookup
            # by them (``submitter=``, ``victims_leaving``, the database's key checks when a
            # user or a workload is deleted) is an equality, which implies NOT NULL, so these
            # serve it.
            models.Index(
                fields=["submitter"],
                condition=Q(submitter__isnull=False),
                name="workload_submitter_idx",
            ),
            models.Index(
                fields=["evicting_for"],
                condition=Q(evicting_for__isnull=False),
                name="workload_evicting_for_idx",
            ),
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["namespace", "name"],
                name="workload_unique_namespace_name",
                violation_error_message="The namespace already has a workload of this name.",
            ),
            models.CheckConstraint(
                condition=Q(evicting_for__isnull=True) | ~Q(evicting_for=F("id")),
                name="workload_not_evicting_for_itself",
            ),
            models.CheckConstraint(
                condition=Q(state__in=WorkloadState.values), name="workload_state_valid"
            ),
            models.CheckConstraint(
                condition=Q(topology__in=Topology.values), name="workload_topology_valid"
            ),
            models.CheckConstraint(
                condition=Q(min_member__isnull=True) | Q(min_member__gte=1),
                name="workload_min_member_positive",
            ),
            models.CheckConstraint(
                condition=Q(started_at__isnull=True) | Q(started_at__gte=F("submitted_at")),
                name="workload_started_after_submitted",
            ),
            models.CheckConstraint(
                condition=Q(admitted_at__isnull=True) | Q(admitted_at__gte=F("submitted_at")),
                name="workload_admitted_after_submitted",
            ),
            models.CheckConstraint(
                condition=Q(finished_at__isnull=True)
                | Q(started_at__isnull=True)
                | Q(finished_at__gte=F("started_at")),
                name="workload_finished_after_started",
            ),
        ]

    def __str__(self) -> str:
        return self.name

    def qualified_name(self) -> str:
        """``namespace/name``: how the decision core and scenario files name this workload."""
        return qualified_name(self.namespace, self.name)

    def controller(self) -> str:
        """The controller that owns its pods, as "Job nlp/train-7" (its kind, its namespace and
        name); empty for a bare pod's and gpupool's own, and for a controller's registered
        before its kind was kept."""
        if self.origin != Origin.CONTROLLER or not self.controller_kind:
            return ""
        return f"{self.controller_kind} {self.namespace}/{self.controller_name}"

    def pods_when_cancelled(self, *, held_gpus: bool) -> str:
        """What the control loop does with its pods once it is cancelled
        (``control.apply.cancel_pods``), as the cancel's answer, its page and ``gpupool cancel``
        say it (``held_gpus``: it was admitted or running, so its pods may hold nodes)."""
        kind, name = self.controller_kind, self.controller_name
        if self.origin != Origin.CONTROLLER:  # gpupool's own or a bare pod: nothing remakes them
            return "the control loop deletes its pods at its next cycle"
        if not kind:  # registered before the controller was kept
            return (
                "the control loop removes its pods at its next cycle (a Job's by suspending "
                "the Job; another controller may make them again, and gpupool leaves those "
                "pending)"
            )
        if kind == JOB_KIND:
            return (
                f"its Job {self.namespace}/{name} is suspended by the control loop at its next "
                "cycle (its controller removes the pods and makes none again)"
            )
        if held_gpus:
            return (
                f"its pods are deleted; their controller {kind} {name} may make them again, "
                "and gpupool leaves those pending"
            )
        return (
            f"gpupool leaves its pods pending, never scheduled: their controller {kind} {name} "
            "would make them again"
        )

    def cancelled_words(self, *, held_gpus: bool) -> str:
        """What cancelling it does, after "<namespace/name> is cancelled: " (the cancel's
        answer, the message on its page, ``gpupool cancel``'s line)."""
        pods = self.pods_when_cancelled(held_gpus=held_gpus)
        if held_gpus:
            return f"its GPUs are released, and {pods}."
        return (
            f"it leaves queue {self.queue.name} and will not be admitted (it held no GPUs); {pods}."
        )

    # -- the last cycle's explanation (``WorkloadExplanation``), read as the workload's own

    def explanation_row(self) -> WorkloadExplanation | None:
        """The explanation the loop last wrote for this workload, None when none is kept (not
        pending, or not seen by a cycle yet). A list reads it with its rows
        (``select_related("explanation")``); otherwise one query, then kept on the instance."""
        try:
            return self.explanation
        except WorkloadExplanation.DoesNotExist:
            return None

    @property
    def pending_reason(self) -> str:
        """Why it is pending, as the last cycle explained it: the decision core's reason
        (empty when none is kept)."""
        row = self.explanation_row()
        return "" if row is None else row.reason

    @property
    def pending_detail(self) -> str:
        """The explanation as a sentence (empty when none is kept)."""
        row = self.explanation_row()
        return "" if row is None else row.detail

    @property
    def pending_facts(self) -> dict[str, Any]:
        """The explanation's facts, e.g. asked and available GPUs ({} when none is kept)."""
        row = self.explanation_row()
        return {} if row is None else dict(row.facts or {})

    @property
    def queue_rank(self) -> float | None:
        """Its place in its queue's order as the last cycle served it (None when none is
        kept): a key compared only within the queue (``WorkloadExplanation.queue_rank``)."""
        row = self.explanation_row()
        return None if row is None else row.queue_rank

    @property
    def queue_position(self) -> int | None:
        """Rank among its queue's pending workloads, 1 first, in the order the last cycle
        served them; None when not pending or not seen by a cycle yet. Counted from
        ``queue_rank`` when asked (one query), so it is current however many cycles ago the
        workload's explanation was written; a list counts its page's at once
        (``queries.fill_positions``)."""
        if _POSITION not in self.__dict__:
            self.__dict__[_POSITION] = _position_of(self)
        position: int | None = self.__dict__[_POSITION]
        return position

    def total_pods(self) -> int:
        """The number of pods over all pod sets."""
        if self.pk is None:
            return 0
        return int(self.pod_sets.aggregate(total=Sum("count"))["total"] or 0)

    def effective_min_member(self) -> int:
        """The gang minimum: min_member, or all pods when it is not set."""
        return self.min_member if self.min_member is not None else self.total_pods()

    def clean(self) -> None:
        """Leaf queue, gang minimum within the pods, protection within the queue's free cap."""
        inner = self.queue_id is not None and self.queue.children.exists()
        errors = self.rule_errors(queue_has_children=inner)
        if errors:
            raise ValidationError(errors)

    def rule_errors(self, *, queue_has_children: bool) -> dict[str, str]:
        """``clean``'s rules by field, with whether the queue has child queues given (a bulk
        registration has read that once for many workloads, so it needs no query each)."""
        errors: dict[str, str] = {}
        if self.queue_id is not None and queue_has_children:
            errors["queue"] = f"{self.queue} has child queues; workloads go to leaf queues"
        if self.pk is not None and self.min_member is not None:
            total = self.total_pods()
            if total and self.min_member > total:
                errors["min_member"] = (
                    f"min_member ({self.min_member}) exceeds the workload's {counted(total, 'pod')}"
                )
        if (
            self.queue_id is not None
            and self.priority_class_id is not None
            and self.protected_runtime_s is not None
        ):
            cap = self.queue.max_protected_runtime_s
            if (
                cap is not None
                and self.priority_class.budget_rate <= 0
                and self.protected_runtime_s > cap
            ):
                errors["protected_runtime_s"] = (
                    f"{self.protected_runtime_s}s exceeds queue {self.queue}'s free maximum of "
                    f"{cap}s; longer protection needs a budgeted priority class"
                )
        if self.admitted_at and self.submitted_at and self.admitted_at < self.submitted_at:
            errors["admitted_at"] = "a workload cannot be admitted before it was submitted"
        if self.started_at and self.submitted_at and self.started_at < self.submitted_at:
            errors["started_at"] = "a workload cannot start before it was submitted"
        if self.finished_at and self.started_at and self.finished_at < self.started_at:
            errors["finished_at"] = "a workload cannot finish before it started"
        return errors


def gpu_equivalent(gpus: int, gpu_milli: int | None) -> Decimal:
    """GPUs one pod of a pod set counts against quota (``PodSet.gpu_equivalent_per_pod``), from
    its columns: ``gpu_milli`` / 1000 on shared flavors, else ``gpus``."""
    if gpu_milli is not None:
        return Decimal(gpu_milli) / 1000
    return Decimal(gpus)


# Where a workload instance keeps its position once counted (``Workload.queue_position``).
_POSITION = "_queue_position"
# The fact the loop writes on a gang whose pods gpupool makes itself, at once
# (``control.record.CREATING_PODS``).
PODS_BEING_CREATED_FACT = "pods_being_created"


def pods_waited_for(reason: str, facts: Mapping[str, object] | None) -> int:
    """The pods a pending gang waits for the cluster to make (its explanation's
    ``missing_pods``, reason ``gang``: a Job's, a JobSet's, bare pods); 0 when it waits for
    none, as a gang of gpupool's own does, whose pods the loop makes at once
    (``pods_being_created``). Such a gang has no position and no estimated start
    (``control.estimates``): nothing here can promise when its pods come."""
    facts = facts or {}
    missing = facts.get("missing_pods")
    if reason != "gang" or facts.get(PODS_BEING_CREATED_FACT) or type(missing) is not int:
        return 0
    return max(missing, 0)


def _position_of(workload: Workload) -> int | None:
    """The workload's position counted from the ranks of its queue's pending workloads; none
    for a gang that waits for its pods (``pods_waited_for``)."""
    if workload.state != WorkloadState.PENDING:
        return None  # no explanation read: it would not count
    if pods_waited_for(workload.pending_reason, workload.pending_facts):
        return None
    rank = workload.queue_rank
    if rank is None:
        return None
    return Workload.objects.filter(
        queue_id=workload.queue_id,
        state=WorkloadState.PENDING,
        explanation__queue_rank__lte=rank,
    ).count()


def set_position(workload: Workload, position: int | None) -> None:
    """Give ``workload`` its position as counted for a whole list at once."""
    workload.__dict__[_POSITION] = position


class WorkloadExplanation(models.Model):
    """Why a pending workload waits, as the last cycle explained it, and its place in its
    queue's order (written by the control loop; the workload's ``pending_reason``,
    ``pending_detail``, ``pending_facts`` and ``queue_rank`` read it).

    A table of its own, keyed by the workload and with no other index: the loop rewrites
    hundreds of explanations a cycle and a first cycle explains every pending workload
    (5,180 at B1's size). On the workload's own row each was a wider row version with an
    entry in every one of its indexes (no room on a full page for a heap-only update);
    here a first explanation is an insert and a rewrite stays on its page (the table's fill
    factor, migration 0010). A workload admitted loses its explanation (the row is deleted);
    readers ask the workload's state before its explanation, as a workload that ended while
    pending may keep its last one."""

    workload = models.OneToOneField(
        Workload, on_delete=models.CASCADE, primary_key=True, related_name="explanation"
    )
    reason = models.CharField(
        max_length=32,
        choices=PENDING_REASON_CHOICES,
        blank=True,
        default="",
        help_text="The decision core's reason it waits.",
    )
    detail = models.TextField(blank=True, help_text="The explanation as a sentence.")
    facts = models.JSONField(
        default=dict, blank=True, help_text="The explanation's facts, e.g. asked and free GPUs."
    )
    queue_rank = models.FloatField(
        null=True,
        blank=True,
        help_text="Its place in its queue's order as the last cycle served it: a key compared "
        "only within the queue, kept while the order around it holds (empty when not ranked). "
        "The position is counted from it when read (queue_position).",
    )

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(reason="") | Q(reason__in=PENDING_REASONS),
                name="explanation_reason_valid",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.workload_id}: {self.reason or '-'}"


class PodSet(models.Model):
    """A group of identical pods of a workload: count, GPUs (or milli-GPU) per pod, CPU, memory."""

    workload = models.ForeignKey(Workload, on_delete=models.CASCADE, related_name="pod_sets")
    name = models.CharField(max_length=63, default="main")
    count = models.PositiveIntegerField(default=1, validators=[MinValueValidator(1)])
    gpus = models.PositiveSmallIntegerField(default=0, help_text="GPUs (MIG: instances) per pod.")
    gpu_milli = models.PositiveSmallIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(1), MaxValueValidator(1000)],
        help_text="Shared flavors only: the fraction of one GPU per pod, 1..1000.",
    )
    flavor = models.ForeignKey(
        Flavor, null=True, blank=True, on_delete=models.PROTECT, related_name="pod_sets"
    )
    cpu = models.DecimalField(
        max_digits=8, decimal_places=3, default=Decimal(0), validators=[MinValueValidator(0)]
    )
    memory_gb = models.DecimalField(
        max_digits=10, decimal_places=3, default=Decimal(0), validators=[MinValueValidator(0)]
    )
    image = models.CharField(
        max_length=512,
        blank=True,
        help_text="The container image its pods run, e.g. nvcr.io/nvidia/pytorch:24.05-py3 "
        "(empty for pods that Kubernetes created, which gpupool only schedules).",
    )
    command = models.JSONField(
        default=list,
        blank=True,
        help_text="The container's command and its arguments, as a list of strings (empty: "
        "the image's entrypoint).",
    )
    env = models.JSONField(
        default=dict,
        blank=True,
        help_text="Environment variables of its pods: an object of names to string values.",
    )

    class Meta:
        ordering = ["workload__name", "name"]
        constraints = [
            models.UniqueConstraint(fields=["workload", "name"], name="podset_unique_name"),
            models.CheckConstraint(condition=Q(count__gte=1), name="podset_count_positive"),
            models.CheckConstraint(
                condition=Q(gpus=0) | Q(flavor__isnull=False), name="podset_gpus_need_flavor"
            ),
            models.CheckConstraint(
                condition=Q(gpu_milli__isnull=True) | Q(gpu_milli__gte=1, gpu_milli__lte=1000),
                name="podset_gpu_milli_range",
            ),
            models.CheckConstraint(
                condition=Q(cpu__gte=0) & Q(memory_gb__gte=0), name="podset_resources_non_negative"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.workload.name}/{self.name}"

    def gpu_equivalent_per_pod(self) -> Decimal:
        """GPUs one pod counts against quota: gpu_milli / 1000 on shared flavors, else gpus."""
        return gpu_equivalent(self.gpus, self.gpu_milli)

    def flavors(self) -> tuple[Flavor, ...]:
        """The flavors this pod set may run on, in order: ``flavor``, then its further choices."""
        if self.flavor is None:
            return ()
        return (self.flavor, *(choice.flavor for choice in self.flavor_choices.all()))

    def flavor_names(self) -> tuple[str, ...]:
        """Names of ``flavors()``: what the core's ``PodSetInfo.flavors`` takes."""
        return tuple(flavor.name for flavor in self.flavors())

    def flavor_choices_errors(self, choices: Sequence[Flavor]) -> list[str]:
        """Why ``choices`` (further flavors after ``flavor``, in order) do not fit; [] if fine."""
        if not choices:
            return []
        if self.flavor is None or not self.gpus:
            return ["only a pod set that asks for GPUs and names its first flavor has more choices"]
        errors: list[str] = []
        known = set(
            Flavor.objects.filter(pk__in=[f.pk for f in choices]).values_list("pk", flat=True)
        )
        missing = [f.name for f in choices if f.pk not in known]
        if missing:
            errors.append(f"unknown flavors: {', '.join(missing)}")
        names = [self.flavor.name, *(f.name for f in choices)]
        repeated = sorted({name for name in names if names.count(name) > 1})
        if repeated:
            errors.append(f"each flavor is chosen once; repeated: {', '.join(repeated)}")
        shared = Sharing.SHARED
        mixed = [
            f.name for f in choices if (f.sharing == shared) != (self.flavor.sharing == shared)
        ]
        if mixed:
            kind = "shared" if self.flavor.sharing == shared else "not shared"
            errors.append(
                f"{self.flavor} is {kind}, so every choice must be too "
                f"(gpu_milli asks a fraction only of shared GPUs): {', '.join(mixed)}"
            )
        return errors

    def clean(self) -> None:
        """A pod asking GPUs names a flavor; milli-GPU fractions only on shared flavors."""
        errors: dict[str, str] = {}
        flavor = self.flavor if self.flavor_id is not None else None
        if self.gpus and flavor is None:
            errors["flavor"] = "a pod set that asks for GPUs names their flavor"
        if flavor is not None and flavor.sharing == Sharing.SHARED:
            if self.gpu_milli is None:
                errors["gpu_milli"] = f"{flavor} is shared: say the fraction per pod (1..1000)"
            if self.gpus != 1:
                errors["gpus"] = f"a pod on shared flavor {flavor} asks for 1 GPU, not {self.gpus}"
        elif self.gpu_milli is not None:
            errors["gpu_milli"] = "only pods on a shared flavor ask for a milli-GPU fraction"
        command_error = _command_errors(self.command)
        if command_error:
            errors["command"] = command_error
        env_error = _env_errors(self.env)
        if env_error:
            errors["env"] = env_error
        if errors:
            raise ValidationError(errors)


def _command_errors(command: object) -> str | None:
    """Why ``command`` is not a container command (a list of strings), or None."""
    if not isinstance(command, list):
        return "must be a list of strings, the command and its arguments"
    if len(command) > MAX_COMMAND_ITEMS:
        return too_many(MAX_COMMAND_ITEMS, len(command))
    for index, item in enumerate(command):
        if not isinstance(item, str):
            return f"item {index} must be a string, not {type(item).__name__}"
        if len(item) > MAX_ARGUMENT_LENGTH:
            return f"item {index} is longer than {MAX_ARGUMENT_LENGTH} characters"
    return None


def _env_errors(env: object) -> str | None:
    """Why ``env`` is not a map of environment variable names to strings, or None."""
    if not isinstance(env, dict):
        return "must be an object of variable names to string values"
    if len(env) > MAX_ENV_VARS:
        return too_many(MAX_ENV_VARS, len(env), "variables")
    for name, value in env.items():
        if not isinstance(name, str) or not ENV_NAME.match(name):
            return (
                f"{name!r} is not a variable name: letters, digits, '_', '-' and '.', not "
                "starting with a digit"
            )
        if not isinstance(value, str):
            return f"{name} must be a string, not {type(value).__name__}"
        if len(value) > MAX_ARGUMENT_LENGTH:
            return f"{name} is longer than {MAX_ARGUMENT_LENGTH} characters"
    return None


class PodSetFlavorChoice(models.Model):
    """A further flavor a pod set may run on, ranked 1, 2, ... after its first choice ``flavor``."""

    pod_set = models.ForeignKey(PodSet, on_delete=models.CASCADE, related_name="flavor_choices")
    rank = models.PositiveSmallIntegerField(
        validators=[MinValueValidator(1)], help_text="1 = tried right after the pod set's flavor."
    )
    flavor = models.ForeignKey(Flavor, on_delete=models.PROTECT, related_name="+")

    class Meta:
        ordering = ["pod_set", "rank"]
        constraints = [
            models.UniqueConstraint(fields=["pod_set", "rank"], name="podsetflavorchoice_rank"),
            models.UniqueConstraint(fields=["pod_set", "flavor"], name="podsetflavorchoice_once"),
            models.CheckConstraint(condition=Q(rank__gte=1), name="podsetflavorchoice_rank_min"),
        ]

    def __str__(self) -> str:
        return f"{self.pod_set} choice {self.rank}: {self.flavor}"


class Placement(models.Model):
    """Where one pod of a pod set runs: its node, the GPU indices, and the milli share."""

    workload = models.ForeignKey(Workload, on_delete=models.CASCADE, related_name="placements")
    # Not indexed alone: ``placement_unique_pod`` (pod_set, pod_index) leads with it.
    pod_set = models.ForeignKey(
        PodSet, on_delete=models.CASCADE, related_name="placements", db_index=False
    )
    pod_index = models.PositiveIntegerField(default=0)
    node = models.ForeignKey(Node, on_delete=models.PROTECT, related_name="placements")
    gpu_indices = models.JSONField(default=list, blank=True)
    milli = models.PositiveSmallIntegerField(
        null=True, blank=True, validators=[MinValueValidator(1), MaxValueValidator(1000)]
    )
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["workload__name", "pod_set__name", "pod_index"]
        constraints = [
            models.UniqueConstraint(fields=["pod_set", "pod_index"], name="placement_unique_pod"),
            models.CheckConstraint(
                condition=Q(milli__isnull=True) | Q(milli__gte=1, milli__lte=1000),
                name="placement_milli_range",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.pod_set}[{self.pod_index}] on {self.node.name} {self.gpu_indices}"

    def clean(self) -> None:
        """The pod is one of its pod set's, on a node of its flavor, on that node's GPUs."""
        errors: dict[str, str] = {}
        pod_set = self.pod_set if self.pod_set_id is not None else None
        node = self.node if self.node_id is not None else None
        if pod_set is not None:
            if self.workload_id is not None and pod_set.workload_id != self.workload_id:
                errors["pod_set"] = f"pod set {pod_set} belongs to another workload"
            if self.pod_index is not None and self.pod_index >= pod_set.count:
                errors["pod_index"] = (
                    f"pod index {self.pod_index} is outside pod set {pod_set.name}'s "
                    f"{counted(pod_set.count, 'pod')}"
                )
        indices = self.gpu_indices
        if not isinstance(indices, list) or not all(
            isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in indices
        ):
            errors["gpu_indices"] = "must be a list of GPU indices (whole numbers from 0)"
        elif len(set(indices)) != len(indices):
            errors["gpu_indices"] = f"GPU indices repeat: {indices}"
        elif node is not None:
            # On MIG nodes the indices count instances: instance i lives on GPU i // per_gpu.
            per_gpu = max(node.devices_per_gpu(), 1)
            gpus = {gpu.index for gpu in node.gpus.all()}
            missing = [i for i in indices if i // per_gpu not in gpus]
            if missing:
                errors["gpu_indices"] = f"node {node} has no GPU (or MIG instance) {missing}"
            elif pod_set is not None and pod_set.flavor_id is not None:
                if node.flavor_id != pod_set.flavor_id:
                    errors["node"] = (
                        f"node {node} is {node.flavor}; the pod set asks for {pod_set.flavor}"
                    )
                elif len(indices) != pod_set.gpus:
                    errors["gpu_indices"] = (
                        f"the pod asks for {pod_set.gpus} GPUs; {len(indices)} are placed"
                    )
        if pod_set is not None:
            if pod_set.gpu_milli is not None and self.milli != pod_set.gpu_milli:
                errors["milli"] = f"the pod asks for {pod_set.gpu_milli} milli-GPU"
            elif pod_set.gpu_milli is None and self.milli is not None:
                errors["milli"] = "only pods on a shared flavor have a milli share"
        if errors:
            raise ValidationError(errors)


class WorkloadTransition(models.Model):
    """One change of a workload's state, with when, why and who (empty: the control loop)."""

    workload = models.ForeignKey(Workload, on_delete=models.CASCADE, related_name="transitions")
    from_state = models.CharField(max_length=16, choices=WorkloadState.choices, blank=True)
    to_state = models.CharField(max_length=16, choices=WorkloadState.choices)
    at = models.DateTimeField()
    reason = models.CharField(max_length=500)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="workload_transitions",
        # Indexed only where set (``workloadtransition_actor_idx``): the loop's have none.
        db_index=False,
    )

    class Meta:
        ordering = ["at", "id"]
        indexes = [
            models.Index(
                fields=["actor"],
                condition=Q(actor__isnull=False),
                name="workloadtransition_actor_idx",
            ),
        ]
        constraints = [
            models.CheckConstraint(
                condition=~Q(from_state=F("to_state")), name="workloadtransition_changes_state"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.workload.name}: {self.from_state or '-'} -> {self.to_state} ({self.reason})"
