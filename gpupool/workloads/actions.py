"""State changes of workloads: submission, cancellation, and every state transition with its
placements."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Any

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.db.models import Count

from gpupool.accounting.actions import do_close_usage
from gpupool.clusters.grouping import MAX_DURATION_S, MAX_PODS
from gpupool.control.clock import pool_now, pool_now_after
from gpupool.inventory.models import Flavor, Node, devices_per_gpu
from gpupool.inventory.units import flavor_unit
from gpupool.quotas.models import PriorityClass, Queue
from gpupool.scheduler.scenario import (
    MAX_GPUS_PER_NODE,
    MAX_NODE_CPU,
    MAX_NODE_MEMORY_GB,
    MAX_POD_SETS,
)
from gpupool.tenancy.models import Membership, is_site_admin, is_tenant_lead
from gpupool.workloads.choices import (
    ALLOWED_TRANSITIONS,
    PLACED_STATES,
    WorkloadState,
    is_unfinished,
)
from gpupool.workloads.models import (
    Placement,
    PodSet,
    PodSetFlavorChoice,
    Workload,
    WorkloadTransition,
)


@dataclass(frozen=True)
class PodSetSpec:
    """What one pod set of a new workload asks for."""

    count: int
    gpus: int = 0
    flavor: Flavor | None = None
    gpu_milli: int | None = None
    cpu: Decimal | int = 0
    memory_gb: Decimal | int = 0
    name: str = "main"
    flavor_choices: Sequence[Flavor] = ()  # further flavors after ``flavor``, in order
    image: str = ""  # what the pods run (empty: pods Kubernetes created, gpupool only schedules)
    command: Sequence[str] = ()
    env: Mapping[str, str] = field(default_factory=dict)


# A container image reference, written from the grammar in the comment at the top of
# reference.go in github.com/distribution/reference (the reference the OCI distribution
# spec's registries take): [host[:port]/]path[:tag][@digest].
#   host:  DNS labels joined by "." (letters, digits, inner "-"), or [IPv6]; port: digits
#   path:  components joined by "/", each lowercase letters and digits with "_", "__", "."
#          or any run of "-" only between them
#   tag:   a word character, then up to 127 of letters, digits, "_", "." and "-"
#   digest: here sha256 only, 64 hex digits
# The whole name (host and path) is at most 255 characters (the grammar's NameTotalLengthMax).
_HOST_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?"
_IMAGE_HOST = rf"(?:{_HOST_LABEL}(?:\.{_HOST_LABEL})*|\[[0-9A-Fa-f:.]+\])(?::[0-9]+)?"
_PATH_COMPONENT = r"[a-z0-9]+(?:(?:[_.]|__|-+)[a-z0-9]+)*"
IMAGE_REFERENCE = re.compile(
    rf"(?P<name>(?:{_IMAGE_HOST}/)?{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*)"
    r"(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?"
    r"(?:@sha256:[0-9a-f]{64})?",
    re.ASCII,
)
IMAGE_NAME_MAX = 255
IMAGE_EXAMPLE = "ghcr.io/team/train:1.4"


def image_reference_error(image: str) -> str | None:
    """Why ``image`` is not a container image reference (``IMAGE_REFERENCE``), or None; an
    empty image is none to check (pods Kubernetes created run their own). The one rule of
    submission (``do_submit_workload``), and so of the API, the submit form and the dry-run."""
    if not image:
        return None
    found = IMAGE_REFERENCE.fullmatch(image)
    if found is not None and len(found["name"]) <= IMAGE_NAME_MAX:
        return None
    why = f"{image!r} is not a container image reference (e.g. {IMAGE_EXAMPLE})"
    if found is not None:
        return f"{why}: its name is longer than {IMAGE_NAME_MAX} characters"
    if image != image.lower() and IMAGE_REFERENCE.fullmatch(image.lower()):
        return f"{why}: a repository's path is lowercase"
    return why


# The most GPUs (MIG: instances) one pod may ask, the core's bound (``scheduler.scenario``):
# what the rule of a pod set's size (``pod_set_spec_errors``) says past it where no flavor's
# rule applies, for the API, the submit form and the CLI alike.
TOO_MANY_GPUS_PER_POD = (
    f"at most {MAX_GPUS_PER_NODE} (MIG: instances), the most one node may have; a pod runs "
    "on one node"
)


def pod_set_spec_errors(spec: PodSetSpec) -> dict[str, str]:
    """Why a pod set of this size could never run, by field ({} when it could): asking more
    GPUs than the largest node of every flavor it may run on holds (a pod runs on one node),
    or one pod past the decision core's bounds (``scheduler.scenario``: the snapshot of a pool
    holding it could not be planned). The flavors' rule comes first, whatever the number: 99
    GPUs on h100 are refused as 16 are, "the largest h100 node has 8"; the core's bound on
    GPUs (``TOO_MANY_GPUS_PER_POD``) is said only where no flavor's rule applies. Flavors
    without nodes yet are not judged (the cluster's sync brings them); unhealthy GPUs and
    cordoned nodes count (they come back). The one rule of submission
    (``do_submit_workload``), of the API's body and the dashboard's submit form (neither
    bounds GPUs per pod itself), and of pods registered from the cluster
    (``pod_sets_errors``)."""
    errors: dict[str, str] = {}
    past_largest = _largest_node_refusal(spec)
    if past_largest is not None:
        errors["gpus"] = past_largest
    elif spec.gpus > MAX_GPUS_PER_NODE:
        errors["gpus"] = f"{spec.gpus} GPUs per pod: {TOO_MANY_GPUS_PER_POD}"
    if spec.cpu > MAX_NODE_CPU:
        errors["cpu"] = f"{spec.cpu} CPU cores per pod: at most {MAX_NODE_CPU}, a node's most"
    if spec.memory_gb > MAX_NODE_MEMORY_GB:
        errors["memory_gb"] = (
            f"{spec.memory_gb} GB per pod: at most {MAX_NODE_MEMORY_GB}, a node's most"
        )
    return errors


def _largest_node_refusal(spec: PodSetSpec) -> str | None:
    """Why no node of the pod set's flavors could hold one of its pods (more GPUs than the
    largest node of every flavor it may run on), in the flavors' unit; None when one could, or
    when a flavor has no nodes yet (not judged) or none is named."""
    if spec.gpus <= 0 or spec.flavor is None:
        return None
    flavors = [spec.flavor, *spec.flavor_choices]
    largest = largest_node_gpus(flavors)
    if len(largest) != len({flavor.pk for flavor in flavors}):  # a flavor without nodes yet
        return None
    most = max(largest.values())
    if spec.gpus <= most:
        return None
    names = " or ".join(flavor.name for flavor in flavors)
    # In the unit its flavors count in (a MIG flavor's: its MIG instances).
    units = {flavor_unit(flavor.sharing) for flavor in flavors}
    asked = f"{units.pop()}s" if len(units) == 1 else "GPUs (MIG: instances)"
    return (
        f"{spec.gpus} {asked} per pod, and a pod runs on one node: the largest {names} node "
        f"has {most}"
    )


def pod_sets_errors(
    pod_sets: Sequence[PodSetSpec], judged: dict[tuple[object, ...], dict[str, str]] | None = None
) -> dict[str, str]:
    """Why a workload of these pod sets could never run, by field ({} when it could): its pod
    sets' number and pods past the decision core's bounds (``pod_set_count_errors``), or a
    pod set that could never run (``pod_set_spec_errors``, named
    ``pod_sets.<index>.<field>``). ``judged`` (kept by a caller that judges many workloads at
    once, the cluster's sync) remembers each distinct pod set's verdict, so equal pod sets
    cost one look at the nodes. The rule of pods registered from the cluster
    (``control.sync``), as ``do_submit_workload`` applies it at submission."""
    errors = pod_set_count_errors(pod_sets)
    if errors:
        return errors
    for index, spec in enumerate(pod_sets):
        key = (
            spec.gpus,
            None if spec.flavor is None else spec.flavor.pk,
            tuple(flavor.pk for flavor in spec.flavor_choices),
            spec.cpu,
            spec.memory_gb,
        )
        found = None if judged is None else judged.get(key)
        if found is None:
            found = pod_set_spec_errors(spec)
            if judged is not None:
                judged[key] = found
        for name, why in found.items():
            errors[f"pod_sets.{index}.{name}"] = why
    return errors


# A submission's pods in all, ``clusters.grouping.MAX_PODS`` (10,000): the most the control
# loop takes from the cluster as one workload (one made with kubectl of more is refused), and
# gpupool makes a submission's pods there too (the core's own bound, 100,000, is a whole
# scenario's: 50 cycles of pod creation at ``control.apply.CREATES_PER_CYCLE``).
TOO_MANY_PODS = (
    f"at most {MAX_PODS} pods a workload: the most gpupool reads from the cluster as one workload"
)


# A workload's expected runtime: at most 366 days (8,784 hours), the longest duration gpupool
# reads from a pod's annotation (``clusters.grouping.MAX_DURATION_S``, so the longest a
# workload made with kubectl declares); the API, the submit form and the ``gpupool`` CLI
# bound it so too.
MAX_EXPECTED_RUNTIME_S = int(MAX_DURATION_S)
TOO_LONG_RUNTIME = (
    f"at most {MAX_EXPECTED_RUNTIME_S} seconds ({MAX_EXPECTED_RUNTIME_S // 3600} hours, 366 "
    "days): the longest runtime gpupool reads from a pod's annotation"
)


def pod_set_count_errors(pod_sets: Sequence[PodSetSpec]) -> dict[str, str]:
    """Why a workload of this many pod sets and pods could not be planned (``pod_sets``; {}
    when it could): none, more pod sets than the decision core takes in one, or more pods
    than the loop reads from the cluster as one (``TOO_MANY_PODS``)."""
    if not pod_sets:
        return {"pod_sets": "a workload has at least one pod set"}
    if len(pod_sets) > MAX_POD_SETS:
        return {"pod_sets": f"{len(pod_sets)} pod sets: at most {MAX_POD_SETS}"}
    pods = sum(spec.count for spec in pod_sets)
    if pods > MAX_PODS:
        return {"pod_sets": f"{pods} pods in all; {TOO_MANY_PODS}"}
    return {}


def largest_node_gpus(flavors: Sequence[Flavor]) -> dict[int, int]:
    """GPUs (MIG: instances) of the largest node of each of ``flavors`` that has nodes in the
    cluster (gone ones aside), by flavor id; unhealthy GPUs and cordoned nodes count."""
    by_id = {flavor.pk: flavor for flavor in flavors}
    largest: dict[int, int] = {}
    rows = (
        Node.objects.filter(flavor_id__in=list(by_id), gone_at__isnull=True)
        .annotate(gpu_count=Count("gpus"))
        .values_list("flavor_id", "mig_layout", "gpu_count")
        .order_by()
    )
    for flavor_id, layout, gpus in rows:
        devices = gpus * devices_per_gpu(by_id[flavor_id], layout)
        largest[flavor_id] = max(largest.get(flavor_id, 0), devices)
    return largest


@dataclass(frozen=True)
class PlacementSpec:
    """Where one pod goes: pod set name, pod index, node, GPU indices and milli share."""

    pod_set: str
    pod_index: int
    node: Node
    gpu_indices: Sequence[int] = field(default_factory=list)
    milli: int | None = None


@transaction.atomic
def do_submit_workload(
    name: str,
    *,
    queue: Queue,
    pod_sets: Sequence[PodSetSpec],
    priority_class: PriorityClass | None = None,
    submitter: Any = None,
    min_member: int | None = None,
    topology: str = "",
    protected_runtime_s: int | None = None,
    expected_runtime_s: int | None = None,
    at: datetime | None = None,
    namespace: str | None = None,
    reason: str = "submitted",
) -> Workload:
    """Queue a new workload; defaults: the default class, the queue's protected runtime, and
    the namespace its queue's tenant owns (the first by name; ``default`` when it owns none).
    ``reason`` is its first transition's: the system names there what submitted it (the
    demo's generator: "submitted by the demo generator").

    A person submits only to a queue of a tenant they belong to (admins anywhere); the system
    (``submitter`` None) anywhere. A pod set's errors are named ``pod_sets.<index>.<field>``;
    a pod set that could never run is refused (``pod_set_spec_errors``), and so are more pod
    sets or pods than the decision core takes in one workload, and an expected runtime past
    ``MAX_EXPECTED_RUNTIME_S``. A pod set's size and image are refused together with the
    workload's own first refusal (its name taken, a namespace not its tenant's, ...), so that
    a submission wrong in both is told both at once.
    """
    # The pod sets' own rules (their number; then each one's size and image) are said with
    # the workload's first refusal, not only once it is mended; the size rule before the
    # rows' own checks (GPUs past the column's range are the rule's to refuse).
    pod_set_errors = pod_sets_errors(pod_sets)
    if "pod_sets" in pod_set_errors:  # none, or past the core's bounds: nothing more to judge
        raise ValidationError(pod_set_errors)
    for index, spec in enumerate(pod_sets):
        image_error = image_reference_error(spec.image)
        if image_error is not None:
            pod_set_errors[f"pod_sets.{index}.image"] = image_error
    try:
        workload = _checked_workload(
            name,
            queue=queue,
            priority_class=priority_class,
            submitter=submitter,
            min_member=min_member,
            topology=topology,
            protected_runtime_s=protected_runtime_s,
            expected_runtime_s=expected_runtime_s,
            at=at,
            namespace=namespace,
        )
    except ValidationError as refusal:
        raise ValidationError({**refusal.update_error_dict({}), **pod_set_errors}) from None
    if pod_set_errors:
        raise ValidationError(pod_set_errors)
    workload.save()
    names = [spec.name for spec in pod_sets]
    if len(set(names)) != len(names):
        raise ValidationError({"pod_sets": f"pod set names repeat: {names}"})
    for index, spec in enumerate(pod_sets):
        pod_set = PodSet(
            workload=workload,
            name=spec.name,
            count=spec.count,
            gpus=spec.gpus,
            flavor=spec.flavor,
            gpu_milli=spec.gpu_milli,
            cpu=Decimal(str(spec.cpu)),
            memory_gb=Decimal(str(spec.memory_gb)),
            image=spec.image,
            command=list(spec.command),
            env=dict(spec.env),
        )
        prefix = f"pod_sets.{index}."
        try:
            pod_set.full_clean()
        except ValidationError as error:
            raise ValidationError(
                {prefix + field: messages for field, messages in error.message_dict.items()}
            ) from None
        choice_errors = pod_set.flavor_choices_errors(spec.flavor_choices)
        if choice_errors:
            raise ValidationError(
                {prefix + "flavor_choices": f"pod set {spec.name}: " + "; ".join(choice_errors)}
            )
        pod_set.save()
        PodSetFlavorChoice.objects.bulk_create(
            PodSetFlavorChoice(pod_set=pod_set, rank=rank, flavor=flavor)
            for rank, flavor in enumerate(spec.flavor_choices, start=1)
        )
    workload.full_clean()  # min_member against the pods, now that they exist
    WorkloadTransition.objects.create(
        workload=workload,
        from_state="",
        to_state=WorkloadState.PENDING,
        at=workload.submitted_at,
        reason=reason[:500],
        actor=submitter if getattr(submitter, "is_authenticated", False) else None,
    )
    return workload


def _checked_workload(
    name: str,
    *,
    queue: Queue,
    priority_class: PriorityClass | None,
    submitter: Any,
    min_member: int | None,
    topology: str,
    protected_runtime_s: int | None,
    expected_runtime_s: int | None,
    at: datetime | None,
    namespace: str | None,
) -> Workload:
    """The workload ``do_submit_workload`` would save, checked (not saved): its runtime, the
    submitter's membership, its namespace, its name free there, its class, its own rules."""
    if expected_runtime_s is not None and expected_runtime_s > MAX_EXPECTED_RUNTIME_S:
        raise ValidationError({"expected_runtime_s": f"{expected_runtime_s}: {TOO_LONG_RUNTIME}"})
    _require_member(submitter, queue)
    namespace = _namespace_for(queue, namespace)
    if Workload.objects.filter(namespace=namespace, name=name).exists():
        raise ValidationError(
            {"name": f"the namespace already has a workload of this name: {namespace}/{name}"}
        )
    if priority_class is None:
        priority_class = PriorityClass.objects.filter(default=True).first()
        if priority_class is None:
            raise ValidationError({"priority_class": "no class given and none is the default"})
    now = at or pool_now()  # the pool's clock (``control.clock``)
    workload = Workload(
        name=name,
        namespace=namespace,
        queue=queue,
        priority_class=priority_class,
        submitter=submitter,
        min_member=min_member,
        topology=topology,
        protected_runtime_s=(
            queue.default_protected_runtime_s
            if protected_runtime_s is None
            else protected_runtime_s
        ),
        expected_runtime_s=expected_runtime_s,
        state=WorkloadState.PENDING,
        submitted_at=now,
    )
    workload.full_clean()
    return workload


