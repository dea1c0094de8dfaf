"""Bulk writes of the B5 generator: a seeded year loaded into an empty pool (``do_load_year``).

The tables go in by ``gpupool.bulk.insert_values`` (COPY on PostgreSQL, batched inserts
elsewhere; the roll-up's bulk path too). Rows go in as given: the generator builds them within
the models' rules, and the database's constraints check them again.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

import numpy as np
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.core.management.color import no_style
from django.db import connection, models, transaction
from django.db.models import Max
from django.utils import timezone

from gpupool.accounting.bulk.year import (
    CLASSES,
    PENDING_REASONS,
    REASONS,
    FlavorPlan,
    Gang,
    NodeRoom,
    YearPlan,
    pack_gangs,
)
from gpupool.accounting.models import CapacitySample, PreemptionEvent, UsageInterval
from gpupool.bulk import analyze, insert_objects, insert_values
from gpupool.control.actions import do_finish_cycle, do_start_cycle
from gpupool.control.choices import CycleStatus
from gpupool.control.models import SchedulingCycle
from gpupool.inventory.actions import do_save_flavor, do_sync_node
from gpupool.inventory.choices import Sharing
from gpupool.inventory.models import Flavor, Gpu, Node
from gpupool.quotas.actions import do_save_priority_class, do_save_queue, do_set_queue_quota
from gpupool.quotas.choices import PreemptionPolicy
from gpupool.quotas.models import PriorityClass, Queue
from gpupool.tenancy.actions import do_grant_site_role, do_save_tenant, do_set_membership
from gpupool.tenancy.choices import MembershipRole, SiteRoleName
from gpupool.tenancy.models import Tenant
from gpupool.workloads.choices import PLACED_STATES
from gpupool.workloads.models import (
    Placement,
    PodSet,
    Workload,
    WorkloadExplanation,
    WorkloadTransition,
)


def reset_sequences(*tables: type[models.Model]) -> None:
    """Move the id sequences of ``tables`` past the ids loaded explicitly (PostgreSQL)."""
    statements = connection.ops.sequence_reset_sql(no_style(), list(tables))
    if statements:
        with connection.cursor() as cursor:
            for statement in statements:
                cursor.execute(statement)


def _next_id(model: type[models.Model]) -> int:
    """The first id after those in ``model``'s table."""
    found = model._default_manager.aggregate(last=Max("pk"))["last"]
    return int(found or 0) + 1


def _times(plan: YearPlan, seconds: Any) -> list[datetime | None]:
    """Seconds after the year's start as aware datetimes (NaN: None)."""
    start = plan.start
    return [
        None if value != value else start + timedelta(seconds=float(value))  # NaN != NaN
        for value in seconds
    ]


@dataclass
class LoadedYear:
    """What ``do_load_year`` wrote, table by table."""

    counts: dict[str, int] = field(default_factory=dict)
    users: dict[str, str] = field(default_factory=dict)  # role -> username


