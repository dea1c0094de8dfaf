"""Builders for the domain apps' tests: small pools that read like the sentence they test.

Everything goes through the actions (as production code does), so a builder that succeeds
has passed the same validation.
"""

from __future__ import annotations

from datetime import date, timedelta
from decimal import Decimal
from typing import Any

from django.contrib.auth import get_user_model
from django.utils import timezone

from gpupool.inventory.actions import do_save_flavor, do_sync_node
from gpupool.inventory.models import Flavor, Node
from gpupool.quotas.actions import do_save_priority_class, do_save_queue, do_set_queue_quota
from gpupool.quotas.models import PriorityClass, Queue, QueueQuota
from gpupool.tenancy.actions import do_grant_site_role, do_save_tenant, do_set_membership
from gpupool.tenancy.models import Tenant

# The apps that hold domain state (everything but Django's own and the pure core).
DOMAIN_APPS = (
    "audit",
    "tenancy",
    "inventory",
    "quotas",
    "workloads",
    "accounting",
    "control",
    "notifications",
)


def this_month(today: date | None = None, *, months: int = 0) -> tuple[date, date]:
    """The month holding ``today`` (the project's today, ``timezone.localdate()``, unless told)
    as a period: its first day and the first day of the next month (a period's end is the day
    after it). ``months`` moves that many months on (``-1``: last month, ended today or
    before; ``1``: next month), so a test's dates stay where it means them whatever the day."""
    first = (today or timezone.localdate()).replace(day=1)
    index = first.year * 12 + first.month - 1 + months
    start = date(index // 12, index % 12 + 1, 1)
    return start, (start + timedelta(days=31)).replace(day=1)


def period_fields(today: date | None = None, *, months: int = 0) -> dict[str, str]:
    """``this_month``'s period as the API, the forms and the CLI take it: ``period_start`` and
    ``period_end`` in ``YYYY-MM-DD``."""
    start, end = this_month(today, months=months)
    return {"period_start": start.isoformat(), "period_end": end.isoformat()}


def flavor(name: str = "h100", **fields: Any) -> Flavor:
    """A flavor; exclusive 80 GB at 2.5 per hour unless told otherwise."""
    values: dict[str, Any] = {
        "sharing": "exclusive",
        "gpu_memory_gb": 80,
        "hourly_price": Decimal("2.5"),
    } | fields
    return do_save_flavor(Flavor(name=name, **values), acting_user=None)


def node(name: str, of: Flavor, gpus: int = 8, **fields: Any) -> Node:
    """A node of ``gpus`` GPUs (``unhealthy_gpus=[...]`` marks some broken)."""
    values: dict[str, Any] = {"cpu": 192, "memory_gb": 2048} | fields
    return do_sync_node(name, flavor=of, gpus=gpus, **values)


def queue(name: str, parent: Queue | None = None, **fields: Any) -> Queue:
    """A queue under ``parent``."""
    return do_save_queue(Queue(name=name, parent=parent, **fields), acting_user=None)


def quota(on: Queue, of: Flavor, guarantee: Any, deserved: Any, capability: Any) -> QueueQuota:
    """Set ``on``'s quota of ``of``."""
    return do_set_queue_quota(
        on, of, guarantee=guarantee, deserved=deserved, capability=capability, acting_user=None
    )


MIG_FLAVOR = "a100-3g.40gb"  # the MIG flavor of ``mig_beside``


def mig_beside(pool: Any, **node_fields: Any) -> Flavor:
    """Add to the two-team pool (``nlp_queue``, ``vision_queue``) MIG node m1 of flavor
    ``MIG_FLAVOR`` (8 A100 cards of two 3g.40gb instances each; ``node_fields`` such as
    ``unhealthy_gpus``) and a quota of 4 / 8 / 16 instances of it for each team. Returns the
    flavor, also kept as ``pool.mig``."""
    mig = flavor(
        MIG_FLAVOR, sharing="mig", gpu_model="A100-80GB", mig_profile="3g.40gb", gpu_memory_gb=40
    )
    node("m1", mig, gpus=8, mig_layout={"3g.40gb": 2}, **node_fields)
    quota(pool.nlp_queue, mig, 4, 8, 16)
    quota(pool.vision_queue, mig, 4, 8, 16)
    pool.mig = mig
    return mig


def priority_class(name: str, value: int = 0, **fields: Any) -> PriorityClass:
    """A priority class (PreemptLowerPriority, free, not default unless told)."""
    return do_save_priority_class(PriorityClass(name=name, value=value, **fields), acting_user=None)


def user(username: str, *, admin: bool = False) -> Any:
    """A user; ``admin=True`` also grants the site admin role."""
    made = get_user_model().objects.create_user(username=username, password=None)
    if admin:
        do_grant_site_role(made, role="admin", acting_user=None)
    return made


def tenant(
    name: str,
    *,
    lead: Any = None,
    members: tuple[Any, ...] = (),
    namespaces: tuple[str, ...] = (),
) -> Tenant:
    """A tenant with an optional lead, members and namespaces."""
    made = do_save_tenant(
        Tenant(name=name, organization="org"), namespaces=namespaces, acting_user=None
    )
    if lead is not None:
        do_set_membership(lead, made, role="lead", acting_user=None)
    for member in members:
        do_set_membership(member, made, role="member", acting_user=None)
    return made


def explained(
    workload: Any,
    reason: str = "",
    detail: str = "",
    facts: dict[str, Any] | None = None,
    queue_rank: float | None = None,
) -> Any:
    """Give ``workload`` (a ``Workload`` or its id) the explanation a cycle would have
    written, replacing any it has (``WorkloadExplanation``); returns the row."""
    from gpupool.workloads.models import WorkloadExplanation

    pk = getattr(workload, "pk", workload)
    row, _ = WorkloadExplanation.objects.update_or_create(
        workload_id=pk,
        defaults={
            "reason": reason,
            "detail": detail,
            "facts": facts or {},
            "queue_rank": queue_rank,
        },
    )
    if hasattr(workload, "_state"):  # the instance reads the new row, not one it kept
        workload.__dict__.pop("_queue_position", None)
        workload._state.fields_cache.pop("explanation", None)
    return row


def core_explained(workload: Any, at: Any = None) -> Any:
    """Give ``workload`` the explanation the decision core gives it on the pool as the
    database holds it now (``control.snapshot.build_snapshot``, then ``scheduler.cycle.plan``):
    its reason, sentence and facts, as a cycle would write them (``explained``; its rank the
    core's position, none for work set aside as never fitting), so that a test's explanation
    cannot drift from the core's. Returns the core's ``PendingExplanation``."""
    from gpupool.control.queries import pool_policy
    from gpupool.control.record import json_facts
    from gpupool.control.snapshot import build_snapshot
    from gpupool.scheduler.cycle import plan
    from gpupool.scheduler.explain import never_fits

    policy = pool_policy()
    database = build_snapshot(now=at or timezone.now(), policy=policy)
    name = workload.qualified_name()
    told = next(
        p for p in plan(database.snapshot, policy, database.now).pending if p.workload == name
    )
    facts = json_facts(told.facts)  # as the cycle writes them
    rank = None if never_fits(facts) else float(told.position)
    explained(workload, told.reason, told.detail, facts, queue_rank=rank)
    return told