def _require_member(submitter: Any, queue: Queue) -> None:
    """A person submits to their own tenants' queues only (admins and the system anywhere)."""
    if not getattr(submitter, "is_authenticated", False) or is_site_admin(submitter):
        return
    if (
        queue.tenant_id is None
        or not Membership.objects.filter(user=submitter, tenant_id=queue.tenant_id).exists()
    ):
        if queue.children.exists():  # the queue tree is public: say what is wrong with it
            leaf_rule = Workload(queue=queue).rule_errors(queue_has_children=True)
            raise ValidationError({"queue": leaf_rule["queue"]})
        owner = f"tenant {queue.tenant}" if queue.tenant_id is not None else "no tenant"
        raise ValidationError(
            {"queue": f"queue {queue} belongs to {owner}, of which you are not a member"}
        )


def _namespace_for(queue: Queue, namespace: str | None) -> str:
    """The namespace a workload of ``queue`` lives in: one its tenant owns (DESIGN 4)."""
    owned = queue.tenant.namespace_names() if queue.tenant is not None else []
    if namespace is None:
        return owned[0] if owned else "default"
    if owned and namespace not in owned:
        raise ValidationError(
            {
                "namespace": f"queue {queue} belongs to tenant {queue.tenant}, whose namespaces "
                f"are {', '.join(owned)}; {namespace!r} is not one of them"
            }
        )
    return namespace