@transaction.atomic
def do_load_year(plan: YearPlan, *, password: str, acting_user: Any = None) -> LoadedYear:
    """Write a planned year (``year.plan_year``) into an empty pool: flavors, nodes, classes,
    tenants, queues, quotas, price and guarantee changes and users through their actions; the
    workloads, pod sets, transitions, usage intervals, preemption events and capacity samples
    in bulk. Refused when a flavor, tenant or queue of the plan already exists."""
    taken = sorted(
        [
            *Flavor.objects.filter(name__in=[f.name for f in plan.flavors]).values_list(
                "name", flat=True
            ),
            *Tenant.objects.filter(name__in=plan.tenants).values_list("name", flat=True),
            *Queue.objects.filter(name__in=[q.name for q in plan.queues]).values_list(
                "name", flat=True
            ),
        ]
    )
    if taken:
        raise ValidationError(
            {"pool": f"a seeded year loads into an empty pool; these exist: {', '.join(taken[:5])}"}
        )
    loaded = LoadedYear()
    reason = "seed-year"
    flavors = [_load_flavor(plan, flavor, reason) for flavor in plan.flavors]
    classes = _load_classes(reason)
    tenants = [
        do_save_tenant(
            Tenant(
                name=name,
                display_name=f"Team {name}",
                organization=plan.organizations[i % len(plan.organizations)],
            ),
            namespaces=[name],
            acting_user=acting_user,
            reason=reason,
        )
        for i, name in enumerate(plan.tenants)
    ]
    queues: list[Queue] = []
    for queue in plan.queues:
        queues.append(
            do_save_queue(
                Queue(
                    name=queue.name,
                    parent=None if queue.parent is None else queues[queue.parent],
                    tenant=None if queue.tenant is None else tenants[queue.tenant],
                ),
                acting_user=acting_user,
                reason=reason,
            )
        )
    for quota in plan.quotas:
        do_set_queue_quota(
            queues[quota.queue],
            flavors[quota.flavor],
            guarantee=quota.guarantee,
            deserved=quota.deserved,
            capability=quota.capability,
            acting_user=acting_user,
            reason=reason,
            at=quota.at,
        )
    half_way = plan.start + (plan.end - plan.start) / 2
    for flavor, planned in zip(flavors, plan.flavors, strict=True):
        if planned.later_price != planned.price:
            flavor.hourly_price = planned.later_price
            do_save_flavor(flavor, acting_user=acting_user, reason=reason, at=half_way)
    loaded.users = _load_users(tenants, password)
    queue_ids = np.array([q.pk for q in queues])
    tenant_of_queue = np.array([-1 if q.tenant_id is None else q.tenant_id for q in queues])
    flavor_ids = np.array([f.pk for f in flavors])
    class_ids = np.array([c.pk for c in classes])
    loaded.counts["workloads"], first_workload = _load_workloads(
        plan, queues, class_ids, flavor_ids
    )
    w = plan.workloads
    loaded.counts["usage_intervals"] = _load_intervals(
        plan, first_workload, queue_ids, tenant_of_queue, flavor_ids, class_ids
    )
    loaded.counts["preemption_events"] = _load_preemptions(
        plan, first_workload, queue_ids, tenant_of_queue
    )
    loaded.counts["workload_transitions"] = _load_transitions(plan, first_workload)
    loaded.counts["capacity_samples"] = insert_values(
        CapacitySample,
        ("flavor_id", "observed_at", "healthy_gpus"),
        ((flavors[f].pk, at, healthy) for f, at, healthy in plan.failures),
    )
    loaded.counts.update(
        tenants=len(tenants), queues=len(queues), nodes=sum(f.nodes for f in plan.flavors)
    )
    loaded.counts["placements"] = _place_running()
    _load_last_cycle(plan, loaded.counts["nodes"])
    del w
    reset_sequences(Workload, PodSet, WorkloadTransition, UsageInterval, PreemptionEvent)
    analyze(Workload, PodSet, WorkloadTransition, UsageInterval, PreemptionEvent, Placement)
    return loaded


@transaction.atomic
def do_place_running_work() -> int:
    """Place the running work of a year loaded without placements (``seed-year`` before it
    placed them): every admitted or running workload with no placement gets its pods on
    free healthy GPUs of its flavor (``year.pack_gangs``), then a finished cycle is recorded at
    the year's last cycle's times, so that what is cached per cycle (the pool's snapshot) is
    read anew. Returns how many pods were placed (0, and no cycle, when nothing lacked one).
    ``ValidationError`` on ``placements`` when the work does not fit the nodes."""
    placed = _place_running()
    last = (
        SchedulingCycle.objects.filter(finished_at__isnull=False)
        .order_by("-started_at", "-id")
        .first()
    )
    if placed and last is not None and last.finished_at is not None:
        cycle = do_start_cycle(at=last.started_at)
        do_finish_cycle(
            cycle,
            at=last.finished_at,
            status=CycleStatus.SUCCEEDED,
            nodes=last.nodes,
            workloads=last.workloads,
            pending=last.pending,
        )
    return placed


