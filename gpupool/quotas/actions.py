"""State changes of quotas: queues, queue quotas, priority classes, budgets and quota requests.

Every action is atomic, validates before it writes, and records an audit event with the
object's fields before and after; a refused action leaves the database unchanged.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any, Protocol

from django.core.exceptions import NON_FIELD_ERRORS, PermissionDenied, ValidationError
from django.db import connection, transaction
from django.db.models import F, Value
from django.db.models.expressions import RawSQL
from django.utils import timezone

from gpupool.api.errors import SELF_NAMING
from gpupool.audit.actions import (
    audited_change,
    delete_audited,
    model_snapshot,
    record_audit_change,
    record_audit_event,
    record_system_audit_rows,
    save_audited,
    snapshot_fields,
    values_snapshots,
)
from gpupool.bulk import insert_values
from gpupool.control.clock import pool_now
from gpupool.inventory.models import Flavor
from gpupool.notifications.notify import notify_quota_request
from gpupool.quotas.choices import (
    ACTIVE_WHAT_IF_STATES,
    LedgerEntryKind,
    QuotaRequestKind,
    QuotaRequestState,
    WhatIfState,
)
from gpupool.quotas.models import (
    LEDGER_QUANTUM,
    NO_DEFAULT_LEFT,
    BudgetLedgerEntry,
    PriorityBudget,
    PriorityClass,
    Queue,
    QueueQuota,
    QueueQuotaChange,
    QuotaRequest,
    WhatIfRun,
    budget_name,
    fmt,
    guarantee_problems,
)
from gpupool.tenancy.models import Tenant, is_site_admin, is_tenant_lead
from gpupool.workloads.choices import unfinished
from gpupool.workloads.models import Workload

# ----------------------------------------------------------------------------- queues


@transaction.atomic
def do_save_queue(queue: Queue, *, acting_user: Any, reason: str = "") -> Queue:
    """Create or update a queue (parent, tenant, weight, lending and protection settings);
    the tree has one root (DESIGN §2: a root per pool), so a queue without a parent is
    refused while another root exists."""
    if queue.parent_id is None:
        # Locked, so two roots created at once cannot both see none.
        roots = Queue.objects.select_for_update().filter(parent__isnull=True)
        if queue.pk is not None:
            roots = roots.exclude(pk=queue.pk)
        root = roots.order_by("pk").first()
        if root is not None:
            raise ValidationError(
                {
                    "parent": f"queue {queue.name} needs a parent: the pool's queue tree has "
                    f"one root, {root.name}, which stands for the whole pool (name it, or one "
                    f"of its descendants, as parent)"
                }
            )
    return save_audited(queue, action="quotas.save_queue", acting_user=acting_user, reason=reason)


def queue_history_refusal(queue: Queue) -> str:
    """Why ``queue`` cannot be deleted because of the work it holds or held (empty when it
    never held any): its workloads, usage and preemptions are accounting history, which is
    kept (DESIGN 2, usage and cost), so such a queue is retired by removing its quotas (a
    queue with no quota for a flavor may use none of its GPUs) instead of being deleted."""
    from gpupool.accounting.models import UsageInterval  # accounting builds on quotas

    workloads = queue.workloads.count()
    if not workloads:
        return ""
    unfinished_count = queue.workloads.filter(unfinished()).count()
    if unfinished_count:
        return (
            f"queue {queue.name} still has {unfinished_count} workload"
            f"{'s' * (unfinished_count != 1)} that {'have' if unfinished_count != 1 else 'has'} "
            f"not ended, and its history is kept once they have: it cannot be deleted; to "
            f"retire it, remove its quotas (a queue with no quota gets no GPUs) and let its "
            f"work end or cancel it"
        )
    first = UsageInterval.objects.filter(queue=queue).order_by("started_at").first()
    since = f", usage since {first.started_at:%Y-%m-%d}" if first is not None else ""
    return (
        f"queue {queue.name} has history ({workloads} workload{'s' * (workloads != 1)}{since}), "
        f"which accounting keeps: it cannot be deleted; remove its quotas to retire it (a "
        f"queue with no quota gets no GPUs)"
    )


@transaction.atomic
def do_delete_queue(queue: Queue, *, acting_user: Any, reason: str = "") -> None:
    """Delete a queue without children or history (``queue_history_refusal``), with its
    quotas."""
    children = list(queue.children.order_by("name").values_list("name", flat=True))
    if children:
        what = "the root of the queue tree" if queue.parent_id is None else "a parent queue"
        raise ValidationError(
            {
                "queue": f"queue {queue.name} is {what} with "
                f"{len(children)} child queue{'s' * (len(children) != 1)} "
                f"({', '.join(children[:10])}{', ...' if len(children) > 10 else ''}): a queue "
                f"is deleted only once it has no children; delete or move them first"
            }
        )
    kept = queue_history_refusal(queue)
    if kept:
        raise ValidationError({"queue": kept})
    for quota in list(queue.quotas.select_related("flavor")):
        do_delete_queue_quota(quota, acting_user=acting_user, reason=f"queue {queue} deleted")
    delete_audited(queue, action="quotas.delete_queue", acting_user=acting_user, reason=reason)


@transaction.atomic
def do_set_queue_quota(
    queue: Queue,
    flavor: Flavor,
    *,
    guarantee: Decimal | int | str,
    deserved: Decimal | int | str,
    capability: Decimal | int | str,
    acting_user: Any,
    reason: str = "",
    at: datetime | None = None,
) -> QueueQuota:
    """Create or change ``queue``'s quota of ``flavor``; refused if it breaks a tree rule. The
    new levels enter the quota history from ``at`` (default the pool's clock, ``pool_now``:
    the history is read beside the usage the loop stamps with it)."""
    # Serialize quota changes so two concurrent edits cannot both fit separately.
    Queue.objects.select_for_update().filter(pk=queue.pk).first()
    quota = QueueQuota.objects.filter(queue=queue, flavor=flavor).first()
    if quota is None:
        quota = QueueQuota(queue=queue, flavor=flavor)
    quota.guarantee = Decimal(str(guarantee))
    quota.deserved = Decimal(str(deserved))
    quota.capability = Decimal(str(capability))
    save_audited(quota, action="quotas.set_queue_quota", acting_user=acting_user, reason=reason)
    quota.refresh_from_db()
    _record_quota(queue, flavor, quota, at or pool_now())
    return quota


@transaction.atomic
def do_delete_queue_quota(
    quota: QueueQuota, *, acting_user: Any, reason: str = "", at: datetime | None = None
) -> None:
    """Remove a queue's quota of one flavor (its children then count against the next holder);
    the history records zero levels from ``at`` (default the pool's clock)."""
    problems = guarantee_problems(quota.flavor, quota_overrides={quota.queue_id: None})
    if problems:
        raise ValidationError({"guarantee": "; ".join(problems)})
    queue, flavor = quota.queue, quota.flavor
    delete_audited(
        quota, action="quotas.delete_queue_quota", acting_user=acting_user, reason=reason
    )
    _record_quota(queue, flavor, None, at or pool_now())


def _record_quota(queue: Queue, flavor: Flavor, quota: QueueQuota | None, at: datetime) -> None:
    """Append the quota's levels (zero when removed) to its history when they changed."""
    levels = (
        (quota.guarantee, quota.deserved, quota.capability)
        if quota is not None
        else (Decimal(0), Decimal(0), Decimal(0))
    )
    latest = (
        QueueQuotaChange.objects.filter(queue=queue, flavor=flavor)
        .order_by("-effective_from")
        .first()
    )
    if latest is None and quota is None:
        return
    if latest is not None:
        if (latest.guarantee, latest.deserved, latest.capability) == levels:
            return
        if at < latest.effective_from:
            raise ValidationError(
                {
                    "guarantee": f"the quota history of {queue}/{flavor} runs to "
                    f"{latest.effective_from.isoformat()}; a change takes effect after that"
                }
            )
    QueueQuotaChange.objects.update_or_create(
        queue=queue,
        flavor=flavor,
        effective_from=at,
        defaults=dict(zip(("guarantee", "deserved", "capability"), levels, strict=True)),
    )


# ----------------------------------------------------------------------------- priority classes


@transaction.atomic
def do_save_priority_class(
    priority_class: PriorityClass, *, acting_user: Any, reason: str = ""
) -> PriorityClass:
    """Create or update a priority class (value, preemption policy, budget rate, default).
    Making it the default moves the default from the class that had it (audited too); the
    default class stops being the default only that way (there is always one)."""
    previous = (
        PriorityClass.objects.select_for_update().filter(default=True).exclude(pk=priority_class.pk)
        if priority_class.default
        else PriorityClass.objects.none()
    ).first()
    if previous is not None:
        # Not through its clean(): it stops being the default because this class takes over,
        # and this class's own full_clean below refuses what must not be (rolling this back).
        with audited_change(
            previous,
            action="quotas.save_priority_class",
            acting_user=acting_user,
            reason=reason or f"{priority_class.name} is the default class now",
        ):
            previous.default = False
            previous.save(update_fields=["default"])
    return save_audited(
        priority_class,
        action="quotas.save_priority_class",
        acting_user=acting_user,
        reason=reason,
    )


@transaction.atomic
def do_delete_priority_class(
    priority_class: PriorityClass, *, acting_user: Any, reason: str = ""
) -> None:
    """Delete a priority class that no workload or budget uses and that is not the default."""
    if PriorityClass.objects.filter(pk=priority_class.pk, default=True).exists():
        raise ValidationError({"default": NO_DEFAULT_LEFT.format(name=priority_class.name)})
    if priority_class.workloads.exists() or priority_class.budgets.exists():
        raise ValidationError({"priority_class": f"{priority_class} is still in use"})
    delete_audited(
        priority_class,
        action="quotas.delete_priority_class",
        acting_user=acting_user,
        reason=reason,
    )


# ----------------------------------------------------------------------------- budgets


# The kept balance is in a budget's audit rows as ``remaining_gpu_hours``, not twice.
_KEPT = ("balance_gpu_hours",)


def _budget_snapshot(budget: PriorityBudget) -> dict[str, Any]:
    """A budget's fields plus its ledger balance, for the audit log."""
    return model_snapshot(budget, _KEPT) | {
        "remaining_gpu_hours": str(budget.remaining_gpu_hours())
    }


@transaction.atomic
def do_grant_budget(
    tenant: Tenant,
    priority_class: PriorityClass,
    *,
    period_start: date,
    period_end: date,
    gpu_hours: Decimal | int | str,
    acting_user: Any,
    reason: str = "",
    at: datetime | None = None,
) -> PriorityBudget:
    """Set the GPU-hours granted to ``tenant`` at ``priority_class`` for a period; the change
    is written to the ledger as a grant entry at ``at`` (default the pool's clock, which
    stamps the loop's own entries)."""
    budget = (
        PriorityBudget.objects.select_for_update()
        .filter(tenant=tenant, priority_class=priority_class, period_start=period_start)
        .first()
    )
    before = _budget_snapshot(budget) if budget is not None else None
    granted_before = budget.gpu_hours if budget is not None else Decimal(0)
    if budget is None:
        budget = PriorityBudget(tenant=tenant, priority_class=priority_class)
    budget.period_start = period_start
    budget.period_end = period_end
    budget.gpu_hours = Decimal(str(gpu_hours))
    budget.full_clean()
    budget.save()
    budget.refresh_from_db()
    delta = budget.gpu_hours - granted_before
    if delta:
        write_ledger_entries(
            [(budget.pk, LedgerEntryKind.GRANT, delta, None, at or pool_now(), reason)],
            {budget.pk: budget},
        )
    after = _budget_snapshot(budget)
    record_audit_change(
        acting_user=acting_user,
        action="quotas.grant_budget",
        instance=budget,
        before=before,
        after=after,
        reason=reason,
    )
    return budget


def _budget_with_addition(
    tenant: Tenant,
    priority_class: PriorityClass,
    *,
    period_start: date,
    period_end: date,
    gpu_hours: Decimal | int | str,
    lock: bool = False,
) -> PriorityBudget:
    """The period's budget with ``gpu_hours`` added to its grant (a new, unsaved budget when
    there is none); refused, naming ``period_end``, when the period's budget ends elsewhere."""
    found = PriorityBudget.objects.filter(
        tenant=tenant, priority_class=priority_class, period_start=period_start
    )
    budget = (found.select_for_update() if lock else found).first()
    extra = _positive(gpu_hours)
    if budget is None:
        return PriorityBudget(
            tenant=tenant,
            priority_class=priority_class,
            period_start=period_start,
            period_end=period_end,
            gpu_hours=extra,
        )
    if budget.period_end != period_end:
        raise ValidationError(
            {
                "period_end": f"the budget of {tenant} at {priority_class} from {period_start} "
                f"ends on {budget.period_end}, not {period_end}; an addition names its period"
            }
        )
    budget.gpu_hours = budget.gpu_hours + extra
    return budget


@transaction.atomic
def do_add_to_budget(
    tenant: Tenant,
    priority_class: PriorityClass,
    *,
    period_start: date,
    period_end: date,
    gpu_hours: Decimal | int | str,
    acting_user: Any,
    reason: str = "",
    at: datetime | None = None,
) -> PriorityBudget:
    """Add ``gpu_hours`` to what the period's budget grants (creating the budget when there is
    none): an approved budget request raises the grant, it never replaces it."""
    budget = _budget_with_addition(
        tenant,
        priority_class,
        period_start=period_start,
        period_end=period_end,
        gpu_hours=gpu_hours,
        lock=True,
    )
    return do_grant_budget(
        tenant,
        priority_class,
        period_start=period_start,
        period_end=period_end,
        gpu_hours=budget.gpu_hours,
        acting_user=acting_user,
        reason=reason,
        at=at,
    )


def _ledger_move(
    budget: PriorityBudget,
    *,
    kind: LedgerEntryKind,
    gpu_hours: Decimal,
    workload: Workload | None,
    at: datetime,
    acting_user: Any,
    note: str,
) -> BudgetLedgerEntry:
    """Write one ledger entry and its audit row; ``gpu_hours`` is already signed."""
    before = _budget_snapshot(budget)
    entry = BudgetLedgerEntry(
        budget=budget, kind=kind, gpu_hours=gpu_hours, workload=workload, at=at, note=note
    )
    entry.full_clean()
    write_ledger_entries(
        [(budget.pk, kind, gpu_hours, entry.workload_id, at, note)], {budget.pk: budget}
    )
    # The row just written (the budget is locked: no other entry of it came in between).
    entry = budget.entries.latest("pk")
    record_audit_event(
        acting_user=acting_user,
        action=f"quotas.{kind}_budget",
        instance=budget,
        before=before,
        after=_budget_snapshot(budget),
        reason=note,
    )
    return entry


def _positive(amount: Decimal | int | str, field: str = "gpu_hours") -> Decimal:
    value = Decimal(str(amount))
    if not value.is_finite() or value < 0:
        raise ValidationError({field: f"{field} must be at least 0, not {amount}"})
    return value


@transaction.atomic
def do_reserve_budget(
    budget: PriorityBudget,
    *,
    gpu_hours: Decimal | int | str,
    workload: Workload | None,
    at: datetime,
    acting_user: Any = None,
) -> BudgetLedgerEntry:
    """Hold a protected window's budget up front; refused when the balance does not cover it."""
    budget = PriorityBudget.objects.select_for_update().get(pk=budget.pk)
    amount = _positive(gpu_hours)
    remaining = budget.remaining_gpu_hours()
    if amount > remaining:
        raise ValidationError(
            {"gpu_hours": f"reserving {fmt(amount)} GPU-hours exceeds the {fmt(remaining)} left"}
        )
    return _ledger_move(
        budget,
        kind=LedgerEntryKind.RESERVE,
        gpu_hours=-amount,
        workload=workload,
        at=at,
        acting_user=acting_user,
        note=f"protected window of {workload}" if workload else "reservation",
    )


@transaction.atomic
def do_settle_reservation(
    budget: PriorityBudget,
    *,
    gpu_hours: Decimal | int | str,
    workload: Workload | None,
    at: datetime,
    acting_user: Any = None,
) -> BudgetLedgerEntry:
    """Release a reservation (the spend for what ran is written separately)."""
    budget = PriorityBudget.objects.select_for_update().get(pk=budget.pk)
    amount = _positive(gpu_hours)
    reserved = -sum(
        (
            entry.gpu_hours
            for entry in budget.entries.filter(
                workload=workload, kind__in=[LedgerEntryKind.RESERVE, LedgerEntryKind.SETTLE]
            )
        ),
        Decimal(0),
    )
    if amount > reserved:
        raise ValidationError(
            {"gpu_hours": f"settling {fmt(amount)} GPU-hours exceeds the {fmt(reserved)} reserved"}
        )
    return _ledger_move(
        budget,
        kind=LedgerEntryKind.SETTLE,
        gpu_hours=amount,
        workload=workload,
        at=at,
        acting_user=acting_user,
        note=f"settled window of {workload}" if workload else "settlement",
    )


@transaction.atomic
def do_spend_budget(
    budget: PriorityBudget,
    *,
    gpu_hours: Decimal | int | str,
    workload: Workload | None,
    at: datetime,
    acting_user: Any = None,
) -> BudgetLedgerEntry:
    """Charge GPU-hours run at the budgeted class (rate x GPUs x hours) to the budget."""
    budget = PriorityBudget.objects.select_for_update().get(pk=budget.pk)
    return _ledger_move(
        budget,
        kind=LedgerEntryKind.SPEND,
        gpu_hours=-_positive(gpu_hours),
        workload=workload,
        at=at,
        acting_user=acting_user,
        note=f"ran {workload}" if workload else "spend",
    )


# ----------------------------------------------------------------------------- quota requests


def _audit_request(
    request: QuotaRequest,
    before: dict[str, Any] | None,
    action: str,
    acting_user: Any,
    reason: str = "",
) -> None:
    record_audit_event(
        acting_user=acting_user,
        action=f"quotas.{action}_quota_request",
        instance=request,
        before=before,
        after=model_snapshot(request),
        reason=reason,
    )


def _locked(request: QuotaRequest) -> QuotaRequest:
    """The request re-read under a row lock, so two deciders cannot both move it."""
    return QuotaRequest.objects.select_for_update().get(pk=request.pk)


def _state_moment(request: QuotaRequest) -> datetime | None:
    """When ``request`` reached its state (submitted, decided, applied, withdrawn); None for
    a draft or a state without its stamp."""
    return {
        QuotaRequestState.SUBMITTED: request.submitted_at,
        QuotaRequestState.APPROVED: request.decided_at,
        QuotaRequestState.REJECTED: request.decided_at,
        QuotaRequestState.APPLIED: request.applied_at,
        QuotaRequestState.WITHDRAWN: request.withdrawn_at,
    }.get(QuotaRequestState(request.state))


def _state_refusal(request: QuotaRequest, *states: str, step: str) -> ValidationError | None:
    """Why ``request`` cannot be ``step`` (its past participle in words: "approved or
    rejected", "changed") because it is not in one of ``states``, keyed ``state`` (the API's
    key), as a sentence: where the request stands, since when, and what may still be done;
    None when it is in one of them."""
    if request.state in states:
        return None
    name = f"request #{request.pk}"
    if request.state == QuotaRequestState.DRAFT:
        after = " and an admin approves it" if QuotaRequestState.APPROVED in states else ""
        why = f"{name} is a draft: it can be {step} only once its requester submits it{after}"
    elif request.state == QuotaRequestState.SUBMITTED and QuotaRequestState.DRAFT in states:
        why = (
            f"{name} is submitted, not a draft, so it can no longer be {step}: to change it, "
            "withdraw it with Withdraw (it is kept, withdrawn) and file a new request"
        )
    elif request.state == QuotaRequestState.SUBMITTED:
        why = f"{name} is submitted, not yet approved: it can be {step} once an admin approves it"
    else:
        moment = _state_moment(request)
        on = f" on {timezone.localdate(moment):%Y-%m-%d}" if moment is not None else ""
        why = f"{name} was {request.state}{on}, so it can no longer be {step}"
    return ValidationError({"state": why})


def _require_state(request: QuotaRequest, *states: str, step: str) -> None:
    refusal = _state_refusal(request, *states, step=step)
    if refusal is not None:
        raise refusal


def _admin_refusal(acting_user: Any, verb: str) -> PermissionDenied | None:
    """Why someone who is not an admin may not ``verb`` a request; None for an admin."""
    if is_site_admin(acting_user):
        return None
    return PermissionDenied(f"only admins {verb} quota requests")


def _require_admin(acting_user: Any, verb: str) -> None:
    refusal = _admin_refusal(acting_user, verb)
    if refusal is not None:
        raise refusal


# What a draft's requester may still change before submitting it.
REQUEST_DRAFT_FIELDS = (
    "queue",
    "flavor",
    "priority_class",
    "period_start",
    "period_end",
    "payload",
    "justification",
)


def past_period_refusal(request: QuotaRequest) -> ValidationError | None:
    """Why a budget request's period is over, keyed ``period_end``, or None: its end (the
    first day after it) is on or before the pool's today (``pool_now`` in the project's time
    zone, the day the loop picks a budget by, ``control.budgets.budget_ids``), so no work
    could ever spend what it grants. The one rule filing, editing, submitting
    (``budget_target_refusal``), approving (``approval_refusal``) and applying (``_apply``)
    a budget request use. None for a queue-quota request or one without its end."""
    if request.kind != QuotaRequestKind.BUDGET or request.period_end is None:
        return None
    today = timezone.localdate(pool_now())
    if request.period_end > today:
        return None
    return ValidationError(
        {
            "period_end": f"the period ended on {request.period_end:%Y-%m-%d}: a budget for a "
            f"past period grants nothing (today is {today:%Y-%m-%d}); ask for a period that "
            "ends after today"
        }
    )


def budget_target_refusal(request: QuotaRequest) -> ValidationError | None:
    """Why a budget request names no period it can add to, keyed by the request's field, or
    None: the period is over (``past_period_refusal``, ``period_end``), the period's budget
    ends on another day (``period_end``) or the period overlaps another budget of the class
    (``period_start``). The check approval runs (``approval_refusal``, and
    ``quota_request_problems`` through ``_budget_with_addition``), made when the request is
    filed, edited and submitted, so a wrong period is refused then and not only at approval.
    None for a queue-quota request, or one missing its target (``QuotaRequest.clean`` says)."""
    if (
        request.kind != QuotaRequestKind.BUDGET
        or request.priority_class is None
        or request.period_start is None
        or request.period_end is None
    ):
        return None
    past = past_period_refusal(request)
    if past is not None:
        return past
    try:
        budget = _budget_with_addition(
            request.tenant,
            request.priority_class,
            period_start=request.period_start,
            period_end=request.period_end,
            gpu_hours=0,
        )
        budget.full_clean(exclude=["gpu_hours"])
    except ValidationError as error:
        found = error.message_dict if hasattr(error, "error_dict") else {}
        named = {
            field: " ".join(messages)
            for field, messages in found.items()
            if field in ("period_start", "period_end")
        }
        return ValidationError(named) if named else None
    return None


def _require_budget_target(request: QuotaRequest) -> None:
    refusal = budget_target_refusal(request)
    if refusal is not None:
        raise refusal


@transaction.atomic
def do_create_quota_request(
    *,
    kind: str,
    tenant: Tenant,
    requested_by: Any,
    justification: str,
    payload: dict[str, Any],
    queue: Queue | None = None,
    flavor: Flavor | None = None,
    priority_class: PriorityClass | None = None,
    period_start: date | None = None,
    period_end: date | None = None,
    submit: bool = False,
) -> QuotaRequest:
    """Start a draft request (``submit``: and send it to the admins at once); only a lead of
    ``tenant`` (or an admin) may ask for it."""
    if not (is_tenant_lead(requested_by, tenant) or is_site_admin(requested_by)):
        raise PermissionDenied(f"only a lead of {tenant} asks for its quota or budget")
    request = QuotaRequest(
        kind=kind,
        tenant=tenant,
        queue=queue,
        flavor=flavor,
        priority_class=priority_class,
        period_start=period_start,
        period_end=period_end,
        payload=payload,
        justification=justification,
        requested_by=requested_by,
    )
    request.full_clean()
    _require_budget_target(request)
    _require_a_new_request(request)
    request.save()  # filed on the pool's clock, as every step of it (``created_at``'s default)
    _audit_request(request, None, "create", requested_by)
    if submit:
        return do_submit_quota_request(request, acting_user=requested_by)
    return request


@transaction.atomic
def do_update_quota_request(
    request: QuotaRequest, *, acting_user: Any, **changes: Any
) -> QuotaRequest:
    """Change a draft's target, amounts, period or justification; only its requester may."""
    request = _locked(request)
    _require_state(request, QuotaRequestState.DRAFT, step="changed")
    if acting_user is None or acting_user.pk != request.requested_by_id:
        raise PermissionDenied("only the requester changes a draft")
    unknown = sorted(set(changes) - set(REQUEST_DRAFT_FIELDS))
    if unknown:
        raise ValidationError(dict.fromkeys(unknown, "cannot be changed on a request"))
    before = model_snapshot(request)
    for name, value in changes.items():
        setattr(request, name, value)
    request.full_clean()
    _require_budget_target(request)
    _require_a_new_request(request)
    if model_snapshot(request) == before:
        return request  # nothing changed: nothing to write or audit
    request.save()
    _audit_request(request, before, "update", acting_user)
    return request


@transaction.atomic
def do_submit_quota_request(request: QuotaRequest, *, acting_user: Any) -> QuotaRequest:
    """Send a draft to the admins (who are told by mail); only its requester submits it."""
    request = _locked(request)
    _require_state(request, QuotaRequestState.DRAFT, step="submitted again")
    if acting_user is None or acting_user.pk != request.requested_by_id:
        raise PermissionDenied("only the requester submits a request")
    before = model_snapshot(request)
    request.state = QuotaRequestState.SUBMITTED
    request.submitted_at = pool_now()  # the pool's clock (``control.clock``)
    request.full_clean()
    _require_budget_target(request)
    _require_a_new_request(request)
    request.save()
    _audit_request(request, before, "submit", acting_user)
    notify_quota_request(request, "submitted", acting_user=acting_user)
    return request


# The fields a quota request's feasibility check may name (a queue's quota, a budget), in the
# words of the request form's labels: its problems are sentences for people, while the API's
# error keys stay the field names (``payload``). A field not listed: its underscores as spaces.
PROBLEM_FIELD_WORDS = {
    "gpu_hours": "GPU-hours",
    "period_start": "period from",
    "period_end": "period until",
    "priority_class": "priority class",
    "tenant": "team",
}


def quota_request_problems(request: QuotaRequest) -> list[str]:
    """Why applying ``request`` now would be refused (feasibility against the pool), each
    problem "<field in words>: why" (``PROBLEM_FIELD_WORDS``; one that names no field, just
    why); [] if none."""
    amounts = request.requested_amounts()
    if request.kind == QuotaRequestKind.QUEUE_QUOTA:
        assert request.queue is not None and request.flavor is not None
        quota = QueueQuota.objects.filter(queue=request.queue, flavor=request.flavor).first()
        quota = quota or QueueQuota(queue=request.queue, flavor=request.flavor)
        quota.guarantee = amounts["guarantee"]
        quota.deserved = amounts["deserved"]
        quota.capability = amounts["capability"]
    else:
        quota = None
    try:
        if quota is not None:
            quota.full_clean()
        else:
            assert request.priority_class is not None
            assert request.period_start is not None and request.period_end is not None
            _budget_with_addition(
                request.tenant,
                request.priority_class,
                period_start=request.period_start,
                period_end=request.period_end,
                gpu_hours=amounts["gpu_hours"],
            ).full_clean()
    except ValidationError as error:
        found = error.message_dict if hasattr(error, "error_dict") else {"": error.messages}
        return [
            f"{_problem_field(field)}: {' '.join(messages)}"
            if field not in ("", NON_FIELD_ERRORS)
            else " ".join(messages)
            for field, messages in found.items()
        ]
    return []


def _problem_field(field: str) -> str:
    """A field a feasibility problem names, in words (``PROBLEM_FIELD_WORDS``)."""
    return PROBLEM_FIELD_WORDS.get(field, field.replace("_", " "))


def open_request_refusal(request: QuotaRequest) -> ValidationError | None:
    """Why ``request`` may not be filed, changed or submitted beside another open request for the
    same target, keyed by the field it names, or None. The same target is a queue's quota of one
    flavor (``queue``), or a team's budget at one class for an overlapping period
    (``period_start``). Open are the submitted requests (anyone's: the team's leads and the
    admins see them) and the requester's own drafts (another person's draft is theirs alone,
    ``quotas.queries.without_others_drafts``, so it neither counts nor shows). Two open
    requests for one target would leave the admins to guess which one stands (queue levels
    replace each other) or add GPU-hours twice (budget requests add)."""
    rows = QuotaRequest.objects.filter(kind=request.kind).exclude(pk=request.pk)
    others = rows.filter(state=QuotaRequestState.SUBMITTED) | rows.filter(
        state=QuotaRequestState.DRAFT, requested_by_id=request.requested_by_id
    )
    if request.kind == QuotaRequestKind.QUEUE_QUOTA:
        assert request.queue_id is not None and request.flavor_id is not None
        field, target = "queue", "this queue and flavor"
        others = others.filter(queue_id=request.queue_id, flavor_id=request.flavor_id)
    else:
        field, target = "period_start", "this team, class and period"
        others = others.filter(
            tenant_id=request.tenant_id,
            priority_class_id=request.priority_class_id,
            period_start__lt=request.period_end,
            period_end__gt=request.period_start,
        )
    other = others.order_by("id").first()
    if other is None:
        return None
    if other.state == QuotaRequestState.DRAFT:
        why = f"request #{other.pk} for {target} is open (your draft): change or withdraw it first"
    else:
        why = (
            f"request #{other.pk} for {target} is open (submitted, waiting for an admin's "
            "decision): ask again once it is decided"
        )
    return ValidationError({field: why})


def no_change_refusal(request: QuotaRequest) -> ValidationError | None:
    """Why ``request`` would change nothing, keyed ``payload``, or None: a queue-quota request
    for the levels the queue holds already (no quota entry holds 0 / 0 / 0: it may use none
    of the flavor), or a budget request adding 0 GPU-hours."""
    amounts = request.requested_amounts()
    if request.kind == QuotaRequestKind.BUDGET:
        if amounts["gpu_hours"] > 0:
            return None
        return ValidationError({"payload": "adding 0 GPU-hours changes nothing: ask for more"})
    assert request.queue_id is not None and request.flavor_id is not None
    target = QueueQuota.objects.filter(queue_id=request.queue_id, flavor_id=request.flavor_id)
    quota = target.first()
    now = {key: Decimal(getattr(quota, key)) if quota else Decimal(0) for key in amounts}
    if now != amounts:
        return None
    levels = ", ".join(f"{key} {fmt(level)}" for key, level in now.items())
    return ValidationError(
        {"payload": f"these are the queue's levels already ({levels}): ask for a change"}
    )


def _require_a_new_request(request: QuotaRequest) -> None:
    """Refuse a request that changes nothing or repeats an open one (``no_change_refusal``,
    ``open_request_refusal``); the target's row is locked first, so two filings for it at
    once cannot both pass (PostgreSQL; SQLite writes one at a time anyway)."""
    if request.kind == QuotaRequestKind.QUEUE_QUOTA:
        assert request.queue_id is not None
        Queue.objects.select_for_update().filter(pk=request.queue_id).first()
    else:
        Tenant.objects.select_for_update().filter(pk=request.tenant_id).first()
    refusal = no_change_refusal(request) or open_request_refusal(request)
    if refusal is not None:
        raise refusal


def approval_refusal(request: QuotaRequest) -> ValidationError | None:
    """Why no admin could approve ``request`` as things stand, or None: a budget request's
    period is over (``past_period_refusal``, keyed ``period_end``), or its change would not
    fit the pool (``quota_request_problems``, keyed ``payload``). The part of
    ``decision_refusal`` that does not depend on who decides, so the requester's page and the
    API's request detail give the verdict the approval page gives."""
    past = past_period_refusal(request)
    if past is not None:
        return past
    problems = quota_request_problems(request)
    if problems:
        return _refused_amounts("the change would not fit: " + "; ".join(problems))
    return None


def _refused_amounts(sentence: str) -> ValidationError:
    """A refusal keyed ``payload`` whose sentence says what it is about (the change would not
    fit): the API's message, the CLI and the pages say it without the field's name
    (``api.errors.SELF_NAMING``), the API's ``fields`` keep the key."""
    return ValidationError({"payload": ValidationError(sentence, code=SELF_NAMING)})


def withdrawn_refusal(request: QuotaRequest) -> ValidationError | None:
    """Why a withdrawn request can take no further step (no decision, no change), keyed
    ``state``, in words that say it was withdrawn and when; None for any other request."""
    if request.state != QuotaRequestState.WITHDRAWN:
        return None
    when = (
        f" at {request.withdrawn_at.astimezone(UTC):%Y-%m-%d %H:%M} UTC"
        if request.withdrawn_at is not None
        else ""
    )
    return ValidationError(
        {
            "state": f"request #{request.pk} was withdrawn by its requester{when} before a "
            "decision: there is nothing to decide or change"
        }
    )


def withdrawal_refusal(
    request: QuotaRequest, *, acting_user: Any
) -> PermissionDenied | ValidationError | None:
    """Why ``acting_user`` may not withdraw ``request`` now, or None when they may: only its
    requester, and only a draft (which is deleted) or a submitted request no admin has decided
    yet (which is kept, withdrawn). The rule ``do_withdraw_quota_request`` enforces and the
    request's page asks before it offers Withdraw."""
    refusal = withdrawn_refusal(request)
    if refusal is not None:
        return refusal
    if request.state not in (QuotaRequestState.DRAFT, QuotaRequestState.SUBMITTED):
        return ValidationError(
            {
                "state": f"request #{request.pk} is {request.state}: an admin has decided it, "
                "so it can no longer be withdrawn"
            }
        )
    if acting_user is None or acting_user.pk != request.requested_by_id:
        return PermissionDenied("only the requester withdraws a request")
    return None


@transaction.atomic
def do_withdraw_quota_request(request: QuotaRequest, *, acting_user: Any) -> QuotaRequest | None:
    """Withdraw a request; only its requester may (``withdrawal_refusal``). A draft is
    deleted, audited with its last state (``quotas.withdraw_quota_request``): None. A submitted
    request no admin has decided yet is kept, ``withdrawn`` at the pool's clock (the admins
    may have seen it), audited the same way: it is no longer open (a new request for its
    target may be filed) and can no longer be approved or rejected; the request."""
    request = _locked(request)
    refusal = withdrawal_refusal(request, acting_user=acting_user)
    if refusal is not None:
        raise refusal
    if request.state == QuotaRequestState.DRAFT:
        delete_audited(request, action="quotas.withdraw_quota_request", acting_user=acting_user)
        return None
    before = model_snapshot(request)
    request.state = QuotaRequestState.WITHDRAWN
    request.withdrawn_at = pool_now()  # the pool's clock (``control.clock``)
    request.full_clean()
    request.save()
    _audit_request(request, before, "withdraw", acting_user)
    return request


def decision_refusal(
    request: QuotaRequest, *, acting_user: Any, approve: bool
) -> PermissionDenied | ValidationError | None:
    """Why ``acting_user`` may not approve (``approve``) or reject ``request`` now, or None
    when they may: only an admin decides, only a submitted request (a withdrawn one says so:
    ``withdrawn_refusal``), never their own, and an approval only of a change that fits the
    pool (``quota_request_problems``). The one rule the decision actions enforce and the
    approval page shows (its Approve button is offered only when this says None); a
    rejection's note is checked when it is given."""
    verb = "approve" if approve else "reject"
    refusal = (
        _admin_refusal(acting_user, verb)
        or withdrawn_refusal(request)
        or _state_refusal(request, QuotaRequestState.SUBMITTED, step="approved or rejected")
    )
    if refusal is not None:
        return refusal
    if acting_user.pk == request.requested_by_id:
        # a sentence that says what it is about: said without ``decided_by``
        own = f"nobody {verb}s their own request"
        return ValidationError({"decided_by": ValidationError(own, code=SELF_NAMING)})
    return approval_refusal(request) if approve else None


def _decide(request: QuotaRequest, *, acting_user: Any, state: str, note: str) -> QuotaRequest:
    """Record an admin's decision on a submitted request (not their own), audited."""
    approve = state == QuotaRequestState.APPROVED
    verb = "approve" if approve else "reject"
    request = _locked(request)
    refusal = decision_refusal(request, acting_user=acting_user, approve=approve)
    if refusal is not None:
        raise refusal
    if not approve and not note.strip():
        raise ValidationError({"decision_note": "say why the request is rejected"})
    before = model_snapshot(request)
    request.state = state
    request.decided_by = acting_user
    request.decided_at = pool_now()
    request.decision_note = note
    request.full_clean()
    request.save()
    _audit_request(request, before, verb, acting_user, note)
    return request


def _apply(request: QuotaRequest, *, acting_user: Any) -> QuotaRequest:
    """Make an approved request's change (queue quota, or an addition to the budget's grant)
    and mark it applied, audited; the caller holds the transaction."""
    request = _locked(request)
    _require_admin(acting_user, "apply")
    _require_state(request, QuotaRequestState.APPROVED, step="applied")
    past = past_period_refusal(request)  # approved before its period ended, applied after
    if past is not None:
        raise past
    amounts = request.requested_amounts()
    reason = f"quota request #{request.pk}: {request.justification}"[:500]
    at = pool_now()  # one instant: the change's place in its history, and the request's step
    if request.kind == QuotaRequestKind.QUEUE_QUOTA:
        assert request.queue is not None and request.flavor is not None
        do_set_queue_quota(
            request.queue,
            request.flavor,
            guarantee=amounts["guarantee"],
            deserved=amounts["deserved"],
            capability=amounts["capability"],
            acting_user=acting_user,
            reason=reason,
            at=at,
        )
    else:
        assert request.priority_class is not None
        assert request.period_start is not None and request.period_end is not None
        do_add_to_budget(
            request.tenant,
            request.priority_class,
            period_start=request.period_start,
            period_end=request.period_end,
            gpu_hours=amounts["gpu_hours"],
            acting_user=acting_user,
            reason=reason,
            at=at,
        )
    before = model_snapshot(request)
    request.state = QuotaRequestState.APPLIED
    request.applied_at = at
    request.save()
    _audit_request(request, before, "apply", acting_user)
    return request


@transaction.atomic
def do_approve_quota_request(
    request: QuotaRequest, *, acting_user: Any, note: str = ""
) -> QuotaRequest:
    """An admin approves a submitted request that would fit the pool; never their own."""
    request = _decide(request, acting_user=acting_user, state=QuotaRequestState.APPROVED, note=note)
    notify_quota_request(request, "approved", acting_user=acting_user)
    return request


@transaction.atomic
def do_reject_quota_request(
    request: QuotaRequest, *, acting_user: Any, note: str = ""
) -> QuotaRequest:
    """An admin rejects a submitted request, saying why; never their own."""
    request = _decide(request, acting_user=acting_user, state=QuotaRequestState.REJECTED, note=note)
    notify_quota_request(request, "rejected", acting_user=acting_user)
    return request


@transaction.atomic
def do_apply_quota_request(request: QuotaRequest, *, acting_user: Any) -> QuotaRequest:
    """Make an approved request's change: the queue quota, or an addition to the budget."""
    request = _apply(request, acting_user=acting_user)
    notify_quota_request(request, "applied", acting_user=acting_user)
    return request


@transaction.atomic
def do_approve_and_apply_quota_request(
    request: QuotaRequest, *, acting_user: Any, note: str = ""
) -> QuotaRequest:
    """Approve a submitted request and make its change in one transaction: when the change
    cannot be made, nothing is (the request stays submitted, no audit row, no mail)."""
    request = _decide(request, acting_user=acting_user, state=QuotaRequestState.APPROVED, note=note)
    request = _apply(request, acting_user=acting_user)
    notify_quota_request(request, "approved-and-applied", acting_user=acting_user)
    return request


# ----------------------------------------------------------------------------- what-if runs

# A run queued or running for longer than this is taken as lost (its worker or web process
# stopped): the task's hard time limit, and the age after which a new run may start.
WHAT_IF_TIME_LIMIT_S = 30 * 60


@transaction.atomic
def do_start_what_if(request: QuotaRequest, *, acting_user: Any, days: int = 30) -> WhatIfRun:
    """Queue a what-if replay of a queue-quota request's change over the last ``days`` days
    (admins, before the decision; a draft only its requester, whose own it is until it is
    submitted; only a change that fits the pool, ``quota_request_problems``); it starts in
    the background once this commits."""
    request = _locked(request)
    _require_admin(acting_user, "replay")
    _require_state(
        request,
        QuotaRequestState.DRAFT,
        QuotaRequestState.SUBMITTED,
        step="replayed in a what-if",
    )
    if request.state == QuotaRequestState.DRAFT and acting_user.pk != request.requested_by_id:
        raise ValidationError(
            {"state": f"request {request.pk} is a draft, its requester's own until submitted"}
        )
    if request.kind != QuotaRequestKind.QUEUE_QUOTA:
        raise ValidationError(
            {"kind": "a what-if replays quota changes; budgets are not part of the replay"}
        )
    # A change approval would refuse has no "after" to replay: its guarantees do not fit the
    # tree. Keyed ``payload`` like the approval's refusal, in the impact's words.
    problems = quota_request_problems(request)
    if problems:
        raise _refused_amounts(
            "a what-if replays only a change that could be approved; this one would not fit: "
            + "; ".join(problems)
        )
    since = timezone.now() - timedelta(seconds=WHAT_IF_TIME_LIMIT_S)  # the worker's limit
    active = request.what_if_runs.filter(
        state__in=ACTIVE_WHAT_IF_STATES, queued_wall_at__gte=since
    ).first()
    if active is not None:
        raise ValidationError({"state": f"what-if #{active.pk} of this request is {active.state}"})
    run = WhatIfRun(request=request, days=days, started_by=acting_user)
    run.full_clean()
    run.save()
    record_audit_event(
        acting_user=acting_user,
        action="quotas.start_what_if",
        instance=run,
        before=None,
        after=model_snapshot(run, exclude=["result"]),
    )
    from gpupool.quotas.whatif import dispatch_what_if  # the runner records through these

    transaction.on_commit(lambda: dispatch_what_if(run.pk), robust=True)
    return run


@transaction.atomic
def do_begin_what_if(run_id: int, *, at: datetime) -> WhatIfRun | None:
    """Take a queued run to running; None when it is not queued (taken by another worker,
    or done), so a task delivered twice runs once."""
    run = WhatIfRun.objects.select_for_update().filter(pk=run_id).first()
    if run is None or run.state != WhatIfState.QUEUED:
        return None
    run.state = WhatIfState.RUNNING
    run.started_at = at
    run.message = "starting"
    run.full_clean()
    run.save()
    return run


def do_record_what_if_progress(run: WhatIfRun, *, progress: float, message: str) -> None:
    """Note how far a running replay got (the run's own record; not audited)."""
    WhatIfRun.objects.filter(pk=run.pk, state=WhatIfState.RUNNING).update(
        progress=min(max(progress, 0.0), 1.0), message=message[:200]
    )


@transaction.atomic
def do_finish_what_if(
    run: WhatIfRun, *, at: datetime, result: dict[str, Any] | None = None, error: str = ""
) -> WhatIfRun:
    """Close a running replay with its result, or with why it failed (``error``)."""
    run = WhatIfRun.objects.select_for_update().get(pk=run.pk)
    _require_what_if_running(run)
    if error:
        run.state, run.error, run.message = WhatIfState.FAILED, error, "failed"
    else:
        run.state, run.result, run.message = WhatIfState.SUCCEEDED, result, "done"
        run.progress = 1.0
    run.finished_at = at
    run.full_clean()
    run.save()
    return run


def _require_what_if_running(run: WhatIfRun) -> None:
    if run.state != WhatIfState.RUNNING:
        raise ValidationError({"state": f"what-if #{run.pk} is {run.state}, not running"})


# ----------------------------------------------------------------------------- the loop's moves


@dataclass(frozen=True)
class BudgetMove:
    """One ledger movement the scheduling loop decided: a reservation (negative), a
    settlement (positive) or a spend (negative), of a workload, on a budget."""

    budget_id: int
    kind: str
    gpu_hours: Decimal
    workload_id: int | None  # None: a budget's running work flushed together
    note: str = ""


def do_record_budget_moves(moves: Sequence[BudgetMove], *, at: datetime) -> int:
    """Write the loop's ledger movements of one cycle in bulk, and one audit row per budget
    they touch (its balance before and after, and what moved): the system's doing.

    The signs are checked here (the ledger's constraint holds them too); the loop reserves
    only what the core found covered and never spends past the grant. No movement, no
    transaction (most cycles have none: no savepoint round trips inside the cycle's own).
    """
    if not moves:
        return 0
    with transaction.atomic():
        return _record_budget_moves(moves, at)


def _record_budget_moves(moves: Sequence[BudgetMove], at: datetime) -> int:
    kinds = frozenset(LedgerEntryKind.values)  # a new list each time it is asked for
    for move in moves:
        negative = move.kind in (LedgerEntryKind.RESERVE, LedgerEntryKind.SPEND)
        if (
            move.kind not in kinds
            or move.kind == LedgerEntryKind.GRANT
            or ((move.gpu_hours > 0) if negative else (move.gpu_hours < 0))
        ):
            raise ValidationError({"gpu_hours": f"{move.kind} of {move.gpu_hours}: wrong sign"})
    # The budgets locked and read as values (hundreds a cycle: no model instance each, and
    # one JSON round trip for all their audit snapshots); in id order, so writers lock alike.
    fields = snapshot_fields(PriorityBudget, _KEPT)
    rows = list(
        PriorityBudget.objects.select_for_update(of=("self",))
        .filter(pk__in=_ids_param({m.budget_id for m in moves}))
        .order_by("pk")
        .values(*fields, "balance_gpu_hours", "tenant__name", "priority_class__name")
    )
    budgets = {row["id"]: _LockedBudget(row["balance_gpu_hours"]) for row in rows}
    balances = _balances(budgets)
    snapshots = dict(zip(budgets, values_snapshots(PriorityBudget, rows, _KEPT), strict=True))
    after = write_ledger_entries(
        [(m.budget_id, m.kind, m.gpu_hours, m.workload_id, at, m.note) for m in moves], budgets
    )
    counts: dict[int, int] = {}
    for move in moves:
        counts[move.budget_id] = counts.get(move.budget_id, 0) + 1
    label = PriorityBudget._meta.label_lower
    record_system_audit_rows(
        "quotas.cycle_budget",
        (
            (
                label,
                str(row["id"]),
                # str(budget), as PriorityBudget.__str__ writes it
                budget_name(
                    row["tenant__name"],
                    row["priority_class__name"],
                    row["period_start"],
                    row["period_end"],
                ),
                snapshots[row["id"]] | {"remaining_gpu_hours": str(balances[row["id"]])},
                snapshots[row["id"]] | {"remaining_gpu_hours": str(after[row["id"]])},
                f"{counts[row['id']]} movement{'' if counts[row['id']] == 1 else 's'} "
                "of the scheduling loop",
            )
            for row in rows
        ),
        at=at,  # the ledger entries' own time (the loop's clock), not the wall clock's
    )
    return len(moves)


@dataclass(slots=True)
class _LockedBudget:
    """A budget locked by ``_record_budget_moves``, its kept balance as read (and moved by
    ``write_ledger_entries``): all that function reads or writes of a budget."""

    balance_gpu_hours: Decimal


class _Balanced(Protocol):
    balance_gpu_hours: Any


def _balances(budgets: Mapping[int, _Balanced]) -> dict[int, Decimal]:
    """The kept balance of each budget (``remaining_gpu_hours`` for many), at the ledger's
    precision on every database (SQLite drops a decimal's trailing zeros)."""
    return {
        pk: Decimal(budget.balance_gpu_hours).quantize(LEDGER_QUANTUM)
        for pk, budget in budgets.items()
    }


# A ledger entry as written: (budget_id, kind, signed gpu_hours, workload_id, at, note).
LedgerRow = tuple[int, str, Decimal, int | None, datetime, str]


def write_ledger_entries(
    rows: Sequence[LedgerRow], budgets: Mapping[int, _Balanced]
) -> dict[int, Decimal]:
    """Write ledger entries and move each budget's kept balance (``balance_gpu_hours``) by
    what its entries carry, in the caller's transaction: the one way entries are written.

    ``budgets`` (id -> budget) holds every budget the rows name, locked by the caller
    (``select_for_update``: concurrent writers of one budget serialise on its row); their
    ``balance_gpu_hours`` is moved in memory too. The database moves the column by the sum
    (``balance + delta``), never sets it from the value read. Returns each budget's balance
    after. By COPY on PostgreSQL (gpupool.bulk): a steady cycle spends for every running
    workload of a budgeted class, thousands of rows, which Django's bulk_create prepared value
    by value.
    """
    quantized = [
        (budget_id, kind, Decimal(gpu_hours).quantize(LEDGER_QUANTUM), workload_id, at,
         note[:200])
        for budget_id, kind, gpu_hours, workload_id, at, note in rows
    ]  # fmt: skip
    moved: dict[int, Decimal] = {}
    for budget_id, _, gpu_hours, *_ in quantized:
        if budget_id not in budgets:
            raise ValueError(f"budget {budget_id} was not locked for its ledger entries")
        moved[budget_id] = moved.get(budget_id, Decimal(0)) + gpu_hours
    if not quantized:
        return {}
    insert_values(
        BudgetLedgerEntry, ("budget_id", "kind", "gpu_hours", "workload_id", "at", "note"),
        quantized,
    )  # fmt: skip
    _move_balances(moved)
    after: dict[int, Decimal] = {}
    for pk, delta in moved.items():
        budget = budgets[pk]
        budget.balance_gpu_hours = (Decimal(budget.balance_gpu_hours) + delta).quantize(
            LEDGER_QUANTUM
        )
        after[pk] = budget.balance_gpu_hours
    return after


def _move_balances(moved: Mapping[int, Decimal]) -> None:
    """Add ``moved[id]`` to each budget's ``balance_gpu_hours`` in the database: one statement
    on PostgreSQL (the pairs as two arrays; Django's ``Case``/``When`` of a cycle's 200 budgets
    cost 25 ms of CPU to compile), one ``UPDATE`` per budget elsewhere (SQLite)."""
    if connection.vendor == "postgresql":
        table = connection.ops.quote_name(PriorityBudget._meta.db_table)
        with connection.cursor() as cursor:
            cursor.execute(
                f"UPDATE {table} AS b SET balance_gpu_hours = b.balance_gpu_hours + m.delta "  # noqa: S608
                "FROM unnest(%s::bigint[], %s::numeric[]) AS m(id, delta) WHERE b.id = m.id",
                # as array literals: the driver adapted a list's every Decimal in Python
                [_array_literal(moved), _array_literal(moved.values())],
            )
        return
    for pk, delta in moved.items():
        PriorityBudget.objects.filter(pk=pk).update(
            balance_gpu_hours=F("balance_gpu_hours") + Value(delta)
        )


def _array_literal(values: Iterable[int | Decimal]) -> str:
    """Integers or decimals as one PostgreSQL array literal (``{1,2.5}``) for a ``%s::bigint[]``
    or ``%s::numeric[]`` parameter: one string for the driver to quote, where a list is adapted
    element by element in Python (as ``control.snapshot.int_array``)."""
    return "{" + ",".join(map(str, values)) + "}"


def _ids_param(ids: Collection[int]) -> Any:
    """Row ids for an ``__in`` filter: one array parameter on PostgreSQL (as
    ``control.snapshot.id_list``: Django binds a list's every id on its own, and the driver
    splits a statement of hundreds of placeholders in Python), the list elsewhere."""
    if connection.vendor == "postgresql":
        return RawSQL("SELECT unnest(%s::bigint[])", (_array_literal(map(int, ids)),))
    return list(ids)