@transaction.atomic
def do_transition_workload(
    workload: Workload,
    to_state: str,
    *,
    reason: str,
    at: datetime | None = None,
    acting_user: Any = None,
    placements: Sequence[PlacementSpec] = (),
) -> WorkloadTransition:
    """Move a workload to ``to_state`` if the state machine allows it, recording when and why.

    Admission takes the placements (at least ``min_member`` pods); going back to pending or
    to a final state other than succeeded/failed releases them.
    """
    workload = Workload.objects.select_for_update().get(pk=workload.pk)
    from_state = workload.state
    if to_state not in ALLOWED_TRANSITIONS.get(from_state, frozenset()):
        allowed = sorted(ALLOWED_TRANSITIONS.get(from_state, frozenset())) or ["nothing"]
        raise ValidationError(
            {
                "state": f"{workload} is {from_state}; it can move to {', '.join(allowed)}, "
                f"not {to_state}"
            }
        )
    if not reason.strip():
        raise ValidationError({"reason": "every transition says why"})
    # Never before the stamps it holds, ``at`` given or not: a cycle's moment is read before
    # the work it planned on was submitted, and one it admitted late is admitted at its
    # submission (``control.actions._record_admissions``); a bind failure then comes after.
    held = (workload.submitted_at, workload.admitted_at, workload.started_at)
    now = pool_now_after(*held) if at is None else max(at, *(m for m in held if m is not None))
    if to_state == WorkloadState.ADMITTED:
        _place(workload, placements, now)
        workload.admitted_at = now
    elif placements:
        raise ValidationError({"placements": "placements are given only on admission"})
    if to_state == WorkloadState.RUNNING:
        workload.started_at = now
    if to_state in {WorkloadState.PENDING, WorkloadState.PREEMPTED, WorkloadState.CANCELLED}:
        workload.placements.all().delete()
        if to_state == WorkloadState.PENDING:
            workload.admitted_at = None
            workload.started_at = None
    if to_state in {WorkloadState.SUCCEEDED, WorkloadState.FAILED, WorkloadState.CANCELLED}:
        workload.finished_at = now
    if to_state not in PLACED_STATES:
        workload.idle_since = None  # its idle spell ends with its hold on the GPUs
    workload.state = to_state
    workload.full_clean()
    workload.save()
    transition = WorkloadTransition(
        workload=workload,
        from_state=from_state,
        to_state=to_state,
        at=now,
        reason=reason[:500],
        actor=acting_user if getattr(acting_user, "is_authenticated", False) else None,
    )
    transition.full_clean()
    transition.save()
    return transition


