"""API of workloads, for the people who run them, addressed as Kubernetes does: by namespace
and name (``/api/v1/workloads/<namespace>/<name>/``).

- ``GET /workloads/``: the caller's tenants' workloads (admins: all), filtered by state, queue,
  tenant, namespace, submitter and pending reason;
- ``POST /workloads/``: submit (``do_submit_workload``); ``POST /workloads/dry-run/``: would it
  fit now, with the same body (quota, then capacity, then placement, from the core);
- ``GET /workloads/<namespace>/<name>/``: its story: pod sets, placements, the timeline of
  transitions, the current explanation with its numbers, position and estimated start, and
  who preempted it, why and what it cost (each preemption as the preemptions API says it,
  ``PreemptionEventSerializer``: for a drain, which node, who drained it and why);
- ``POST /workloads/<namespace>/<name>/cancel/``: cancel, running work included
  (``do_cancel_workload``: its submitter, a lead of its tenant or an admin).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from datetime import datetime
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db.models import F, Manager, QuerySet
from django_filters import rest_framework as filters
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_field
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.routers import BaseRouter

from gpupool.accounting.models import PreemptionEvent
from gpupool.api.access import request_access
from gpupool.api.fields import NamedChoiceField, NameRelatedField, StrictCharField
from gpupool.api.filters import NameFilter, StrictFilterBackend, StrictOrderingFilter
from gpupool.api.permissions import TENANT_ROLES, ActionRoles, TenantScoped
from gpupool.api.rows import PlannedRows
from gpupool.api.strict import StrictInput
from gpupool.api.tables import CSVExport
from gpupool.clusters.grouping import MAX_PODS
from gpupool.control.api import PoolNotPlannable
from gpupool.control.snapshot import SnapshotError
from gpupool.inventory.models import Flavor
from gpupool.inventory.units import GPU_UNIT, MIG_UNIT, FlavorUnits, freed_unit, mig_node_names
from gpupool.quotas.models import PriorityClass, Queue
from gpupool.scheduler.explain import never_fits
from gpupool.scheduler.scenario import MAX_GPUS_PER_NODE, MAX_POD_SETS
from gpupool.tenancy.models import Tenant
from gpupool.text_limits import too_many
from gpupool.workloads.actions import (
    MAX_EXPECTED_RUNTIME_S,
    TOO_LONG_RUNTIME,
    TOO_MANY_PODS,
    PodSetSpec,
    do_cancel_workload,
    pod_set_spec_errors,
)
from gpupool.workloads.choices import (
    PENDING_REASON_CHOICES,
    PLACED_STATES,
    Topology,
    WorkloadState,
)
from gpupool.workloads.models import (
    MAX_ARGUMENT_LENGTH,
    MAX_COMMAND_ITEMS,
    MAX_ENV_VARS,
    PodSet,
    Workload,
    pods_waited_for,
    set_position,
)
from gpupool.workloads.queries import (
    AS_WRITTEN,
    Asks,
    EvictionDrain,
    NamesSeen,
    Submission,
    asks_by_workload,
    dry_run_submission,
    estimate_not_before,
    eviction_refusal,
    explain,
    fill_positions,
    growths,
    lost_gpu_hours,
    node_drains,
    refused_workloads,
    sees_preemptor,
    set_aside_and_waiting,
    total_gpus,
    transition_reason,
    unit_of_workload,
    workload_list,
    workload_story,
)

# A workload's name becomes its pods' label and the stem of their names: a DNS label.
NAME_PATTERN = r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$"
NAMESPACE_PATTERN = r"[a-z0-9](?:[-a-z0-9]{0,61}[a-z0-9])?"
# What the refusal of a name (or namespace) that is no DNS label says: the rule of the two
# patterns above, with the fields' max_length of 63.
NOT_A_DNS_LABEL: dict[str, Any] = {
    "invalid": "Enter a DNS label (RFC 1123): 1 to 63 characters, each a lower-case letter "
    "a-z, a digit 0-9 or '-', starting and ending with a letter or digit."
}
MAX_SECONDS = 2**31 - 1
# What a protected runtime past the column's bound is refused with, in the field's unit.
TOO_LONG_PROTECTION = f"at most {MAX_SECONDS} seconds (about 68 years)"


# ----------------------------------------------------------------------------- input


class PodSetInputSerializer(StrictInput, serializers.Serializer[Any]):
    """One group of identical pods: how many, what each asks for, and what it runs."""

    name = serializers.RegexField(
        NAME_PATTERN,
        max_length=63,
        default="main",
        error_messages=NOT_A_DNS_LABEL,
        help_text="Unique within the workload.",
    )
    count = serializers.IntegerField(
        min_value=1,
        max_value=MAX_PODS,
        error_messages={"max_value": TOO_MANY_PODS},
        help_text=f"Pods; at most {MAX_PODS} in all the workload's pod sets.",
    )
    # No bound of its own: the submission's rule says the flavor's largest node, or past it
    # the core's bound (``workloads.actions.pod_set_spec_errors``), whatever the number.
    gpus = serializers.IntegerField(
        min_value=0,
        default=0,
        help_text="GPUs (MIG: instances) per pod, at most the largest node of its flavor's "
        f"(a pod runs on one node), and at most {MAX_GPUS_PER_NODE}; 0 for pods that need "
        "none (e.g. a launcher).",
    )
    gpu_milli = serializers.IntegerField(
        min_value=1,
        max_value=1000,
        required=False,
        allow_null=True,
        help_text="Shared flavors only: the fraction of one GPU per pod.",
    )
    flavor = NameRelatedField(
        slug_field="name",
        queryset=Flavor.objects.all(),
        required=False,
        allow_null=True,
        help_text="The first flavor to run on (needed when the pods ask for GPUs).",
    )
    flavor_choices = serializers.ListField(
        child=NameRelatedField(slug_field="name", queryset=Flavor.objects.all()),
        required=False,
        default=list,
        max_length=15,
        help_text="Further flavors it may run on, in order of preference.",
    )
    cpu = serializers.DecimalField(
        max_digits=8,
        decimal_places=3,
        min_value=0,
        default=Decimal(0),
        help_text="CPU cores per pod.",
    )
    memory_gb = serializers.DecimalField(
        max_digits=10,
        decimal_places=3,
        min_value=0,
        default=Decimal(0),
        help_text="GB of memory per pod.",
    )
    image = serializers.CharField(max_length=512, help_text="The container image its pods run.")
    command = serializers.ListField(
        child=StrictCharField(
            max_length=MAX_ARGUMENT_LENGTH, allow_blank=True, trim_whitespace=False
        ),
        required=False,
        default=list,
        max_length=MAX_COMMAND_ITEMS,
        help_text="The command and its arguments, strings (empty: the image's entrypoint).",
    )
    env = serializers.DictField(
        child=StrictCharField(
            max_length=MAX_ARGUMENT_LENGTH, allow_blank=True, trim_whitespace=False
        ),
        required=False,
        default=dict,
        help_text="Environment variables: names to values, strings.",
    )

    def validate_env(self, value: dict[str, str]) -> dict[str, str]:
        """At most MAX_ENV_VARS variables (their names are checked by the pod set's rules)."""
        if len(value) > MAX_ENV_VARS:
            raise serializers.ValidationError(too_many(MAX_ENV_VARS, len(value), "variables"))
        return value


def pod_set_spec(item: Mapping[str, Any]) -> PodSetSpec:
    """A pod set of a validated body (``PodSetInputSerializer``'s) as the action takes it."""
    return PodSetSpec(
        count=item["count"],
        gpus=item["gpus"],
        flavor=item.get("flavor"),
        gpu_milli=item.get("gpu_milli"),
        cpu=item["cpu"],
        memory_gb=item["memory_gb"],
        name=item["name"],
        flavor_choices=list(item["flavor_choices"]),
        image=item["image"],
        command=list(item["command"]),
        env=dict(item["env"]),
    )


def pod_set_size_refusals(pod_sets: Any, refused: Any) -> dict[int, dict[str, Any]]:
    """The errors of a refused body's ``pod_sets`` (``refused``: DRF's, by index, or None
    where they had none) with the size rule's refusal of each pod set that is readable (all
    its fields valid) and names its flavor; {} when none adds one. A list the body's own
    bounds refuse (not a list, none, more than ``MAX_POD_SETS``) is not judged."""
    if not isinstance(pod_sets, list) or not 0 < len(pod_sets) <= MAX_POD_SETS:
        return {}
    if isinstance(refused, list):  # DRF's other shape of a list's errors: one per entry
        refused = dict(enumerate(refused))
    refused = {} if refused is None else refused
    if not isinstance(refused, Mapping) or not all(
        isinstance(index, int) and isinstance(item, Mapping) for index, item in refused.items()
    ):
        return {}  # the list itself was refused (by its bounds), not its pod sets
    errors = {index: dict(item) for index, item in refused.items() if item}
    added = False
    for index, item in enumerate(pod_sets):
        if index in errors:
            continue  # not readable: its own refusal speaks
        reader = PodSetInputSerializer(data=item)
        if not reader.is_valid() or reader.validated_data.get("flavor") is None:
            continue
        for field, why in pod_set_spec_errors(pod_set_spec(reader.validated_data)).items():
            errors.setdefault(index, {})[field] = [why]
            added = True
    return dict(sorted(errors.items())) if added else {}


class WorkloadInputSerializer(StrictInput, serializers.Serializer[Any]):
    """A workload to submit: where it queues, its contract and its pod sets."""

    namespace = serializers.RegexField(
        f"^{NAMESPACE_PATTERN}$",
        max_length=63,
        required=False,
        error_messages=NOT_A_DNS_LABEL,
        help_text="A namespace the queue's tenant owns (default: its first).",
    )
    name = serializers.RegexField(
        NAME_PATTERN,
        max_length=63,
        error_messages=NOT_A_DNS_LABEL,
        help_text="Unique in its namespace; a DNS label.",
    )
    queue = NameRelatedField(
        slug_field="name",
        queryset=Queue.objects.all(),
        help_text="A leaf queue of a tenant you belong to.",
    )
    priority_class = NameRelatedField(
        slug_field="name",
        queryset=PriorityClass.objects.all(),
        required=False,
        allow_null=True,
        help_text="Default: the pool's default class.",
    )
    min_member = serializers.IntegerField(
        min_value=1,
        max_value=MAX_PODS,
        required=False,
        allow_null=True,
        help_text="Pods that must run together (default: all).",
    )
    topology = NamedChoiceField(
        choices=Topology.choices,
        default="",
        help_text="'domain': all pods in one NVLink domain; 'preferred': one if possible.",
    )
    protected_runtime_s = serializers.IntegerField(
        min_value=0,
        max_value=MAX_SECONDS,
        error_messages={"max_value": TOO_LONG_PROTECTION},
        required=False,
        allow_null=True,
        help_text="Seconds after its start during which it is not preempted (default: the "
        "queue's); past the queue's free maximum it needs a budgeted class.",
    )
    expected_runtime_s = serializers.IntegerField(
        min_value=1,
        max_value=MAX_EXPECTED_RUNTIME_S,
        error_messages={"max_value": TOO_LONG_RUNTIME},
        required=False,
        allow_null=True,
        help_text="How long it runs, in seconds, for everyone's start estimates: at most "
        f"{MAX_EXPECTED_RUNTIME_S} (366 days).",
    )
    pod_sets = PodSetInputSerializer(many=True)

    def to_internal_value(self, data: Any) -> Any:
        """The validated body; a refusal of it names, with the body's other errors, each pod
        set that could never run (the submission's size rule,
        ``workloads.actions.pod_set_spec_errors``, said by the action where the body is
        read), so that a body wrong in both is told both at once."""
        try:
            return super().to_internal_value(data)
        except serializers.ValidationError as refusal:
            detail: Any = refusal.detail
            if isinstance(detail, dict) and isinstance(data, Mapping):
                sizes = pod_set_size_refusals(data.get("pod_sets"), detail.get("pod_sets"))
                if sizes:
                    detail = {**detail, "pod_sets": sizes}
            raise serializers.ValidationError(detail) from None

    def validate_pod_sets(self, value: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """One to MAX_POD_SETS pod sets, the decision core's bound (said here so that the error
        names ``pod_sets``), of MAX_PODS pods in all."""
        if not value:
            raise serializers.ValidationError("a workload has at least one pod set")
        if len(value) > MAX_POD_SETS:
            raise serializers.ValidationError(too_many(MAX_POD_SETS, len(value), "pod sets"))
        pods = sum(pod_set["count"] for pod_set in value)
        if pods > MAX_PODS:
            raise serializers.ValidationError(f"{pods} pods in all; {TOO_MANY_PODS}")
        return value

    def submission(self) -> Submission:
        """The validated body as the action takes it."""
        data = self.validated_data
        specs = [pod_set_spec(item) for item in data["pod_sets"]]
        return Submission(
            name=data["name"],
            queue=data["queue"],
            pod_sets=specs,
            namespace=data.get("namespace"),
            priority_class=data.get("priority_class"),
            min_member=data.get("min_member"),
            topology=data["topology"],
            protected_runtime_s=data.get("protected_runtime_s"),
            expected_runtime_s=data.get("expected_runtime_s"),
        )


class DryRunInputSerializer(WorkloadInputSerializer):
    """A workload to try (the submission's body; the name may be left out)."""

    name = serializers.RegexField(
        NAME_PATTERN,
        max_length=63,
        required=False,
        error_messages=NOT_A_DNS_LABEL,
        help_text="Optional: a name that is not taken in the namespace.",
    )

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        """A throwaway name when none is given."""
        attrs.setdefault("name", f"dry-run-{uuid.uuid4().hex[:12]}")
        return attrs


class CancelInputSerializer(StrictInput, serializers.Serializer[Any]):
    """Why the workload is cancelled (optional)."""

    reason = serializers.CharField(max_length=400, required=False, allow_blank=True, default="")


# ----------------------------------------------------------------------------- output


class PodSetSerializer(PlannedRows, serializers.ModelSerializer[PodSet]):
    """A pod set as submitted."""

    flavor: serializers.SlugRelatedField[Flavor] = NameRelatedField(
        slug_field="name", read_only=True, allow_null=True
    )
    flavor_choices = serializers.SerializerMethodField()

    class Meta:
        model = PodSet
        fields = (
            "name",
            "count",
            "gpus",
            "gpu_milli",
            "flavor",
            "flavor_choices",
            "cpu",
            "memory_gb",
            "image",
            "command",
            "env",
        )
        read_only_fields = fields

    def get_flavor_choices(self, pod_set: PodSet) -> list[str]:
        """Further flavors, in order."""
        return [choice.flavor.name for choice in pod_set.flavor_choices.all()]


class PlacementSerializer(PlannedRows, serializers.Serializer[Any]):
    """Where one pod runs."""

    pod_set = serializers.CharField(source="pod_set.name")
    pod_index = serializers.IntegerField()
    node = serializers.CharField(source="node.name")
    gpu_indices = serializers.ListField(child=serializers.IntegerField())
    milli = serializers.IntegerField(allow_null=True)


class GrowthSerializer(serializers.Serializer[Any]):
    """An elastic gang grew into free capacity (the grow phase): when, from and to how many
    pods, and why."""

    at = serializers.DateTimeField()
    from_pods = serializers.IntegerField()
    to_pods = serializers.IntegerField()
    reason = serializers.CharField()


class TransitionSerializer(PlannedRows, serializers.Serializer[Any]):
    """One step of the workload's history: from, to, when, why and who (null: the loop)."""

    from_state = serializers.CharField()
    to_state = serializers.CharField()
    at = serializers.DateTimeField()
    reason = serializers.SerializerMethodField(
        help_text="Why it moved, without repeating the state it moved to "
        '(``transition_reason``): a move to admitted says "quota and capacity allow it".'
    )
    actor = serializers.CharField(source="actor.username", allow_null=True, default=None)

    @extend_schema_field(serializers.CharField())
    def get_reason(self, move: Any) -> str:
        """The recorded reason, said once (``transition_reason``)."""
        return transition_reason(move.to_state, move.reason)


# What ``waits_for_pods`` says, in the explanation and in a list's row alike.
WAITS_FOR_PODS_HELP = (
    "A pending gang that waits for pods its controller has not created yet (a Job's, a "
    "JobSet's, bare pods: reason gang, not gpupool's own pods, which it makes at once): it has "
    "no position and no estimated start until they exist"
)


class ExplanationSerializer(serializers.Serializer[Any]):
    """Where the workload stands, as the last cycle explained it."""

    state = serializers.CharField()
    reason = serializers.CharField(help_text="The core's reason code; empty unless pending.")
    detail = serializers.CharField(help_text="The reason as a sentence, with its numbers.")
    facts = serializers.DictField(
        help_text="The numbers behind it (asked, available, ...). A workload is named only "
        "to admins and its own team: another team's victims are left out of victims (how "
        "many of which queue stays in victim_queues), and held_for is left out where it is "
        "another team's, which detail and summary then call \"another team's workload\"."
    )
    queue_position = serializers.IntegerField(allow_null=True)
    estimated_start_at = serializers.DateTimeField(allow_null=True)
    estimate_learned = serializers.BooleanField(
        allow_null=True, help_text="Whether the estimate rests on runtimes learned from history."
    )
    estimate_not_before = serializers.DateTimeField(
        allow_null=True,
        help_text="No estimated start: the estimates looked this far ahead without it starting.",
    )
    estimate_passed = serializers.BooleanField(
        help_text="The estimated start (or estimate_not_before) is already before the pool's "
        "clock: estimates are refreshed about once a minute, so the work is due to start, "
        "not still to come."
    )
    never_fits = serializers.BooleanField(
        help_text="Pending work its queue's capability or the pool can never hold as asked: "
        "set aside, with no position and no estimated start."
    )
    waits_for_pods = serializers.BooleanField(
        help_text=WAITS_FOR_PODS_HELP + " (facts.missing_pods: how many)."
    )
    summary = serializers.CharField(help_text="One sentence for people.")


# Where a list of preemptions keeps, in its serializer context, the drains of its events by
# event id (``node_drains``) while it renders.
PAGE_DRAINS = "page_drains"
# And which of its events' nodes are of a MIG flavor (``inventory.units.mig_node_names``).
PAGE_MIG_NODES = "page_mig_nodes"


class DrainSerializer(serializers.Serializer[EvictionDrain]):
    """A node's drain that evicted the victim: the node, who drained it, why and when."""

    node = serializers.CharField()
    drained_by = serializers.CharField(source="by")
    reason = serializers.CharField()
    drained_at = serializers.DateTimeField(source="at")


class PreemptionListSerializer(serializers.ListSerializer[PreemptionEvent]):
    """Preemptions (a page of the Preemptions API, a workload's in its detail): the drains
    that explain their admin evictions read for all of them in one query (none when none is
    an admin eviction with its nodes), and which of their nodes are of a MIG flavor in one
    more (none when no event has its nodes)."""

    def to_representation(self, data: Any) -> list[Any]:
        """The rows, with ``PAGE_DRAINS`` and ``PAGE_MIG_NODES`` in the context while they
        render."""
        rows = list(data.all() if isinstance(data, Manager) else data)
        self.context[PAGE_DRAINS] = node_drains(
            (row.pk, row.reason, row.at, row.nodes) for row in rows
        )
        self.context[PAGE_MIG_NODES] = mig_node_names(
            name for row in rows for name in row.nodes or ()
        )
        try:
            return super().to_representation(rows)
        finally:
            del self.context[PAGE_DRAINS]
            del self.context[PAGE_MIG_NODES]


class PreemptionEventSerializer(PlannedRows, serializers.ModelSerializer[PreemptionEvent]):
    """A preemption, as the Preemptions API and a workload's detail both say it: when, why,
    what it freed and cost, and who caused it -- the preemptor's queue, tenant and class for
    everyone who sees the event; its name and owner only for admins and the preemptor's own
    tenant -- with the nodes the victim ran on and, for an admin eviction, the drain of those
    nodes that caused it: which node, who drained it and why (empty for an eviction no drain
    explains, and for events recorded before their nodes were kept). A victim of another
    tenant (the preemptions the caller's work caused: ``?side=caused``) is shown as a victim's
    tenant sees the preemptor: its queue and tenant, and neither its name nor its nodes."""

    victim = serializers.SerializerMethodField()
    victim_queue: serializers.SlugRelatedField[Queue] = NameRelatedField(
        slug_field="name", read_only=True
    )
    victim_tenant: serializers.SlugRelatedField[Tenant] = NameRelatedField(
        slug_field="name", read_only=True, allow_null=True
    )
    preemptor = serializers.SerializerMethodField()
    preemptor_owner = serializers.SerializerMethodField()
    preemptor_queue: serializers.SlugRelatedField[Queue] = NameRelatedField(
        slug_field="name", read_only=True, allow_null=True
    )
    preemptor_tenant: serializers.SlugRelatedField[Tenant] = NameRelatedField(
        slug_field="name", read_only=True, allow_null=True
    )
    preemptor_class = serializers.SerializerMethodField()
    unit = serializers.SerializerMethodField(
        help_text='What gpus_freed counts: "MIG instance" for a victim stopped on a MIG '
        'flavor\'s nodes only (the MIG instances it held, never added to GPUs), else "GPU" '
        "(an event recorded before its nodes were kept too), as the Preemptions page says it."
    )
    nodes = serializers.SerializerMethodField()
    drains = serializers.SerializerMethodField()

    class Meta:
        model = PreemptionEvent
        fields = (
            "id",
            "at",
            "reason",
            "victim",
            "victim_queue",
            "victim_tenant",
            "preemptor",
            "preemptor_owner",
            "preemptor_queue",
            "preemptor_tenant",
            "preemptor_class",
            "gpus_freed",
            "unit",
            "lost_gpu_hours",
            "cycle",
            "nodes",
            "drains",
        )
        read_only_fields = fields
        list_serializer_class = PreemptionListSerializer

    def _shows_preemptor(self, event: PreemptionEvent) -> bool:
        return event.preemptor is not None and sees_preemptor(
            request_access(self.context["request"]), event
        )

    def _shows_victim(self, event: PreemptionEvent) -> bool:
        return request_access(self.context["request"]).sees_tenant(event.victim_tenant_id)

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_victim(self, event: PreemptionEvent) -> str | None:
        """The victim as ``namespace/name``, where the caller may see it (its own tenant's,
        or admins)."""
        return event.victim.qualified_name() if self._shows_victim(event) else None

    @extend_schema_field(serializers.ListField(child=serializers.CharField()))
    def get_nodes(self, event: PreemptionEvent) -> list[str]:
        """The nodes the victim ran on, where the caller may see the victim (else empty)."""
        return list(event.nodes or ()) if self._shows_victim(event) else []

    @extend_schema_field(serializers.ChoiceField(choices=[GPU_UNIT, MIG_UNIT]))
    def get_unit(self, event: PreemptionEvent) -> str:
        """The unit of ``gpus_freed`` (``inventory.units.freed_unit``, the page's rule)."""
        nodes = list(event.nodes or ())
        mig_nodes = self.context.get(PAGE_MIG_NODES)
        if mig_nodes is None:  # one event (its detail)
            mig_nodes = mig_node_names(nodes)
        return freed_unit(nodes, mig_nodes)

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_preemptor(self, event: PreemptionEvent) -> str | None:
        """The preemptor as ``namespace/name``, where the caller may see it."""
        return event.preemptor.qualified_name() if self._shows_preemptor(event) else None  # type: ignore[union-attr]

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_preemptor_owner(self, event: PreemptionEvent) -> str | None:
        """Who submitted the preemptor, where the caller may see it."""
        if not self._shows_preemptor(event) or event.preemptor.submitter is None:  # type: ignore[union-attr]
            return None
        return str(event.preemptor.submitter.username)  # type: ignore[union-attr]

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_preemptor_class(self, event: PreemptionEvent) -> str | None:
        """The preemptor's priority class."""
        return None if event.preemptor is None else event.preemptor.priority_class.name

    @extend_schema_field(DrainSerializer(many=True))
    def get_drains(self, event: PreemptionEvent) -> list[dict[str, Any]]:
        """The drains that evicted it (an admin eviction), oldest node name first; none
        where the caller may not see the victim (its nodes are not shown either)."""
        if not self._shows_victim(event):
            return []
        page = self.context.get(PAGE_DRAINS)
        if page is None:  # one event (its detail)
            page = node_drains([(event.pk, event.reason, event.at, event.nodes)])
        drains = DrainSerializer(page.get(event.pk, ()), many=True)  # type: ignore[arg-type]
        return list(drains.data)


# Where a list's serializer context keeps its page's GPUs per workload id.
PAGE_GPUS = "page_gpus"
# And the ids of its pending workloads the core set aside as never fitting.
PAGE_NEVER_FITS = "page_never_fits"
# And those of its gangs that wait for their pods (``models.pods_waited_for``).
PAGE_WAITING_FOR_PODS = "page_waiting_for_pods"
# ... and, of its pending rows without an estimate, where the estimates stopped looking ahead.
PAGE_NOT_BEFORE = "page_not_before"


class WorkloadListSerializer(serializers.ListSerializer[Workload]):
    """A page of workloads: their GPUs read for the whole page in one query of values, and
    their queue positions counted in one more."""

    def to_representation(self, data: Any) -> list[Any]:
        """The rows, with ``PAGE_GPUS`` in the context while they render."""
        rows = list(data.all() if isinstance(data, Manager) else data)
        fill_positions(rows)
        self.context[PAGE_GPUS] = asks_by_workload(row.pk for row in rows)
        # One query: the facts are not in the list's rows. A gang that waits for its pods has
        # no position; of the others, one without an estimate may have where the estimates
        # stopped looking ahead (``queries.not_before_of``'s rule).
        aside = set_aside_and_waiting(row.pk for row in rows if row.state == WorkloadState.PENDING)
        self.context[PAGE_NEVER_FITS] = aside.never
        self.context[PAGE_WAITING_FOR_PODS] = aside.waiting
        for row in rows:
            if row.pk in aside.waiting:
                set_position(row, None)
        self.context[PAGE_NOT_BEFORE] = {
            row.pk: aside.not_before[row.pk]
            for row in rows
            if row.pk in aside.not_before and row.estimated_start_at is None
        }
        try:
            return super().to_representation(rows)
        finally:
            del self.context[PAGE_GPUS]
            del self.context[PAGE_NEVER_FITS]
            del self.context[PAGE_WAITING_FOR_PODS]
            del self.context[PAGE_NOT_BEFORE]


_MOMENT = serializers.DateTimeField()  # renders a moment as the API renders its fields


class WorkloadSerializer(PlannedRows, serializers.ModelSerializer[Workload]):
    """A workload as a list shows it."""

    queue: serializers.SlugRelatedField[Queue] = NameRelatedField(slug_field="name", read_only=True)
    tenant = serializers.SerializerMethodField()
    priority_class: serializers.SlugRelatedField[PriorityClass] = NameRelatedField(
        slug_field="name", read_only=True
    )
    submitter: serializers.SlugRelatedField[Any] = NameRelatedField(
        slug_field="username", read_only=True, allow_null=True
    )
    gpus = serializers.SerializerMethodField()
    unit = serializers.SerializerMethodField(
        help_text='What gpus counts: "MIG instance" for work whose pod sets run on MIG flavors '
        'only (their MIG instances, never added to GPUs), else "GPU".'
    )
    pending_reason = NamedChoiceField(
        choices=PENDING_REASON_CHOICES,
        allow_blank=True,
        read_only=True,
        help_text="The core's reason it waits, as the last cycle said (empty unless pending).",
    )
    queue_position = serializers.IntegerField(
        allow_null=True,
        read_only=True,
        help_text="Rank among its queue's pending workloads, 1 first, in the order the last "
        "cycle served them (null unless pending and seen by a cycle, and for a gang that waits "
        "for its pods: waits_for_pods).",
    )
    never_fits = serializers.SerializerMethodField(
        help_text="Pending work its queue's capability or the pool can never hold as asked "
        "(its explanation's never_fits): set aside, with no position and no estimated start."
    )
    waits_for_pods = serializers.SerializerMethodField(
        help_text=WAITS_FOR_PODS_HELP + " (its explanation's waits_for_pods)."
    )
    estimate_not_before = serializers.SerializerMethodField(
        help_text="Pending with no estimated start: the estimates looked this far ahead "
        "without it starting, so it starts no earlier (its explanation's estimate_not_before; "
        "null otherwise)."
    )
    idle_since = serializers.SerializerMethodField(
        help_text="Placed, and its GPUs have done no work since then, as the utilisation "
        "source last saw them; null while they work, when no source saw them, and once it no "
        "longer holds them."
    )

    class Meta:
        model = Workload
        fields: tuple[str, ...] = (
            "namespace",
            "name",
            "queue",
            "tenant",
            "priority_class",
            "submitter",
            "state",
            "gpus",
            "unit",
            "submitted_at",
            "admitted_at",
            "started_at",
            "finished_at",
            "pending_reason",
            "queue_position",
            "estimated_start_at",
            "estimate_not_before",
            "never_fits",
            "waits_for_pods",
            "idle_since",
        )
        read_only_fields = fields
        list_serializer_class = WorkloadListSerializer

    def to_representation(self, instance: Workload) -> dict[str, Any]:
        """The row; work that is not pending has no pending reason (the explanation the
        loop last wrote may outlive its wait: read as ``explain`` reads it, and so as the
        detail's ``explanation`` says it). Work set aside as never fitting, and a gang that
        waits for its pods, has no estimated start, whatever its row kept until the
        estimates' next refresh (``explain``'s rule)."""
        row = super().to_representation(instance)
        if instance.state != WorkloadState.PENDING:
            row["pending_reason"] = ""
        if row.get("never_fits") or row.get("waits_for_pods"):
            row["estimated_start_at"] = None
        return row

    @extend_schema_field(serializers.BooleanField())
    def get_never_fits(self, workload: Workload) -> bool:
        """Whether it is pending and the core set it aside as never fitting
        (``explain.never_fits``, as its explanation's ``never_fits`` says)."""
        page: set[int] | None = self.context.get(PAGE_NEVER_FITS)
        if page is not None:
            return workload.pk in page
        return workload.state == WorkloadState.PENDING and never_fits(workload.pending_facts)

    @extend_schema_field(serializers.BooleanField())
    def get_waits_for_pods(self, workload: Workload) -> bool:
        """Whether it is a pending gang that waits for its pods (``models.pods_waited_for``,
        as its explanation's ``waits_for_pods`` says)."""
        page: set[int] | None = self.context.get(PAGE_WAITING_FOR_PODS)
        if page is not None:
            return workload.pk in page
        return workload.state == WorkloadState.PENDING and (
            pods_waited_for(workload.pending_reason, workload.pending_facts) > 0
        )

    @extend_schema_field(serializers.DateTimeField(allow_null=True))
    def get_estimate_not_before(self, workload: Workload) -> str | None:
        """Where the estimates stopped looking ahead without starting it (a page's, read for
        the whole page with its other facts: ``queries.set_aside_and_waiting``; else its
        explanation's)."""
        page: dict[int, datetime] | None = self.context.get(PAGE_NOT_BEFORE)
        moment = page.get(workload.pk) if page is not None else estimate_not_before(workload)
        return None if moment is None else _MOMENT.to_representation(moment)

    @extend_schema_field(serializers.DateTimeField(allow_null=True))
    def get_idle_since(self, workload: Workload) -> str | None:
        """Since when its GPUs sat idle, while it holds them (a finished workload kept the last
        spell the sampler wrote)."""
        if workload.idle_since is None or workload.state not in PLACED_STATES:
            return None
        return _MOMENT.to_representation(workload.idle_since)

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_tenant(self, workload: Workload) -> str | None:
        """The tenant of its queue."""
        tenant = workload.queue.tenant
        return None if tenant is None else tenant.name

    @extend_schema_field(serializers.DecimalField(max_digits=12, decimal_places=3))
    def get_gpus(self, workload: Workload) -> str:
        """GPUs the whole workload asks (shared flavors count their fraction)."""
        page: dict[int, Asks] | None = self.context.get(PAGE_GPUS)
        gpus = page[workload.pk].gpus if page is not None else total_gpus(workload)
        return f"{gpus:.3f}"

    @extend_schema_field(serializers.ChoiceField(choices=[GPU_UNIT, MIG_UNIT]))
    def get_unit(self, workload: Workload) -> str:
        """The unit of ``gpus`` (``queries.unit_of``; a list's rows from ``asks_by_workload``)."""
        page: dict[int, Asks] | None = self.context.get(PAGE_GPUS)
        return page[workload.pk].unit if page is not None else unit_of_workload(workload)


class RefusedPodsRowSerializer(serializers.Serializer[Any]):
    """The waiting pods of one would-be workload gpupool will not schedule, and why."""

    workload = serializers.CharField(
        help_text="namespace/name: the pods' gpupool.io/workload label, else the pod's name."
    )
    namespace = serializers.SerializerMethodField()
    name = serializers.SerializerMethodField()
    pods = serializers.IntegerField(help_text="Its pods waiting for a node.")
    why = serializers.CharField(help_text="The sentence of their Warning Event.")

    def get_namespace(self, row: dict[str, Any]) -> str:
        """The namespace of ``workload``."""
        return str(row["workload"]).partition("/")[0]

    def get_name(self, row: dict[str, Any]) -> str:
        """The name of ``workload``."""
        return str(row["workload"]).partition("/")[2]


class RefusedPodsSerializer(serializers.Serializer[Any]):
    """Pods gpupool will not schedule (as the My workloads page lists them): they ask for
    gpupool but cannot become workloads as they are, so no workload lists them."""

    count = serializers.IntegerField(
        help_text="How many such workloads the caller may see (an admin's may be more than "
        "are listed: the cycle records the first 100 by name)."
    )
    results = RefusedPodsRowSerializer(many=True, source="workloads")


class EvictionRefusalSerializer(serializers.Serializer[Any]):
    """An eviction of the workload a PodDisruptionBudget refused, while it is current."""

    at = serializers.DateTimeField(allow_null=True, help_text="When the budget refused it.")
    budget = serializers.CharField(
        help_text="The PodDisruptionBudget as namespace/name; empty when the refusal named none."
    )
    needs = serializers.CharField(
        help_text='What the budget needs ("1 healthy pod and has 1 currently").'
    )
    reason = serializers.CharField(
        help_text="Why gpupool evicts it: admin for a drain, preempt, reclaim, idle."
    )
    nodes = serializers.ListField(
        child=serializers.CharField(), help_text="The nodes it holds (a drain's among them)."
    )
    preemptor = serializers.CharField(
        allow_null=True,
        help_text="The workload it was evicted for, as namespace/name; null for a drain, and "
        "where the caller may not see it (as a preemption's preemptor).",
    )
    detail = serializers.CharField(help_text="The sentence its pods were told (EvictionRefused).")


class WorkloadDetailSerializer(WorkloadSerializer):
    """A workload's whole story."""

    pod_sets = PodSetSerializer(many=True, read_only=True)
    placements = PlacementSerializer(many=True, read_only=True)
    explanation = serializers.SerializerMethodField()
    timeline = TransitionSerializer(many=True, read_only=True, source="transitions")
    preemptions = PreemptionEventSerializer(many=True, read_only=True, source="preempted_by")
    lost_gpu_hours = serializers.SerializerMethodField()
    eviction_refusal = serializers.SerializerMethodField()
    growths = serializers.SerializerMethodField(
        help_text="Each time an elastic gang (``min_member`` below its pods) grew into free "
        "capacity within its queue's deserved share, oldest first; empty for other work."
    )

    class Meta(WorkloadSerializer.Meta):
        fields = (
            *WorkloadSerializer.Meta.fields,
            "min_member",
            "topology",
            "protected_runtime_s",
            "expected_runtime_s",
            "last_checkpoint_at",
            "origin",
            "controller_kind",
            "controller_name",
            "pod_sets",
            "placements",
            "explanation",
            "timeline",
            "preemptions",
            "lost_gpu_hours",
            "eviction_refusal",
            "growths",
        )
        read_only_fields = fields

    @extend_schema_field(GrowthSerializer(many=True))
    def get_growths(self, workload: Workload) -> list[dict[str, Any]]:
        """When it grew, from and to how many pods (``workloads.queries.growths``)."""
        return list(GrowthSerializer(growths(workload), many=True).data)

    @extend_schema_field(EvictionRefusalSerializer(allow_null=True))
    def get_eviction_refusal(self, workload: Workload) -> dict[str, Any] | None:
        """The eviction a disruption budget refused, while current (null otherwise)."""
        refusal = eviction_refusal(workload, request_access(self.context["request"]))
        return None if refusal is None else dict(EvictionRefusalSerializer(refusal).data)

    @extend_schema_field(ExplanationSerializer)
    def get_explanation(self, workload: Workload) -> dict[str, Any]:
        """The current explanation, position and estimated start, as the caller may see it:
        another team's workloads its facts name (a preemptor's victims, the workload capacity
        is held for) left out, and unnamed in its sentences (``queries.facts_seen_by``,
        ``sentence_seen_by``; the workload page's rule)."""
        seen = NamesSeen(request_access(self.context["request"]))
        # A sentence said again counts a MIG flavor's quantities in MIG instances, as the
        # core said it (the flavors' units: one query, only when one is said again).
        explained = explain(workload, seen=seen, units=FlavorUnits())
        return dict(ExplanationSerializer(explained).data)

    @extend_schema_field(serializers.DecimalField(max_digits=14, decimal_places=4))
    def get_lost_gpu_hours(self, workload: Workload) -> str:
        """GPU-hours of progress its preemptions cost, in total."""
        return f"{lost_gpu_hours(workload.preempted_by.all()):.4f}"


class SubmittedWorkloadSerializer(WorkloadDetailSerializer):
    """A workload just submitted (the submit's 201): its story, and a warning when it could
    never run as the queues and the pool are set up."""

    warning = serializers.SerializerMethodField(
        help_text="Why it could never run as asked, in the dry-run's words (its never_fits): "
        "it is submitted all the same and waits, set aside, until a quota or the pool changes "
        "so that it could fit; empty when it could (or when no scheduling cycle has looked at "
        "the pool yet)."
    )

    class Meta(WorkloadDetailSerializer.Meta):
        fields = (*WorkloadDetailSerializer.Meta.fields, "warning")
        read_only_fields = fields

    def get_warning(self, workload: Workload) -> str:
        """The dry-run's ``never_fits`` of the submission (``never_fits_warning``)."""
        return str(self.context.get("never_fits", ""))


class CancelledWorkloadSerializer(WorkloadDetailSerializer):
    """A workload just cancelled (the cancel's answer): its story, and what cancelling it does."""

    outcome = serializers.SerializerMethodField(
        help_text="What cancelling it does, as its page says it after 'is cancelled: ': its "
        "GPUs released (or its queue left), and what the control loop does with its pods -- "
        "deleted; a Job's Job suspended (its controller removes the pods and makes none "
        "again); another controller's deleted where they hold a node, and those it makes "
        "again left pending."
    )

    class Meta(WorkloadDetailSerializer.Meta):
        fields = (*WorkloadDetailSerializer.Meta.fields, "outcome")
        read_only_fields = fields

    def get_outcome(self, workload: Workload) -> str:
        """``Workload.cancelled_words``, from the state it was cancelled in (the context's
        ``held_gpus``)."""
        return workload.cancelled_words(held_gpus=bool(self.context.get("held_gpus")))


def never_fits_warning(submission: Submission, *, submitter: Any) -> str:
    """Why ``submission`` could never run as asked, by the dry-run's own check
    (``dry_run_submission``'s ``never_fits``, nothing written), or "": also when the pool
    cannot be planned yet, or the dry-run refuses it (the submission itself then says why)."""
    try:
        # Only its never_fits is read: the core's sentence on the pool, naming no workload.
        return dry_run_submission(submission, submitter=submitter, seen=AS_WRITTEN).never_fits
    except (SnapshotError, DjangoValidationError):
        return ""


class DryRunLayerSerializer(serializers.Serializer[Any]):
    """One layer of a dry-run."""

    layer = NamedChoiceField(choices=["quota", "capacity", "placement"])
    passes = serializers.BooleanField()
    detail = serializers.CharField()
    facts = serializers.DictField()


class DryRunSerializer(serializers.Serializer[Any]):
    """Would it fit now: quota, then capacity, then placement, and the first that fails."""

    workload = serializers.CharField(help_text="namespace/name")
    fits = serializers.BooleanField()
    first_failure = serializers.CharField(allow_null=True)
    layers = DryRunLayerSerializer(many=True)
    cycle_id = serializers.IntegerField(
        allow_null=True, help_text="The scheduling cycle whose view of the pool answered."
    )
    snapshot_at = serializers.DateTimeField()
    never_fits = serializers.CharField(
        help_text="Why it could never run as the queues and pool are set up (submitted, it "
        "would have no place in line and no estimated start); empty when it could."
    )


# ----------------------------------------------------------------------------- views


class WorkloadFilter(filters.FilterSet):  # type: ignore[misc]
    """Filter workloads by state, queue, tenant, namespace, submitter and pending reason (a
    queue, tenant or submitter that names nothing is a 400 naming it: ``NameFilter``)."""

    state = filters.MultipleChoiceFilter(choices=WorkloadState.choices)
    queue = NameFilter(field_name="queue__name", names=Queue)
    tenant = NameFilter(field_name="queue__tenant__name", names=Tenant)
    namespace = filters.CharFilter()
    submitter = NameFilter(
        field_name="submitter__username", names=settings.AUTH_USER_MODEL, name_field="username"
    )
    reason = filters.ChoiceFilter(choices=PENDING_REASON_CHOICES, method="filter_reason")

    class Meta:
        model = Workload
        fields: tuple[str, ...] = ("state", "queue", "tenant", "namespace", "submitter", "reason")

    def filter_reason(self, queryset: QuerySet[Any], name: str, value: str) -> QuerySet[Any]:
        """Pending work the last cycle gave this reason (work no longer pending has none, as
        its row says: ``WorkloadSerializer.to_representation``)."""
        return queryset.filter(state=WorkloadState.PENDING, explanation__reason=value)


class WorkloadOrdering(StrictOrderingFilter):
    """``?ordering=`` where ``queue_position`` orders by the queue rank it is counted from:
    within a queue, the order of positions (a position is no column: the loop keeps ranks,
    ``control/record.py``); work with no position comes last: not ranked yet, set aside as
    never fitting, or a gang that waits for its pods (the record gives neither a rank)."""

    def get_ordering(self, request: Request, queryset: QuerySet[Any], view: Any) -> Any:
        """The ordering asked, with ``queue_position`` read as ``queue_rank``."""
        ordering = super().get_ordering(request, queryset, view)
        if not ordering:
            return ordering
        ranked = {
            "queue_position": "explanation__queue_rank",
            "-queue_position": "-explanation__queue_rank",
        }
        return [ranked.get(term, term) for term in ordering]

    def filter_queryset(self, request: Request, queryset: QuerySet[Any], view: Any) -> Any:
        """Nulls last either way, as positions: unranked work has none yet."""
        ordering = self.get_ordering(request, queryset, view)
        if not ordering:
            return queryset
        return queryset.order_by(*(_nulls_last(term) for term in ordering))


def _nulls_last(term: str) -> Any:
    if term.lstrip("-") != "explanation__queue_rank":
        return term
    column = F("explanation__queue_rank")
    return column.desc(nulls_last=True) if term.startswith("-") else column.asc(nulls_last=True)


class WorkloadViewSet(
    CSVExport,
    TenantScoped,
    mixins.ListModelMixin,
    mixins.CreateModelMixin,
    viewsets.GenericViewSet[Workload],
):
    """The caller's tenants' workloads (admins: all), every one as CSV with ``?format=csv``;
    submit one, or try one (dry-run)."""

    queryset = workload_list()
    serializer_class = WorkloadSerializer
    filterset_class = WorkloadFilter
    filter_backends = (StrictFilterBackend, WorkloadOrdering)
    ordering_fields = ("submitted_at", "started_at", "queue_position", "estimated_start_at", "name")
    permission_classes = (ActionRoles,)
    default_roles = TENANT_ROLES
    tenant_field = "queue__tenant"
    csv_name = "workloads"
    plans_the_pool = ("dry_run",)  # 409 when the pool cannot be planned (api.schema)

    def get_serializer_class(self) -> type[serializers.BaseSerializer[Any]]:
        """Input shapes for submit and dry-run."""
        if self.action == "create":
            return WorkloadInputSerializer
        if self.action == "dry_run":
            return DryRunInputSerializer
        return WorkloadSerializer

    @extend_schema(request=WorkloadInputSerializer, responses={201: SubmittedWorkloadSerializer})
    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """Submit a workload to a leaf queue of your tenant. Work that could never run as the
        queues and the pool are set up is submitted all the same (it waits, set aside, until
        they change) and the answer's ``warning`` says why, as a dry-run would."""
        form = WorkloadInputSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        submission = form.submission()
        warning = never_fits_warning(submission, submitter=request.user)
        workload = submission.submit(submitter=request.user)
        story = workload_story().get(pk=workload.pk)
        context = self.get_serializer_context() | {"never_fits": warning}
        body = SubmittedWorkloadSerializer(story, context=context).data
        return Response(body, status=status.HTTP_201_CREATED)

    @extend_schema(
        parameters=[
            OpenApiParameter("namespace", str, description="Only the pods of this namespace."),
            OpenApiParameter("name", str, description="Only the would-be workload of this name."),
        ],
        responses={200: RefusedPodsSerializer},
    )
    @action(detail=False, methods=["get"])
    def refused(self, request: Request) -> Response:
        """Pods gpupool will not schedule -- a queue of another tenant or none, a malformed
        gpupool.io label or annotation, a namespace no tenant owns, pods of a workload that
        has ended -- and why, as the last succeeded cycle recorded them and the My workloads
        page lists them: an admin sees all, anyone else those in their tenants' namespaces.
        Such pods are no workload, so ``workloads/<namespace>/<name>/`` answers 404 for them."""
        found = refused_workloads(request_access(request))
        rows = [
            row for row in found.workloads if _matches(str(row["workload"]), request.query_params)
        ]
        narrowed = len(rows) != len(found.workloads)
        answer = {"count": len(rows) if narrowed else found.count, "workloads": rows}
        return Response(RefusedPodsSerializer(answer).data)

    @extend_schema(request=DryRunInputSerializer, responses={200: DryRunSerializer})
    @action(detail=False, methods=["post"], url_path="dry-run")
    def dry_run(self, request: Request) -> Response:
        """Would this workload fit now, and if not, why: quota, then capacity, then
        placement, answered by the decision core on the last cycle's view of the pool.
        Nothing is submitted."""
        form = DryRunInputSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        try:
            answer = dry_run_submission(
                form.submission(),
                submitter=request.user,
                seen=NamesSeen(request_access(request)),  # another team's work unnamed
            )
        except SnapshotError as error:
            raise PoolNotPlannable(f"The pool cannot be planned: {error}") from None
        return Response(DryRunSerializer(answer).data)


def _matches(workload: str, query: Mapping[str, str]) -> bool:
    """Whether ``namespace/name`` is of the ``?namespace=`` and ``?name=`` asked."""
    namespace, _, name = workload.partition("/")
    return query.get("namespace", namespace) == namespace and query.get("name", name) == name


class NamespacedWorkloadViewSet(
    TenantScoped, mixins.RetrieveModelMixin, viewsets.GenericViewSet[Workload]
):
    """One workload, by namespace and name: its story, and cancelling it."""

    queryset = workload_story()
    serializer_class = WorkloadDetailSerializer
    permission_classes = (ActionRoles,)
    default_roles = TENANT_ROLES
    tenant_field = "queue__tenant"
    lookup_field = "name"
    lookup_value_regex = r"[^/]+"

    def get_queryset(self) -> QuerySet[Workload]:
        """The caller's workloads in the namespace of the URL."""
        return super().get_queryset().filter(namespace=self.kwargs.get("namespace", ""))

    @extend_schema(request=CancelInputSerializer, responses={200: CancelledWorkloadSerializer})
    @action(detail=True, methods=["post"])
    def cancel(self, request: Request, namespace: str, name: str) -> Response:
        """Cancel the workload, running work included (its submitter, a lead of its tenant or
        an admin); the control loop then removes its pods (a Job's by suspending the Job), as
        the answer's ``outcome`` says."""
        workload = self.get_object()
        form = CancelInputSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        cancel = do_cancel_workload(
            workload, acting_user=request.user, reason=form.validated_data["reason"]
        )
        story = self.get_queryset().get(pk=workload.pk)
        context = {**self.get_serializer_context(), "held_gpus": cancel.from_state in PLACED_STATES}
        return Response(CancelledWorkloadSerializer(story, context=context).data)


def register(router: BaseRouter) -> None:
    """Add this app's resources to the API router."""
    router.register("workloads", WorkloadViewSet, basename="workload")
    router.register(
        rf"workloads/(?P<namespace>{NAMESPACE_PATTERN})",
        NamespacedWorkloadViewSet,
        basename="namespaced-workload",
    )
