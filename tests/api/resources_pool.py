"""A small pool behind the API's ``world`` for the resources endpoints (nodes, queues, workloads,
preemptions, cycles, fragmentation), built through the actions and kept in ``world.objects``.

Two nodes of 8 h100 GPUs (n1 in NVLink domain d1, n2 in d2), classes ``normal`` (default) and
``urgent`` (budgeted), queue ``root`` with leaves ``nlp-train`` (tenant nlp) and
``vision-train`` (tenant vision), each deserving 8 GPUs with a capability of 16, one pending
workload ``train-1`` in each tenant's namespace, submitted by its lead, a budget of 100
``urgent`` GPU-hours this month and one preemption event for each tenant, and one finished
scheduling cycle.

The ``pool_*`` functions are permission-matrix targets: the URL arguments of the caller's own
tenant's object and of the other tenant's.
"""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from typing import Any

from django.core.cache import cache
from django.utils import timezone
from domain_builders import node, priority_class, queue, quota

from gpupool.accounting.actions import do_record_preemption
from gpupool.control.actions import do_finish_cycle, do_start_cycle
from gpupool.inventory.models import Flavor
from gpupool.quotas.actions import do_grant_budget
from gpupool.quotas.models import PriorityClass
from gpupool.workloads.actions import PodSetSpec, do_submit_workload
from gpupool.workloads.models import Workload


def pool(world: Any) -> dict[str, Any]:
    """The pool (built once per world)."""
    if "pool" in world.objects:
        return world.objects["pool"]
    cache.clear()  # the core's view of the pool is cached per cycle: start from none
    h100 = Flavor.objects.get(name="h100")
    node("n1", h100, gpus=8, nvlink_domain="d1")
    node("n2", h100, gpus=8, nvlink_domain="d2")
    priority_class("normal", default=True)
    priority_class("urgent", value=100, budget_rate=Decimal(1))
    root = queue("root")
    nlp = queue("nlp-train", parent=root, tenant=world.own, max_protected_runtime_s=3600)
    vision = queue("vision-train", parent=root, tenant=world.other)
    quota(nlp, h100, 0, 8, 16)
    quota(vision, h100, 0, 8, 16)
    lead = world.own.memberships.get(role="lead").user
    other_lead = world.other.memberships.get(role="lead").user
    own_workload = submit("train-1", nlp, lead)
    other_workload = submit("train-1", vision, other_lead)
    now = timezone.now()
    month = now.date().replace(day=1)
    budgets = {
        tenant.name: do_grant_budget(
            tenant,
            PriorityClass.objects.get(name="urgent"),
            period_start=month,
            period_end=(month + timedelta(days=32)).replace(day=1),
            gpu_hours=100,
            acting_user=None,
        )
        for tenant in (world.own, world.other)
    }
    events = {
        "own": do_record_preemption(
            own_workload, reason="node-failure", at=now, gpus_freed=4, lost_gpu_hours=2
        ),
        "other": do_record_preemption(
            other_workload, reason="admin", at=now, gpus_freed=4, lost_gpu_hours=1
        ),
    }
    cycle = do_finish_cycle(
        do_start_cycle(at=now - timedelta(seconds=2)),
        at=now,
        status="succeeded",
        nodes=2,
        workloads=2,
        pending=2,
    )
    made = {
        "h100": h100,
        "root": root,
        "nlp": nlp,
        "vision": vision,
        "own_workload": own_workload,
        "other_workload": other_workload,
        "budgets": budgets,
        "events": events,
        "cycle": cycle,
    }
    world.objects["pool"] = made
    return made


def submit(name: str, on: Any, by: Any, gpus: int = 4, count: int = 1, **fields: Any) -> Workload:
    """A workload of ``count`` pods of ``gpus`` h100 GPUs each, running ``pytorch``,
    submitted three hours ago unless told."""
    spec = PodSetSpec(
        count, gpus=gpus, flavor=Flavor.objects.get(name="h100"), image="pytorch", cpu=8
    )
    values = {"at": timezone.now() - timedelta(hours=3)} | fields
    return do_submit_workload(name, queue=on, pod_sets=[spec], submitter=by, **values)


def pool_only(world: Any) -> dict[str, dict[str, str]]:
    """Matrix target of a list that needs the pool but no object."""
    pool(world)
    return {"own": {}, "other": {}}


def nodes(world: Any) -> dict[str, dict[str, str]]:
    """Matrix target: node n1 (nodes belong to the pool, not to a tenant)."""
    pool(world)
    return {"own": {"name": "n1"}, "other": {"name": "n1"}}


def gpus(world: Any) -> dict[str, dict[str, str]]:
    """Matrix target: GPU 0 of node n1."""
    pool(world)
    return {"own": {"name": "n1", "index": "0"}, "other": {"name": "n1", "index": "0"}}


def queues(world: Any) -> dict[str, dict[str, str]]:
    """Matrix target: the tenants' leaf queues."""
    pool(world)
    return {"own": {"name": "nlp-train"}, "other": {"name": "vision-train"}}


def quotas(world: Any) -> dict[str, dict[str, str]]:
    """Matrix target: the leaf queues' h100 quotas."""
    pool(world)
    return {
        "own": {"name": "nlp-train", "flavor": "h100"},
        "other": {"name": "vision-train", "flavor": "h100"},
    }


def classes(world: Any) -> dict[str, dict[str, str]]:
    """Matrix target: the default class (public)."""
    pool(world)
    return {"own": {"name": "normal"}, "other": {"name": "normal"}}


def budgets(world: Any) -> dict[str, dict[str, str]]:
    """Matrix target: each tenant's urgent budget."""
    made = pool(world)["budgets"]
    return {"own": {"pk": str(made["nlp"].pk)}, "other": {"pk": str(made["vision"].pk)}}


def preemptions(world: Any) -> dict[str, dict[str, str]]:
    """Matrix target: the preemption of each tenant's workload."""
    made = pool(world)["events"]
    return {"own": {"pk": str(made["own"].pk)}, "other": {"pk": str(made["other"].pk)}}


def cycles(world: Any) -> dict[str, dict[str, str]]:
    """Matrix target: the finished cycle (the pool's, not a tenant's)."""
    cycle = pool(world)["cycle"]
    return {"own": {"pk": str(cycle.pk)}, "other": {"pk": str(cycle.pk)}}


def workloads(world: Any) -> dict[str, dict[str, str]]:
    """Matrix target: ``train-1`` of the caller's tenant and of the other."""
    pool(world)
    return {
        "own": {"namespace": "nlp", "name": "train-1"},
        "other": {"namespace": "vision", "name": "train-1"},
    }
