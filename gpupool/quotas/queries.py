"""What people read about queues, classes and budgets, as functions the API and the pages
share: the queue tree with its quotas, queue lengths and what each queue holds, borrows and
lends now (the core's numbers, ``scheduler.shares`` on the last cycle's view of the pool); the
budgets with their ledger balances.

Every tenant sees every queue at the queue level (DESIGN 2: usage, shares and who borrows from
whom), so nothing here is scoped to a tenant.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from django.contrib.auth import get_user_model
from django.db.models import Count, IntegerField, OuterRef, Prefetch, Q, QuerySet, Subquery, Sum
from django.db.models.functions import Coalesce

from gpupool.api.access import Access
from gpupool.control.queries import pool_figures
from gpupool.control.snapshot import SnapshotError
from gpupool.quotas.choices import LedgerEntryKind, QuotaRequestState
from gpupool.quotas.models import (
    LEDGER_QUANTUM,
    PriorityBudget,
    PriorityClass,
    Queue,
    QueueQuota,
    QuotaRequest,
)
from gpupool.scheduler.shares import QueueShare
from gpupool.scheduler.types import MILLI
from gpupool.tenancy.choices import SiteRoleName
from gpupool.workloads.choices import PLACED_STATES, WorkloadState
from gpupool.workloads.models import Workload

ZERO = Decimal(0)


CHILDREN_LIST = "children_list"
QUOTAS_LIST = "quotas_list"


def children_of(queue: Queue) -> list[Queue]:
    """The queue's child queues: ``queue_rows``' prefetched list, else one query."""
    prefetched: list[Queue] | None = getattr(queue, CHILDREN_LIST, None)
    return list(queue.children.all()) if prefetched is None else prefetched


def quotas_of(queue: Queue) -> list[QueueQuota]:
    """The queue's quotas with their flavors: ``queue_rows``' prefetched list, else a query."""
    prefetched: list[QueueQuota] | None = getattr(queue, QUOTAS_LIST, None)
    if prefetched is None:
        return list(queue.quotas.select_related("flavor"))
    return prefetched


def queue_rows() -> QuerySet[Queue]:
    """Queues with their parent, tenant, children, quotas and queue lengths, in a fixed number
    of queries whatever their number."""
    return (
        Queue.objects.select_related("parent", "tenant")
        .prefetch_related(
            # Into lists (``to_attr``): Django builds a queryset per queue and relation
            # otherwise, 0.3 s of a 400-queue page (B5's year); ``children_of``, ``quotas_of``.
            Prefetch(
                "children",
                queryset=Queue.objects.only("id", "name", "parent_id"),
                to_attr=CHILDREN_LIST,
            ),
            Prefetch(
                "quotas", queryset=QueueQuota.objects.select_related("flavor"), to_attr=QUOTAS_LIST
            ),
        )
        .annotate(
            pending_workloads=_workloads_in({WorkloadState.PENDING}),
            placed_workloads=_workloads_in(PLACED_STATES),
        )
        .order_by("name")
    )


def queues_with_quotas() -> QuerySet[Queue]:
    """Queues with their tenant and quotas (``quotas_of``) only: what the Queues page shows
    of each row. ``queue_rows`` without the children and queue lengths (for 40 rows of B5's
    year, 400 child instances and two counts a row the page does not show)."""
    return (
        Queue.objects.select_related("tenant")
        .prefetch_related(
            Prefetch(
                "quotas", queryset=QueueQuota.objects.select_related("flavor"), to_attr=QUOTAS_LIST
            )
        )
        .order_by("name")
    )


def _workloads_in(states: Iterable[str]) -> Coalesce:
    """How many of the queue's workloads are in ``states``: one count on the (state, queue)
    index per queue, never a join over every workload the pool has ever run."""
    counted = (
        Workload.objects.filter(queue_id=OuterRef("pk"), state__in=sorted(states))
        .order_by()
        .values("queue_id")
        .annotate(n=Count("pk"))
        .values("n")
    )
    return Coalesce(Subquery(counted, output_field=IntegerField()), 0)


@dataclass(frozen=True, slots=True)
class QueueUsage:
    """What every queue holds now, per flavor, and which cycle's view of the pool says so."""

    shares: Mapping[str, Mapping[str, QueueShare]]
    cycle_id: int | None
    at: datetime | None
    unavailable: str  # why there are no figures (the pool cannot be planned), else ""


