"""A small pool behind the API's ``world`` for the resources endpoints (nodes, queues, workloads,
preemptions, cycles, fragmentation), built through the actions and kept in ``world.objects``.

Two nodes of 8 h100 GPUs (n1 in NVLink domain d1, n2 in d2), classes ``normal`` (default) and
``urgent`` (budgeted), queue ``root`` with leaves ``nlp-train`` (tenant nlp) and
``vision-train`` (tenant vision), each deserving 8 GPUs with a capability of 16, and one pending
workload ``train-1`` in each tenant's namespace, submitted by its lead.
"""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from typing import Any

from django.core.cache import cache
from django.utils import timezone
from domain_builders import node, priority_class, queue, quota

from gpupool.inventory.models import Flavor
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
    made = {
        "h100": h100,
        "root": root,
        "nlp": nlp,
        "vision": vision,
        "own_workload": submit("train-1", nlp, lead),
        "other_workload": submit("train-1", vision, other_lead),
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


def workloads(world: Any) -> dict[str, dict[str, str]]:
    """Matrix target: ``train-1`` of the caller's tenant and of the other."""
    pool(world)
    return {
        "own": {"namespace": "nlp", "name": "train-1"},
        "other": {"namespace": "vision", "name": "train-1"},
    }