def _place(workload: Workload, placements: Sequence[PlacementSpec], now: datetime) -> None:
    """Validate and store an admission's placements (inside the caller's transaction)."""
    pod_sets = {pod_set.name: pod_set for pod_set in workload.pod_sets.all()}
    needed = workload.effective_min_member()
    if len(placements) < needed:
        raise ValidationError(
            {"placements": f"{len(placements)} pods placed; the gang needs {needed}"}
        )
    for item in placements:
        pod_set = pod_sets.get(item.pod_set)
        if pod_set is None:
            raise ValidationError({"placements": f"{workload} has no pod set {item.pod_set!r}"})
        placement = Placement(
            workload=workload,
            pod_set=pod_set,
            pod_index=item.pod_index,
            node=item.node,
            gpu_indices=list(item.gpu_indices),
            milli=item.milli,
            created_at=now,
        )
        placement.full_clean()
        placement.save()


def may_cancel(user: Any, workload: Workload) -> bool:
    """Whether ``user`` may cancel the workload: its submitter, a lead of its tenant, an admin."""
    if not getattr(user, "is_authenticated", False):
        return False
    if is_site_admin(user) or (
        workload.submitter_id is not None and workload.submitter_id == user.pk
    ):
        return True
    tenant = workload.queue.tenant
    return tenant is not None and is_tenant_lead(user, tenant)