def queue_usage() -> QueueUsage:
    """Allocated, borrowed and lent per queue and flavor as of the last finished cycle."""
    try:
        view = pool_figures()
    except SnapshotError as error:
        return QueueUsage({}, None, None, str(error))
    return QueueUsage(view.value.shares, view.cycle_id, view.at, "")


@dataclass(frozen=True, slots=True)
class QuotaRow:
    """One flavor of one queue: its quota levels (None without a quota) and what it holds
    now, borrows and lends, in GPUs (None when the pool's figures are unavailable)."""

    flavor: str
    guarantee: Decimal | None
    deserved: Decimal | None
    capability: Decimal | None
    allocated: Decimal | None
    borrowed: Decimal | None
    lent: Decimal | None


def _gpus(milli: int) -> Decimal:
    return Decimal(milli) / MILLI


def quota_rows(queue: Queue, usage: QueueUsage) -> list[QuotaRow]:
    """The queue's flavors: those it has a quota of, then those it uses without one."""
    known = not usage.unavailable
    held = usage.shares.get(queue.name, {})
    rows: list[QuotaRow] = []
    for quota in sorted(quotas_of(queue), key=lambda q: q.flavor.name):
        share = held.get(quota.flavor.name, QueueShare(0, 0, 0))
        rows.append(
            QuotaRow(
                quota.flavor.name,
                quota.guarantee,
                quota.deserved,
                quota.capability,
                _gpus(share.allocated) if known else None,
                _gpus(share.borrowed) if known else None,
                _gpus(share.lent) if known else None,
            )
        )
    with_quota = {row.flavor for row in rows}
    for flavor, share in sorted(held.items()):
        if flavor not in with_quota:
            rows.append(
                QuotaRow(
                    flavor, None, None, None, _gpus(share.allocated), _gpus(share.borrowed), ZERO
                )
            )
    return rows


def budget_rows() -> QuerySet[PriorityBudget]:
    """Budgets with their tenant, class and ledger sums (balance, spent, held in open
    reservations), in a fixed number of queries."""
    entries = "entries__gpu_hours"

    def total(kinds: list[str] | None = None) -> Coalesce:
        condition = Q(entries__kind__in=kinds) if kinds is not None else None
        return Coalesce(Sum(entries, filter=condition), ZERO)

    return (
        PriorityBudget.objects.select_related("tenant", "priority_class")
        .annotate(
            remaining=total(),
            spent=total([LedgerEntryKind.SPEND]),
            reserved=total([LedgerEntryKind.RESERVE, LedgerEntryKind.SETTLE]),
        )
        .order_by("tenant__name", "priority_class__name", "-period_start")
    )


def ledger_mismatches() -> list[tuple[PriorityBudget, Decimal]]:
    """The budgets whose kept balance (``balance_gpu_hours``) differs from the sum of their
    ledger entries, each with that sum (empty when every balance is right): the check that
    the ledger, the source of truth, and the balance the loop reads agree. Sums every entry
    once (``manage.py gpupool check-ledger``)."""
    rows = (
        PriorityBudget.objects.select_related("tenant", "priority_class")
        .annotate(ledger=Coalesce(Sum("entries__gpu_hours"), ZERO))
        .order_by("pk")
    )
    # At the ledger's precision on every database (SQLite's SUM drops the trailing zeros).
    sums = ((budget, Decimal(budget.ledger).quantize(LEDGER_QUANTUM)) for budget in rows)
    return [
        (budget, ledger) for budget, ledger in sums if ledger != Decimal(budget.balance_gpu_hours)
    ]