def _place_running() -> int:
    """Placements for the placed workloads that have none, packed into what the nodes'
    healthy, untaken GPUs leave free (cordoned and excluded nodes take none)."""
    lacking = Workload.objects.filter(state__in=sorted(PLACED_STATES), placements__isnull=True)
    pod_sets = list(
        PodSet.objects.filter(workload__in=lacking)
        .values_list(
            "id",
            "workload_id",
            "workload__namespace",
            "workload__name",
            "workload__started_at",
            "name",
            "count",
            "gpus",
            "flavor__name",
            "gpu_milli",
        )
        .order_by("id")
    )
    if not pod_sets:
        return 0
    held: dict[int, set[int]] = {}
    for node_id, indices in Placement.objects.filter(
        workload__state__in=sorted(PLACED_STATES)
    ).values_list("node_id", "gpu_indices"):
        held.setdefault(node_id, set()).update(indices)
    healthy: dict[int, list[int]] = {}
    for node_id, index in (
        Gpu.objects.filter(healthy=True).values_list("node_id", "index").order_by("index")
    ):
        healthy.setdefault(node_id, []).append(index)
    nodes = Node.objects.filter(
        cordoned=False, cluster_exclusion="", flavor__sharing=Sharing.EXCLUSIVE
    )
    ids: dict[str, int] = {}
    rooms = []
    for node_id, name, flavor, domain in nodes.values_list(
        "id", "name", "flavor__name", "nvlink_domain"
    ):
        ids[name] = node_id
        taken = held.get(node_id, set())
        free = tuple(i for i in healthy.get(node_id, []) if i not in taken)
        rooms.append(NodeRoom(name, flavor, domain or name, free))
    gangs = []
    for pod_set_id, _, namespace, name, _, set_name, count, gpus, flavor, milli in pod_sets:
        if flavor is None or milli is not None or gpus < 1:
            raise ValidationError(
                {
                    "placements": f"{namespace}/{name}: pod set {set_name} is not whole GPUs of "
                    "one exclusive flavor; only such work is placed here"
                }
            )
        gangs.append(Gang(pod_set_id, f"{namespace}/{name}", flavor, count, gpus))
    try:
        packed = pack_gangs(rooms, gangs)
    except ValueError as error:
        raise ValidationError({"placements": str(error)}) from None
    rows = []
    for pod_set_id, workload_id, _, _, started_at, *_ in pod_sets:
        for index, (node, indices) in enumerate(packed[pod_set_id]):
            rows.append(
                Placement(
                    workload_id=workload_id,
                    pod_set_id=pod_set_id,
                    pod_index=index,
                    node_id=ids[node],
                    gpu_indices=indices,
                    milli=None,
                    created_at=started_at or timezone.now(),
                )
            )
    return insert_objects(Placement, rows)


def _load_last_cycle(plan: YearPlan, nodes: int) -> None:
    """The record of the year's last scheduling cycle, finished at its end (what reads the
    pool once per finished cycle keys its caches by it)."""
    states = plan.workloads["state"]
    pending = int((states == "pending").sum())
    cycle = do_start_cycle(at=plan.end - timedelta(seconds=1))
    do_finish_cycle(
        cycle,
        at=plan.end,
        status=CycleStatus.SUCCEEDED,
        nodes=nodes,
        workloads=pending + int((states == "running").sum()),
        pending=pending,
    )


def _load_flavor(plan: YearPlan, flavor: FlavorPlan, reason: str) -> Flavor:
    """The flavor at its first price, and its nodes (domains of ``domain_nodes`` nodes)."""
    made = do_save_flavor(
        Flavor(
            name=flavor.name,
            sharing=Sharing.EXCLUSIVE,
            gpu_model=flavor.gpu_model,
            gpu_memory_gb=flavor.gpu_memory_gb,
            hourly_price=flavor.price,
            node_labels={"nvidia.com/gpu.product": f"NVIDIA-{flavor.gpu_model}"},
        ),
        acting_user=None,
        reason=reason,
        at=plan.start,
    )
    for index in range(flavor.nodes):
        name = f"{flavor.name}-{index:04d}"
        domain = (
            f"{flavor.name}-nvl{index // flavor.domain_nodes:03d}"
            if flavor.domain_nodes > 1
            else ""
        )
        do_sync_node(
            name,
            flavor=made,
            gpus=flavor.gpus_per_node,
            cpu=24 * flavor.gpus_per_node,
            memory_gb=256 * flavor.gpus_per_node,
            nvlink_domain=domain,
            reason=reason,
        )
    return made