def cancel_refusal(workload: Workload) -> str | None:
    """Why the workload can no longer be cancelled, or None while it can: work that has ended
    -- a final state, or preempted and not requeued (reclaimed for sitting idle, or a bare
    pod: it has its ``finished_at``, ``choices.unfinished``). Work waiting, holding GPUs, or
    preempted and about to be requeued may be. The one rule of ``do_cancel_workload`` (so of
    the API and the ``gpupool`` CLI) and of the workload page's Cancel."""
    if is_unfinished(workload.state, workload.finished_at):
        return None
    how = ", and not requeued" if workload.state == WorkloadState.PREEMPTED else ""
    return f"{workload.qualified_name()} has already ended: it is {workload.state}{how}."


@transaction.atomic
def do_cancel_workload(
    workload: Workload, *, acting_user: Any, reason: str = "", at: datetime | None = None
) -> WorkloadTransition:
    """Cancel a workload that is waiting or running: record the transition (placements are
    released) and close its usage now; the control loop then removes its pods (a Job's by
    suspending the Job, so its controller neither makes them again nor fails the Job:
    ``control.apply.cancel_pods``). Work that has ended (``cancel_refusal``: a final state,
    or preempted and not requeued) is refused, saying so and its state; nothing changes.

    ``acting_user`` None is the system; a person must be allowed by ``may_cancel``.
    """
    if acting_user is not None and not may_cancel(acting_user, workload):
        raise PermissionDenied(
            f"Only its submitter, a lead of its tenant or an admin cancels {workload}."
        )
    current = Workload.objects.select_for_update().get(pk=workload.pk)
    refusal = cancel_refusal(current)
    if refusal is not None:
        raise ValidationError({"state": f"{refusal} Nothing was changed."})
    now = at or pool_now_after(current.submitted_at, current.admitted_at, current.started_at)
    transition = do_transition_workload(
        current,
        WorkloadState.CANCELLED,
        reason=reason.strip() or "cancelled",
        at=now,
        acting_user=acting_user,
    )
    do_close_usage(current, at=now)
    return transition