def quota_request_rows() -> QuerySet[QuotaRequest]:
    """Quota and budget requests with what a list shows (tenant, target, people) and when
    each took its latest step (``last_step_at``), which the lists sort by."""
    return QuotaRequest.objects.select_related(
        "tenant", "queue", "flavor", "priority_class", "requested_by", "decided_by"
    ).annotate(last_step_at=last_step_at())


def last_step_at() -> Coalesce:
    """When a request took its latest step: withdrawn, applied, decided (approved or
    rejected), submitted, or, a draft, made -- its stamps, the latest step's first (a request
    has the stamps of the steps it took; a withdrawn one has no decision). The Approvals
    page lists decided and withdrawn requests by it, and the requests API sorts by it
    (``?ordering=-last_step_at``), so their CSV is in the page's order."""
    return Coalesce("withdrawn_at", "applied_at", "decided_at", "submitted_at", "created_at")


def without_others_drafts(
    requests: QuerySet[QuotaRequest], user_id: int | None
) -> QuerySet[QuotaRequest]:
    """The ``requests`` less the drafts of anyone but ``user_id``: a draft is its requester's
    own until they submit it (DESIGN 2: ``draft -> submitted``; only the requester changes or
    submits a draft), so neither the admins nor the tenant's other leads see it before."""
    return requests.filter(~Q(state=QuotaRequestState.DRAFT) | Q(requested_by_id=user_id))


def visible_quota_requests(
    requests: QuerySet[QuotaRequest], access: Access
) -> QuerySet[QuotaRequest]:
    """The ``requests`` that ``access`` may see: admins and finance every one
    (``Access.reads_every_request``), leads their tenants' (a member who leads no tenant of a
    request does not see it); a draft only its requester (``without_others_drafts``)."""
    shown = without_others_drafts(requests, access.user_id)
    if access.reads_every_request:
        return shown
    return shown.filter(tenant__in=access.lead_tenant_ids)


def other_deciders(user_id: int | None) -> list[str]:
    """The usernames of the admins (superusers and holders of the site ``admin`` role) who
    could decide a request ``user_id`` filed: every active admin but them, since nobody
    approves their own request (DESIGN 2). Empty where they are the only admin."""
    admins = get_user_model().objects.filter(
        Q(is_superuser=True) | Q(site_roles__role=SiteRoleName.ADMIN), is_active=True
    )
    if user_id is not None:
        admins = admins.exclude(pk=user_id)
    return sorted(set(admins.values_list("username", flat=True)))


def queues_led_by(access: Access) -> QuerySet[Queue]:
    """The queues ``access`` may ask quota for: those of the tenants it leads (admins:
    every queue)."""
    queues = Queue.objects.all()
    return queues if access.admin else queues.filter(tenant__in=access.lead_tenant_ids)


@dataclass(frozen=True, slots=True)
class IdlePolicyInForce:
    """The idle policy as the control loop applies it: each class's timeouts, and the queues
    that override them for their workloads (seconds; None: never, or the class's)."""

    classes: list[PriorityClass]
    overrides: list[Queue]

    @property
    def any(self) -> bool:
        """Whether anything is ever alerted about or reclaimed for sitting idle."""
        return any(
            c.idle_alert_after_s is not None or c.idle_reclaim_after_s is not None
            for c in self.classes
        ) or any(
            q.idle_alert_after_s is not None or q.idle_reclaim_after_s is not None
            for q in self.overrides
        )


def idle_policy_in_force() -> IdlePolicyInForce:
    """Every priority class with its idle timeouts (highest value first), and the queues that
    override them (by name): what the Queues page and the docs call the idle policy."""
    return IdlePolicyInForce(
        classes=list(PriorityClass.objects.order_by("-value", "name")),
        overrides=list(
            Queue.objects.select_related("tenant")
            .filter(Q(idle_alert_after_s__isnull=False) | Q(idle_reclaim_after_s__isnull=False))
            .order_by("name")
        ),
    )