def _load_classes(reason: str) -> list[PriorityClass]:
    """normal (the default), high (budgeted) and interactive (never preempts), as the plan's
    CLASSES order; existing classes of these names are kept."""
    specs: dict[str, dict[str, Any]] = {
        "normal": {"value": 0, "default": True},
        "high": {"value": 100, "budget_rate": Decimal(1)},
        "interactive": {"value": 50, "preemption_policy": PreemptionPolicy.NEVER},
    }
    found = {c.name: c for c in PriorityClass.objects.filter(name__in=CLASSES)}
    classes = []
    for name in CLASSES:
        if name not in found:
            default = specs[name].get("default", False)
            if default and PriorityClass.objects.filter(default=True).exists():
                specs[name]["default"] = False
            found[name] = do_save_priority_class(
                PriorityClass(name=name, **specs[name]), acting_user=None, reason=reason
            )
        classes.append(found[name])
    return classes


def _load_users(tenants: list[Tenant], password: str) -> dict[str, str]:
    """An admin, a finance user, and a lead and a member of the largest tenant."""
    accounts = get_user_model()
    names = {
        "admin": "b5-admin",
        "finance": "b5-finance",
        "lead": f"b5-lead-{tenants[0].name}",
        "member": f"b5-member-{tenants[0].name}",
    }
    made = {}
    for role, username in names.items():
        account = accounts.objects.filter(username=username).first()
        if account is None:
            account = accounts.objects.create_user(username=username, password=password)
        made[role] = account
    do_grant_site_role(made["admin"], role=SiteRoleName.ADMIN, acting_user=None)
    do_grant_site_role(made["finance"], role=SiteRoleName.FINANCE, acting_user=None)
    do_set_membership(made["lead"], tenants[0], role=MembershipRole.LEAD, acting_user=None)
    do_set_membership(made["member"], tenants[0], role=MembershipRole.MEMBER, acting_user=None)
    return names


def _load_workloads(
    plan: YearPlan, queues: list[Queue], class_ids: np.ndarray, flavor_ids: np.ndarray
) -> tuple[int, int]:
    """The workloads and their pod sets; returns how many and the first workload id."""
    w = plan.workloads
    first = _next_id(Workload)
    first_pod_set = _next_id(PodSet)
    namespaces = [queue.tenant.name if queue.tenant else "default" for queue in queues]
    submitted = _times(plan, w["submit"])
    started = _times(plan, w["started"])
    finished = _times(plan, w["finished"])
    pending = w["state"] == "pending"
    position = np.zeros(len(pending), dtype=np.int64)
    for queue in np.unique(w["queue"][pending]):
        mine = np.flatnonzero(pending & (w["queue"] == queue))
        position[mine] = np.arange(1, len(mine) + 1)
    reasons = np.array(PENDING_REASONS, dtype=object)[w["pending_reason"]]
    columns = (
        "id",
        "namespace",
        "name",
        "queue_id",
        "priority_class_id",
        "protected_runtime_s",
        "expected_runtime_s",
        "state",
        "submitted_at",
        "admitted_at",
        "started_at",
        "finished_at",
    )
    rows = (
        (
            first + i,
            namespaces[w["queue"][i]],
            f"job-{i:06d}",
            queues[w["queue"][i]].pk,
            int(class_ids[w["class"][i]]),
            int(w["protected"][i]),
            int(w["runtime"][i]) if i % 3 else None,
            w["state"][i],
            submitted[i],
            started[i],
            started[i],
            finished[i] if w["state"][i] != "running" else None,
        )
        for i in range(len(submitted))
    )
    count = insert_values(Workload, columns, rows)
    insert_values(  # the pending ones' explanations, as a cycle would have left them
        WorkloadExplanation,
        ("workload_id", "reason", "detail", "facts", "queue_rank"),
        (
            (first + i, reasons[i], f"waiting: {reasons[i]}", {}, float(position[i]))
            for i in np.flatnonzero(pending).tolist()
        ),
    )
    insert_values(
        PodSet,
        ("id", "workload_id", "name", "count", "gpus", "flavor_id", "cpu", "memory_gb"),
        (
            (
                first_pod_set + i,
                first + i,
                "main",
                int(w["pods"][i]),
                int(w["per_pod"][i]),
                int(flavor_ids[w["flavor"][i]]),
                8 * int(w["per_pod"][i]),
                64 * int(w["per_pod"][i]),
            )
            for i in range(len(submitted))
        ),
    )
    return count, first


def _load_intervals(
    plan: YearPlan,
    first_workload: int,
    queue_ids: np.ndarray,
    tenant_of_queue: np.ndarray,
    flavor_ids: np.ndarray,
    class_ids: np.ndarray,
) -> int:
    """The usage intervals (open ones have no end)."""
    w, iv = plan.workloads, plan.intervals
    workload = iv["workload"]
    queue = w["queue"][workload]
    columns = (
        "workload_id",
        "tenant_id",
        "queue_id",
        "flavor_id",
        "priority_class_id",
        "gpus",
        "started_at",
        "ended_at",
    )
    starts = _times(plan, iv["start"])
    ends = _times(plan, iv["end"])
    workload_ids = (workload + first_workload).tolist()
    tenant_ids = tenant_of_queue[queue].tolist()
    queue_id_list = queue_ids[queue].tolist()
    flavor_id_list = flavor_ids[w["flavor"][workload]].tolist()
    class_id_list = class_ids[iv["class"]].tolist()
    gpus = iv["gpus"].tolist()
    return insert_values(
        UsageInterval,
        columns,
        (
            (
                workload_ids[i],
                None if tenant_ids[i] < 0 else tenant_ids[i],
                queue_id_list[i],
                flavor_id_list[i],
                class_id_list[i],
                gpus[i],
                starts[i],
                ends[i],
            )
            for i in range(len(starts))
        ),
    )


def _load_preemptions(
    plan: YearPlan, first_workload: int, queue_ids: np.ndarray, tenant_of_queue: np.ndarray
) -> int:
    """The preemption events, each naming its victim and (preempt, reclaim) its preemptor."""
    w, p = plan.workloads, plan.preemptions
    at = _times(plan, p["at"])

    def tenant(queue: int) -> int | None:
        found = int(tenant_of_queue[queue])
        return None if found < 0 else found

    rows = []
    for i, victim in enumerate(p["victim"].tolist()):
        preemptor = int(p["preemptor"][i])
        victim_queue = int(w["queue"][victim])
        preemptor_queue = int(w["queue"][preemptor]) if preemptor >= 0 else None
        rows.append(
            (
                at[i],
                REASONS[int(p["reason"][i])],
                first_workload + victim,
                int(queue_ids[victim_queue]),
                tenant(victim_queue),
                None if preemptor < 0 else first_workload + preemptor,
                None if preemptor_queue is None else int(queue_ids[preemptor_queue]),
                None if preemptor_queue is None else tenant(preemptor_queue),
                int(p["gpus"][i]),
                round(Decimal(float(p["lost_gpu_hours"][i])), 4),
            )
        )
    return insert_values(
        PreemptionEvent,
        (
            "at",
            "reason",
            "victim_id",
            "victim_queue_id",
            "victim_tenant_id",
            "preemptor_id",
            "preemptor_queue_id",
            "preemptor_tenant_id",
            "gpus_freed",
            "lost_gpu_hours",
        ),
        rows,
    )


def _load_transitions(plan: YearPlan, first_workload: int) -> int:
    """Every workload's state changes, with when and why."""
    t = plan.transitions
    at = _times(plan, t["at"])
    workloads = (t["workload"] + first_workload).tolist()
    return insert_values(
        WorkloadTransition,
        ("workload_id", "from_state", "to_state", "at", "reason"),
        ((workloads[i], t["from"][i], t["to"][i], at[i], t["reason"][i]) for i in range(len(at))),
    )
