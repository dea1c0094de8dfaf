"""The queue tree and its per-flavor quotas, priority classes, priority budgets with their
ledger, and quota requests."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date, timedelta
from decimal import Decimal, InvalidOperation
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import F, Q
from django.utils import timezone

from gpupool.audit.stamps import pool_time
from gpupool.inventory.models import Flavor, healthy_capacity
from gpupool.inventory.units import GPU_UNIT, flavor_unit
from gpupool.number_formats import GPU_HOURS_PLACES, GPU_PLACES, plain_number, with_unit
from gpupool.quotas.choices import (
    LedgerEntryKind,
    PreemptionPolicy,
    QuotaRequestKind,
    QuotaRequestState,
    WhatIfState,
)
from gpupool.quotas.levels import QUOTA_LEVELS, levels_out_of_order
from gpupool.quotas.validators import validate_label_value, whole_gpu_errors
from gpupool.scheduler.scenario import MAX_PRIORITY_VALUE
from gpupool.tenancy.models import Tenant, fixed_field_errors
from gpupool.text_limits import too_long
from gpupool.workloads.choices import unfinished

ZERO = Decimal(0)
# The ledger's precision (``BudgetLedgerEntry.gpu_hours``: four decimal places).
LEDGER_QUANTUM = Decimal("0.0001")
# The most GPU-hours one grant may hold: ``BudgetLedgerEntry.gpu_hours`` and the kept balance
# hold 12 digits with 4 decimal places (8 whole digits), a grant has 3 decimal places.
MAX_GRANT_GPU_HOURS = Decimal("99999999.999")


def fmt(value: Decimal | int | None) -> str:
    """A quantity without trailing zeros: 8.000 -> 8, 0.500 -> 0.5."""
    if value is None:
        return "none"
    text = format(Decimal(value).normalize(), "f")
    return text


def idle_timeout_field(what: str) -> models.PositiveIntegerField[int | None, int | None]:
    """An idle-policy timeout in seconds (null: off for a class, inherit for a queue)."""
    return models.PositiveIntegerField(
        null=True, blank=True, validators=[MinValueValidator(1)], help_text=what
    )


# The idle policy's timeouts in the words of the pages (the Queues page's "Alert after idle"
# and "Reclaim after idle" columns), for the messages that name them.
IDLE_POLICY_WORDS = {
    "idle_alert_after_s": "alert after idle",
    "idle_reclaim_after_s": "reclaim after idle",
}


def idle_policy_errors(alert_after_s: int | None, reclaim_after_s: int | None) -> dict[str, str]:
    """The idle policy's rules, by field, said in the pages' words (``IDLE_POLICY_WORDS``):
    positive timeouts, and the reclaim after the alert when both are set (an alert after the
    reclaim would tell nobody anything)."""
    errors: dict[str, str] = {}
    for field, value in (
        ("idle_alert_after_s", alert_after_s),
        ("idle_reclaim_after_s", reclaim_after_s),
    ):
        if value is not None and value <= 0:
            errors[field] = (
                f"{IDLE_POLICY_WORDS[field]} must be a positive number of seconds, not {value}"
            )
    if (
        not errors
        and alert_after_s is not None
        and reclaim_after_s is not None
        and reclaim_after_s <= alert_after_s
    ):
        errors["idle_reclaim_after_s"] = (
            f"reclaim after idle ({reclaim_after_s} s) must be longer than alert after idle "
            f"({alert_after_s} s): the alert warns before the reclaim"
        )
    return errors


class Queue(models.Model):
    """A node of the queue tree: the root stands for the pool, leaves receive workloads."""

    name = models.CharField(max_length=63, unique=True, validators=[validate_label_value])
    parent = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.PROTECT, related_name="children"
    )
    tenant = models.ForeignKey(
        Tenant, null=True, blank=True, on_delete=models.PROTECT, related_name="queues"
    )
    weight = models.DecimalField(
        max_digits=8,
        decimal_places=3,
        default=Decimal(1),
        help_text="Share of idle capacity this queue gets when borrowing, relative to siblings.",
    )
    reclaimable = models.BooleanField(
        default=True, help_text="Whether capacity this queue borrowed may be taken back."
    )
    lending_limit = models.DecimalField(
        null=True,
        blank=True,
        help_text="GPUs of its idle deserved quota this queue lends; empty means no limit.",
        max_digits=10,
        decimal_places=3,
        validators=[MinValueValidator(ZERO)],
    )
    default_protected_runtime_s = models.PositiveIntegerField(
        default=0, help_text="Protected runtime a workload gets when it declares none."
    )
    max_protected_runtime_s = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="Longest free protection at the default class; empty means no cap.",
    )
    idle_alert_after_s = idle_timeout_field(
        "Seconds idle before the owner of a workload here is alerted; empty: the class's."
    )
    idle_reclaim_after_s = idle_timeout_field(
        "Seconds idle before a workload here is reclaimed (outside its protected window); "
        "empty: the class's."
    )
    description = models.TextField(blank=True)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.CheckConstraint(condition=Q(weight__gt=0), name="queue_weight_positive"),
            models.CheckConstraint(
                condition=Q(lending_limit__isnull=True) | Q(lending_limit__gte=0),
                name="queue_lending_limit_non_negative",
            ),
            models.CheckConstraint(
                condition=Q(max_protected_runtime_s__isnull=True)
                | Q(default_protected_runtime_s__lte=F("max_protected_runtime_s")),
                name="queue_default_protection_within_max",
            ),
        ]

    def __str__(self) -> str:
        return self.name

    def ancestors(self) -> list[Queue]:
        """The parent, grandparent, ... up to the root (stops at a cycle)."""
        chain: list[Queue] = []
        seen = {self.pk}
        node = self.parent
        while node is not None and node.pk not in seen:
            chain.append(node)
            seen.add(node.pk)
            node = node.parent
        return chain

    def is_leaf(self) -> bool:
        """True when no queue has this one as its parent."""
        return self.pk is not None and not self.children.exists()

    def tenant_change_errors(self) -> dict[str, str]:
        """``{"tenant": why}`` when the queue would move to another tenant (or to none) while
        it has any workload, finished ones included: who sees a workload, and whose cost and
        history it is, follow its queue's tenant, so a move would hand the old tenant's work
        to the new one. A queue that never held work may move. Nothing for a new queue."""
        if self.pk is None:
            return {}
        stored = Queue.objects.filter(pk=self.pk).values_list("tenant_id", flat=True).first()
        if stored == self.tenant_id:
            return {}
        held = self.workloads.count()
        if not held:
            return {}
        owner = Tenant.objects.filter(pk=stored).first() if stored is not None else None
        asked = f"tenant {self.tenant}" if self.tenant_id is not None else "no tenant"
        return {
            "tenant": f"queue {self.name} belongs to "
            f"{f'tenant {owner}' if owner is not None else 'no tenant'} and has held {held} "
            f"workload{'s' * (held != 1)} (finished ones count): who sees them and whose cost "
            f"and history they are follow the queue's tenant, so it stays; for {asked}, "
            f"create a new queue"
        }

    def clean(self) -> None:
        """Check the name stays as created, weight, protection bounds, the idle policy, that
        the tree has no cycle, that a new parent holds no unfinished work (workloads go to
        leaves), that re-parenting keeps every guarantee inside its new ancestor's, and that
        the tenant stays once the queue has held work (``tenant_change_errors``)."""
        errors: dict[str, str] = (
            idle_policy_errors(self.idle_alert_after_s, self.idle_reclaim_after_s)
            | fixed_field_errors(self, "name")
            | self.tenant_change_errors()
        )
        if self.weight is not None and self.weight <= 0:
            errors["weight"] = f"weight must be greater than 0, not {fmt(self.weight)}"
        if (
            self.max_protected_runtime_s is not None
            and self.default_protected_runtime_s is not None
            and self.default_protected_runtime_s > self.max_protected_runtime_s
        ):
            errors["default_protected_runtime_s"] = (
                f"the default protected runtime ({self.default_protected_runtime_s} s) is above "
                f"the queue's maximum of {self.max_protected_runtime_s} s"
            )
        if self.parent_id is not None and self.pk is not None:
            if self.parent_id == self.pk:
                errors["parent"] = "a queue cannot be its own parent"
            else:
                parents = dict(Queue.objects.values_list("id", "parent_id"))
                node: int | None = self.parent_id
                seen: set[int] = set()
                while node is not None and node not in seen:
                    if node == self.pk:
                        errors["parent"] = (
                            f"{self.parent} is inside {self.name}'s subtree; a queue cannot be "
                            f"its own ancestor"
                        )
                        break
                    seen.add(node)
                    node = parents.get(node)
        old_parent = (
            Queue.objects.filter(pk=self.pk).values_list("parent_id", flat=True).first()
            if self.pk is not None
            else None
        )
        parent = self.parent if self.parent_id is not None else None
        if "parent" not in errors and parent is not None and old_parent != parent.pk:
            waiting = parent.workloads.filter(unfinished()).count()
            if waiting:
                errors["parent"] = (
                    f"{parent} is a leaf queue holding {waiting} unfinished "
                    f"workload{'s' * (waiting != 1)}; with a child it would stop taking them "
                    f"(workloads go to leaf queues): choose another parent, or wait until they "
                    f"finish"
                )
        if "parent" not in errors and self.pk is not None and old_parent != self.parent_id:
            moved = {self.pk: self.parent_id}
            where = f"under {parent.name}" if parent is not None else "at the top of the tree"
            problems = []
            for flavor in Flavor.objects.filter(quotas__queue__isnull=False).distinct():
                found = guarantee_problems(flavor, parent_overrides=moved)
                if found:  # each flavor's problems, then what this queue could hold there
                    room = guarantee_room(flavor, self.pk, parent_overrides=moved)
                    unit = flavor_unit(flavor.sharing)
                    words = room.words(self.name, flavor.name, where=where, unit=unit)
                    problems.append("; ".join(found) + words)
            if problems:
                errors["parent"] = "; ".join(problems)
        if errors:
            raise ValidationError(errors)


class QueueQuota(models.Model):
    """A queue's quota of one flavor, in GPUs: guarantee <= deserved <= capability."""

    queue = models.ForeignKey(Queue, on_delete=models.CASCADE, related_name="quotas")
    flavor = models.ForeignKey(Flavor, on_delete=models.PROTECT, related_name="quotas")
    guarantee = models.DecimalField(
        default=ZERO,
        help_text="Reserved: never lent, never reclaimed.",
        max_digits=10,
        decimal_places=3,
        validators=[MinValueValidator(ZERO)],
    )
    deserved = models.DecimalField(
        default=ZERO,
        help_text="Fair share: lent while idle, reclaimed when wanted.",
        max_digits=10,
        decimal_places=3,
        validators=[MinValueValidator(ZERO)],
    )
    capability = models.DecimalField(
        default=ZERO,
        help_text="Hard cap, even when the pool is idle.",
        max_digits=10,
        decimal_places=3,
        validators=[MinValueValidator(ZERO)],
    )

    class Meta:
        ordering = ["queue__name", "flavor__name"]
        constraints = [
            models.UniqueConstraint(fields=["queue", "flavor"], name="queuequota_unique_flavor"),
            models.CheckConstraint(
                condition=Q(guarantee__gte=0), name="queuequota_guarantee_non_negative"
            ),
            models.CheckConstraint(
                condition=Q(guarantee__lte=F("deserved")), name="queuequota_guarantee_le_deserved"
            ),
            models.CheckConstraint(
                condition=Q(deserved__lte=F("capability")),
                name="queuequota_deserved_le_capability",
            ),
        ]

    def __str__(self) -> str:
        return (
            f"{self.queue.name}/{self.flavor.name}: {fmt(self.guarantee)}/"
            f"{fmt(self.deserved)}/{fmt(self.capability)}"
        )

    def clean(self) -> None:
        """Whole numbers on a flavor given whole (``whole_gpu_errors``); guarantee <= deserved
        <= capability; the guarantee fits its ancestors and the pool."""
        guarantee, deserved, capability = self.guarantee, self.deserved, self.capability
        if guarantee is None or deserved is None or capability is None:
            return  # the missing field has its own error
        errors: dict[str, str] = (
            whole_gpu_errors(
                self.flavor,
                {"guarantee": guarantee, "deserved": deserved, "capability": capability},
            )
            if self.flavor_id is not None
            else {}
        )
        levels = {"guarantee": guarantee, "deserved": deserved, "capability": capability}
        for out_of_order in levels_out_of_order(levels):
            errors.setdefault(out_of_order.low, out_of_order.message)
        if not errors and self.queue_id is not None and self.flavor_id is not None:
            problems = guarantee_problems(
                self.flavor, quota_overrides={self.queue_id: Decimal(guarantee)}
            )
            if problems:
                room = guarantee_room(self.flavor, self.queue_id)
                errors["guarantee"] = "; ".join(problems) + room.words(
                    self.queue.name, self.flavor.name, unit=flavor_unit(self.flavor.sharing)
                )
        if errors:
            raise ValidationError(errors)


def _guarantees(
    flavor: Flavor,
    quota_overrides: Mapping[int, Decimal | None] | None = None,
    parent_overrides: Mapping[int, int | None] | None = None,
) -> tuple[dict[int, int | None], dict[int, Decimal], dict[int, int | None], dict[int, Decimal]]:
    """The tree and the guarantees of ``flavor`` by queue id, now and after the changes."""
    parents: dict[int, int | None] = dict(Queue.objects.values_list("id", "parent_id"))
    current: dict[int, Decimal] = dict(
        QueueQuota.objects.filter(flavor=flavor).values_list("queue_id", "guarantee")
    )
    changed_parents = {**parents, **(parent_overrides or {})}
    changed = dict(current)
    for queue_id, value in (quota_overrides or {}).items():
        if value is None:
            changed.pop(queue_id, None)
        else:
            changed[queue_id] = value
    return parents, current, changed_parents, changed


def _totals_by_holder(
    tree: Mapping[int, int | None], quotas: Mapping[int, Decimal]
) -> dict[int | None, Decimal]:
    """Guarantees summed per nearest quota-holding ancestor (None: the pool)."""
    totals: dict[int | None, Decimal] = defaultdict(Decimal)
    for queue_id, amount in quotas.items():
        holder = tree.get(queue_id)
        seen = {queue_id}
        while holder is not None and holder not in quotas and holder not in seen:
            seen.add(holder)
            holder = tree.get(holder)
        totals[holder if holder in quotas else None] += amount
    return totals


def pool_guarantees(
    flavor: Flavor, *, quota_overrides: Mapping[int, Decimal | None] | None = None
) -> Decimal:
    """The guarantees of ``flavor`` that count against the pool's healthy capacity (those of
    queues under no quota-holding ancestor), after the given changes."""
    _, _, tree, quotas = _guarantees(flavor, quota_overrides)
    return _totals_by_holder(tree, quotas).get(None, ZERO)


class QueueQuotaChange(models.Model):
    """A queue's quota of one flavor from ``effective_from`` on (until the next change; all
    zero once removed): the history that past hours' guarantees are charged at."""

    queue = models.ForeignKey(Queue, on_delete=models.CASCADE, related_name="quota_changes")
    flavor = models.ForeignKey(Flavor, on_delete=models.CASCADE, related_name="quota_changes")
    effective_from = models.DateTimeField()
    guarantee = models.DecimalField(max_digits=10, decimal_places=3)
    deserved = models.DecimalField(max_digits=10, decimal_places=3)
    capability = models.DecimalField(max_digits=10, decimal_places=3)

    class Meta:
        ordering = ["queue", "flavor", "effective_from"]
        constraints = [
            models.UniqueConstraint(
                fields=["queue", "flavor", "effective_from"],
                name="queuequotachange_once_per_instant",
            ),
            models.CheckConstraint(
                condition=Q(guarantee__gte=0)
                & Q(guarantee__lte=F("deserved"))
                & Q(deserved__lte=F("capability")),
                name="queuequotachange_levels_ordered",
            ),
        ]

    def __str__(self) -> str:
        since = f"{self.effective_from:%Y-%m-%d %H:%M}"
        return (
            f"{self.queue.name}/{self.flavor.name}: {fmt(self.guarantee)}/{fmt(self.deserved)}/"
            f"{fmt(self.capability)} from {since}"
        )


def guarantee_problems(
    flavor: Flavor,
    *,
    quota_overrides: Mapping[int, Decimal | None] | None = None,
    parent_overrides: Mapping[int, int | None] | None = None,
) -> list[str]:
    """Why the tree's guarantees of ``flavor`` would not fit after the given changes.

    Every guaranteed queue is counted against its nearest ancestor that has a quota for the
    flavor; the guarantees under one ancestor must fit in its guarantee, and those with no such
    ancestor (under the root, which stands for the pool) must fit in the pool's healthy
    capacity. ``quota_overrides`` maps queue id to a new guarantee (None: quota removed);
    ``parent_overrides`` maps queue id to a new parent id. Only violations the change creates
    or worsens are reported, so a pool that lost GPUs can still lower its guarantees.
    """
    parents, current, changed_parents, changed = _guarantees(
        flavor, quota_overrides, parent_overrides
    )
    names: dict[int, str] = dict(Queue.objects.values_list("id", "name"))
    capacity = healthy_capacity(flavor)
    units = f"{flavor_unit(flavor.sharing)}s"  # a MIG flavor's: MIG instances, never GPUs

    def excess(
        totals: Mapping[int | None, Decimal], quotas: Mapping[int, Decimal]
    ) -> dict[int | None, Decimal]:
        return {
            holder: total - (capacity if holder is None else quotas[holder])
            for holder, total in totals.items()
        }

    before = excess(_totals_by_holder(parents, current), current)
    after_totals = _totals_by_holder(changed_parents, changed)
    after = excess(after_totals, changed)
    problems: list[str] = []
    for holder in sorted(after, key=lambda h: (h is not None, names.get(h or 0, ""))):
        over = after[holder]
        if over <= 0 or over <= before.get(holder, ZERO):
            continue
        total = fmt(after_totals[holder])
        if holder is None:
            problems.append(
                f"the top-level {flavor.name} guarantees would total {total} {units}, more "
                f"than the pool's {fmt(capacity)} healthy {flavor.name} {units}"
            )
        else:
            problems.append(
                f"the guarantees inside {names[holder]} would total {total} {flavor.name} "
                f"{units}, "
                f"more than its own guarantee of {fmt(changed[holder])}"
            )
    return problems


@dataclass(frozen=True)
class GuaranteeRoom:
    """The guarantees of one flavor a queue can hold as the tree stands (``guarantee_room``):
    at least ``least`` (what its child queues guarantee inside it), at most ``most`` (what
    its nearest quota-holding ancestor, or the pool, has left beside the other guarantees
    in it). ``most`` below ``least``: none fits."""

    least: Decimal
    most: Decimal

    def words(
        self, queue: str, flavor: str, *, where: str = "as the tree stands", unit: str = GPU_UNIT
    ) -> str:
        """The room as the clause a guarantee's refusal ends with ("; as the tree stands,
        nlp can hold a guarantee of at most 28 h100 GPUs"); ``where`` says which tree (a
        re-parent's refusal: "under research"); ``unit``, the flavor's (MIG instances for a
        MIG flavor)."""
        if self.most < self.least:
            return (
                f"; {where}, no guarantee of {queue} fits: its child queues "
                f"guarantee {fmt(self.least)} {flavor} {unit}s inside it, more than the "
                f"{fmt(self.most)} it can hold"
            )
        if self.least > 0:
            amount = f"between {fmt(self.least)} and {fmt(self.most)}"
        else:
            amount = f"of at most {fmt(self.most)}"
        return f"; {where}, {queue} can hold a guarantee {amount} {flavor} {unit}s"


def guarantee_room(
    flavor: Flavor, queue_id: int, *, parent_overrides: Mapping[int, int | None] | None = None
) -> GuaranteeRoom:
    """The guarantees of ``flavor`` the queue ``queue_id`` can hold without breaking a tree
    rule ``guarantee_problems`` checks, all else as it is (or with the queues of
    ``parent_overrides`` moved, as there): its guarantee counts against its nearest ancestor
    holding quota of the flavor (none: the pool's healthy capacity) beside the other
    guarantees there, and holds its children's. As there, a rule already broken (a pool that
    lost GPUs) only bars what would worsen it, so the guarantee it holds now is always in
    the room of a queue left where it is."""
    parents, current, tree, changed = _guarantees(flavor, {queue_id: ZERO}, parent_overrides)
    before = _totals_by_holder(parents, current)
    after = _totals_by_holder(tree, changed)  # the queue holding 0: the others' part
    holder = tree.get(queue_id)
    seen = {queue_id}
    while holder is not None and holder not in changed and holder not in seen:
        seen.add(holder)
        holder = tree.get(holder)
    top = holder if holder in changed else None
    capacity = healthy_capacity(flavor) if top is None else changed[top]
    others = after.get(top, ZERO)
    most = max(capacity, before.get(top, ZERO)) - others
    inside = after.get(queue_id, ZERO)  # its children's guarantees, held by it
    held = current.get(queue_id)
    already_over = max(ZERO, before.get(queue_id, ZERO) - held) if held is not None else ZERO
    return GuaranteeRoom(least=max(ZERO, inside - already_over), most=max(ZERO, most))


# Why the default class cannot stop being the default on its own (nor be deleted).
NO_DEFAULT_LEFT = (
    "{name} is the default priority class, which workloads that name no class get; there is "
    "always one: make another class the default instead (default: true on it)"
)


class PriorityClass(models.Model):
    """A priority level: its value, whether it preempts, and what it costs in budget."""

    name = models.CharField(max_length=63, unique=True, validators=[validate_label_value])
    # Kubernetes' bound on a user's priority class (and int32 on PostgreSQL): the core's
    # scenario files take the same (``scenario.MAX_PRIORITY_VALUE``)
    value = models.IntegerField(
        validators=[MinValueValidator(-MAX_PRIORITY_VALUE), MaxValueValidator(MAX_PRIORITY_VALUE)],
        help_text="Higher runs first and may preempt lower (at most 1,000,000,000 either way).",
    )
    preemption_policy = models.CharField(
        max_length=32,
        choices=PreemptionPolicy.choices,
        default=PreemptionPolicy.PREEMPT_LOWER_PRIORITY,
    )
    budget_rate = models.DecimalField(
        max_digits=8,
        decimal_places=3,
        default=ZERO,
        validators=[MinValueValidator(ZERO)],
        help_text="Budget GPU-hours spent per GPU-hour run at this class; 0 needs no budget.",
    )
    default = models.BooleanField(
        default=False, help_text="The class of workloads that name none (exactly one)."
    )
    idle_alert_after_s = idle_timeout_field(
        "Seconds a workload of this class may sit idle before its owner and team leads are "
        "alerted; empty: never."
    )
    idle_reclaim_after_s = idle_timeout_field(
        "Seconds a workload of this class may sit idle before it is reclaimed (outside its "
        "protected window; it ends, it is not requeued); empty: never."
    )
    description = models.TextField(blank=True)

    class Meta:
        ordering = ["-value", "name"]
        verbose_name_plural = "priority classes"
        constraints = [
            models.UniqueConstraint(
                fields=["default"],
                condition=Q(default=True),
                name="priorityclass_one_default",
                violation_error_message="Another priority class is already the default.",
            ),
            models.CheckConstraint(
                condition=Q(budget_rate__gte=0), name="priorityclass_budget_rate_non_negative"
            ),
            models.CheckConstraint(
                condition=Q(default=False) | Q(budget_rate=0),
                name="priorityclass_default_is_free",
            ),
            models.CheckConstraint(
                condition=Q(preemption_policy__in=PreemptionPolicy.values),
                name="priorityclass_preemption_policy_valid",
            ),
        ]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        """The name stays as created, the default class is free and stays the default until
        another class takes over (``do_save_priority_class`` moves it), and the idle policy's
        timeouts are positive, the reclaim after the alert."""
        errors: dict[str, str] = idle_policy_errors(
            self.idle_alert_after_s, self.idle_reclaim_after_s
        ) | fixed_field_errors(self, "name")
        if self.default and self.budget_rate:
            errors["budget_rate"] = (
                f"the default class spends no budget: its budget rate must be 0, "
                f"not {fmt(self.budget_rate)}"
            )
        if (
            not self.default
            and self.pk is not None
            and PriorityClass.objects.filter(pk=self.pk, default=True).exists()
        ):
            errors["default"] = NO_DEFAULT_LEFT.format(name=self.name)
        if errors:
            raise ValidationError(errors)


def covering(day: date) -> Q:
    """Budgets whose period contains ``day`` (its start included, its end not): the one rule
    by which the loop, the pages and the API pick the budget in force on a day."""
    return Q(period_start__lte=day, period_end__gt=day)


class PriorityBudget(models.Model):
    """GPU-hours a tenant may spend at one budgeted priority class during one period."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="budgets")
    priority_class = models.ForeignKey(
        PriorityClass, on_delete=models.PROTECT, related_name="budgets"
    )
    period_start = models.DateField()
    period_end = models.DateField(help_text="Exclusive: the first day after the period.")
    gpu_hours = models.DecimalField(
        max_digits=12,
        decimal_places=3,
        validators=[MinValueValidator(ZERO)],
        help_text="Granted GPU-hours of budget (the sum of the ledger's grant entries).",
    )
    # The ledger's sum, kept: every write of entries moves it in the same transaction
    # (quotas.actions.write_ledger_entries), so that the loop reads one column per budget
    # every cycle, not a month of entries. The ledger stays the source of truth
    # (quotas.queries.ledger_mismatches checks the two agree).
    balance_gpu_hours = models.DecimalField(
        max_digits=12,
        decimal_places=4,
        default=ZERO,
        editable=False,
        help_text="Remaining GPU-hours: the sum of the ledger's entries, kept as they are written.",
    )

    class Meta:
        ordering = ["tenant__name", "priority_class__name", "-period_start"]
        constraints = [
            models.UniqueConstraint(
                fields=["tenant", "priority_class", "period_start"],
                name="prioritybudget_unique_period",
            ),
            models.CheckConstraint(
                condition=Q(period_end__gt=F("period_start")), name="prioritybudget_period_order"
            ),
            models.CheckConstraint(
                condition=Q(gpu_hours__gte=0), name="prioritybudget_gpu_hours_non_negative"
            ),
        ]

    def __str__(self) -> str:
        return budget_name(
            str(self.tenant), str(self.priority_class), self.period_start, self.period_end
        )

    def period_text(self) -> str:
        """Its period as the pages and the CLI show it (``period_words``)."""
        return period_words(self.period_start, self.period_end)

    def period_last_day(self) -> date | None:
        """Its period's last day, included (``last_day``)."""
        return last_day(self.period_end)

    def clean(self) -> None:
        """The class is budgeted, the grant fits the ledger, the period is ordered and overlaps
        no other of the same class."""
        errors: dict[str, str] = {}
        if self.gpu_hours is not None and Decimal(self.gpu_hours) > MAX_GRANT_GPU_HOURS:
            errors["gpu_hours"] = (
                f"a grant holds at most {fmt(MAX_GRANT_GPU_HOURS)} GPU-hours (what the ledger "
                f"holds), not {fmt(self.gpu_hours)}"
            )
        if self.priority_class_id is not None and self.priority_class.budget_rate <= 0:
            errors["priority_class"] = (
                f"{self.priority_class.name} has a budget rate of 0 and needs no budget"
            )
        if self.period_start and self.period_end:
            if self.period_end <= self.period_start:
                errors["period_end"] = (
                    f"the period's end ({self.period_end}) must be after its start "
                    f"({self.period_start})"
                )
            elif self.tenant_id is not None and self.priority_class_id is not None:
                overlapping = (
                    PriorityBudget.objects.filter(
                        tenant_id=self.tenant_id,
                        priority_class_id=self.priority_class_id,
                        period_start__lt=self.period_end,
                        period_end__gt=self.period_start,
                    )
                    .exclude(pk=self.pk)
                    .first()
                )
                if overlapping is not None:
                    errors["period_start"] = f"the period overlaps the budget {overlapping}"
        if errors:
            raise ValidationError(errors)

    def remaining_gpu_hours(self) -> Decimal:
        """Granted minus spent minus held in open reservations: the ledger's balance now, as
        kept on the budget's row (one row read, not the ledger summed; this instance's own
        ``balance_gpu_hours`` is as of when it was read)."""
        if self.pk is None:
            return Decimal(self.gpu_hours or 0)
        kept = PriorityBudget.objects.filter(pk=self.pk).values_list("balance_gpu_hours", flat=True)
        return Decimal(kept.first() or 0)


class BudgetLedgerEntry(models.Model):
    """One signed movement on a budget: grants add, reservations and spending subtract,
    settlements give reservations back. The balance is the sum of the entries."""

    budget = models.ForeignKey(PriorityBudget, on_delete=models.CASCADE, related_name="entries")
    kind = models.CharField(max_length=16, choices=LedgerEntryKind.choices)
    gpu_hours = models.DecimalField(max_digits=12, decimal_places=4)
    at = models.DateTimeField()
    workload = models.ForeignKey(
        "workloads.Workload",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="budget_entries",
    )
    note = models.CharField(max_length=200, blank=True)

    class Meta:
        ordering = ["at", "id"]
        verbose_name_plural = "budget ledger entries"
        constraints = [
            models.CheckConstraint(
                condition=Q(kind=LedgerEntryKind.GRANT)
                | Q(kind__in=[LedgerEntryKind.RESERVE, LedgerEntryKind.SPEND], gpu_hours__lte=0)
                | Q(kind=LedgerEntryKind.SETTLE, gpu_hours__gte=0),
                name="budgetledgerentry_sign_matches_kind",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.budget} {self.kind} {fmt(self.gpu_hours)}"


def last_day(end: date | None) -> date | None:
    """A budget's period's last day, included, from its stored ``end`` (the first day after
    it): the day the pages show as its end (``period_words``) and the API's and its CSVs'
    ``period_last_day``. None without an end."""
    return None if end is None else end - timedelta(days=1)


def period_words(start: date | None, end: date | None) -> str:
    """A budget's period, stored with ``end`` the first day after it, as the pages, the CLI
    and the mails show it: its first and last days, the last included, as the Cost page's
    "End (included)" reads (``2026-12-01 to 2026-12-31 (included)``), so that nobody reads
    the stored end as the period's last day. A missing day is shown as missing."""
    if start is None or end is None:
        return f"{start or '?'} to {end or '?'} (the first day after it)"
    return f"{start:%Y-%m-%d} to {last_day(end):%Y-%m-%d} (included)"


def budget_name(tenant: str, priority_class: str, start: date | None, end: date | None) -> str:
    """A budget's name, its team and class with its period in words (``period_words``), as
    ``str(budget)`` and the audit rows of the loop's budget moves (which read budgets as
    values) write it: ``nlp/high 2026-12-01 to 2026-12-31 (included)``."""
    return f"{tenant}/{priority_class} {period_words(start, end)}"


QUEUE_QUOTA_KEYS = QUOTA_LEVELS
BUDGET_KEYS = ("gpu_hours",)
# The largest amount and the decimal places a request may ask for, by payload key: what the
# quota's columns hold (10 digits, 3 places), and for GPU-hours what one ledger entry and a
# grant hold (``MAX_GRANT_GPU_HOURS``).
PAYLOAD_LIMITS: dict[str, tuple[Decimal, int]] = {
    "guarantee": (Decimal("9999999.999"), 3),
    "deserved": (Decimal("9999999.999"), 3),
    "capability": (Decimal("9999999.999"), 3),
    "gpu_hours": (MAX_GRANT_GPU_HOURS, 3),
}
# The longest justification a request carries (it is mailed to the admins and shown whole).
JUSTIFICATION_MAX_LENGTH = 4000


def _payload_amount(payload: Mapping[str, Any], key: str) -> Decimal:
    """``payload[key]`` as a non-negative Decimal the target's columns hold, or ValueError
    saying why not."""
    value = payload.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float | str | Decimal):
        raise ValueError(f"{key} must be a number")
    try:
        amount = Decimal(str(value))
    except InvalidOperation:
        raise ValueError(f"{key} must be a number, not {value!r}") from None
    if not amount.is_finite() or amount < 0:
        raise ValueError(f"{key} must be a number of at least 0, not {value!r}")
    largest, places = PAYLOAD_LIMITS[key]
    if amount > largest:
        raise ValueError(f"{key} must be at most {fmt(largest)}, not {value!r}")
    if amount != amount.quantize(Decimal(1).scaleb(-places)):
        raise ValueError(f"{key} has at most {places} decimal places, not {value!r}")
    return amount


def payload_text(value: Any) -> Any:
    """A requested amount as a request's payload stores it and the requests API writes it: a
    decimal string, as the API writes every GPU amount (``"36"``, ``"12.5"``: no exponent, no
    trailing zeros, so the amount reads as it was asked), whether it came as a JSON number
    (``36``) or a string (``"36.0"``). A value that is no number stays as it is (the request's
    ``clean`` says why)."""
    if isinstance(value, bool) or not isinstance(value, int | float | str | Decimal):
        return value
    try:
        amount = Decimal(str(value))
    except InvalidOperation:
        return value
    if not amount.is_finite():
        return value
    return format(amount.normalize(), "f")


def payload_texts(payload: Any) -> Any:
    """``payload`` with each amount as ``payload_text`` writes it: how a request is saved
    (``QuotaRequest.clean``) and shown (the requests API), so a request stored before that
    (with numbers) reads as one filed now. Anything but a mapping stays as it is."""
    if not isinstance(payload, Mapping):
        return payload
    return {key: payload_text(value) for key, value in payload.items()}


class QuotaRequest(models.Model):
    """A lead's request to change a queue's quota or a tenant's priority budget."""

    kind = models.CharField(max_length=16, choices=QuotaRequestKind.choices)
    state = models.CharField(
        max_length=16, choices=QuotaRequestState.choices, default=QuotaRequestState.DRAFT
    )
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="quota_requests")
    queue = models.ForeignKey(
        Queue, null=True, blank=True, on_delete=models.CASCADE, related_name="quota_requests"
    )
    flavor = models.ForeignKey(
        Flavor, null=True, blank=True, on_delete=models.PROTECT, related_name="quota_requests"
    )
    priority_class = models.ForeignKey(
        PriorityClass,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="quota_requests",
    )
    period_start = models.DateField(null=True, blank=True)
    period_end = models.DateField(null=True, blank=True)
    payload = models.JSONField(
        default=dict,
        help_text='queue-quota: the new {"guarantee", "deserved", "capability"}; budget: '
        '{"gpu_hours"} to add to the period\'s grant.',
    )
    justification = models.TextField()
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="quota_requests"
    )
    created_at = models.DateTimeField(default=pool_time, editable=False)
    submitted_at = models.DateTimeField(null=True, blank=True)
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="quota_decisions",
    )
    decided_at = models.DateTimeField(null=True, blank=True)
    decision_note = models.TextField(blank=True)
    applied_at = models.DateTimeField(null=True, blank=True)
    withdrawn_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="When its requester withdrew it, submitted and not yet decided.",
    )

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.CheckConstraint(
                condition=Q(kind__in=QuotaRequestKind.values), name="quotarequest_kind_valid"
            ),
            models.CheckConstraint(
                condition=Q(state__in=QuotaRequestState.values), name="quotarequest_state_valid"
            ),
            models.CheckConstraint(
                condition=Q(decided_by__isnull=True) | ~Q(decided_by=F("requested_by")),
                name="quotarequest_not_self_decided",
                violation_error_message="Nobody decides their own request.",
            ),
            models.CheckConstraint(
                condition=Q(
                    state__in=[
                        QuotaRequestState.DRAFT,
                        QuotaRequestState.SUBMITTED,
                        QuotaRequestState.WITHDRAWN,
                    ]
                )
                | Q(decided_by__isnull=False, decided_at__isnull=False),
                name="quotarequest_decision_recorded",
            ),
            models.CheckConstraint(
                condition=~Q(state=QuotaRequestState.WITHDRAWN)
                | Q(withdrawn_at__isnull=False, decided_by__isnull=True),
                name="quotarequest_withdrawal_recorded",
                violation_error_message="A withdrawn request says when, and nobody decided it.",
            ),
            models.CheckConstraint(
                condition=~Q(kind=QuotaRequestKind.QUEUE_QUOTA)
                | Q(queue__isnull=False, flavor__isnull=False),
                name="quotarequest_queue_quota_target",
            ),
            models.CheckConstraint(
                condition=~Q(kind=QuotaRequestKind.BUDGET)
                | Q(
                    priority_class__isnull=False,
                    period_start__isnull=False,
                    period_end__isnull=False,
                ),
                name="quotarequest_budget_target",
            ),
        ]

    def __str__(self) -> str:
        target = (
            f"{self.queue}/{self.flavor}"
            if self.kind == QuotaRequestKind.QUEUE_QUOTA
            else f"{self.tenant}/{self.priority_class}"
        )
        return f"#{self.pk} {self.kind} {target} ({self.state})"

    def summary(self) -> str:
        """What the request asks, in a line, its amounts in the pages' format
        (``number_formats``: GPUs to the milli-GPU, GPU-hours to the hundredth), each level
        in its flavor's unit as the pages write it (``flavor_unit``: a MIG flavor's in MIG
        instances): ``queue nlp h100: guarantee 8 GPUs, deserved 16 GPUs, capability 32.5
        GPUs`` or ``budget of nlp at high, 2026-12-01 to 2026-12-31 (included): 1,212.5
        GPU-hours more`` (the period's last day, ``period_words``); an amount that is no
        number as the payload holds it."""
        amounts = self.payload if isinstance(self.payload, dict) else {}

        def amount(key: str, places: int) -> str:
            try:
                return plain_number(amounts[key], places)
            except (KeyError, InvalidOperation):
                return str(amounts.get(key))

        if self.kind == QuotaRequestKind.QUEUE_QUOTA:
            unit = flavor_unit(self.flavor.sharing) if self.flavor else GPU_UNIT
            levels = ", ".join(
                f"{key} {with_unit(amounts.get(key), unit, f'{unit}s', GPU_PLACES)}"
                for key in QUEUE_QUOTA_KEYS
            )
            return f"queue {self.queue} {self.flavor}: {levels}"
        return (
            f"budget of {self.tenant} at {self.priority_class}, {self.period_text()}: "
            f"{amount('gpu_hours', GPU_HOURS_PLACES)} GPU-hours more"
        )

    def period_text(self) -> str:
        """A budget request's period as the pages and the CLI show it (``period_words``)."""
        return period_words(self.period_start, self.period_end)

    def period_last_day(self) -> date | None:
        """A budget request's period's last day, included (``last_day``); None for a
        queue-quota request, which has no period."""
        return last_day(self.period_end)

    def latest_what_if(self) -> WhatIfRun | None:
        """The request's most recent what-if run, if one was started."""
        return self.what_if_runs.order_by("-created_at", "-id").first()

    def requested_amounts(self) -> dict[str, Decimal]:
        """The payload's amounts as Decimals; ValidationError naming ``payload`` if malformed."""
        keys = QUEUE_QUOTA_KEYS if self.kind == QuotaRequestKind.QUEUE_QUOTA else BUDGET_KEYS
        if not isinstance(self.payload, dict):
            raise ValidationError({"payload": "must be an object"})
        unknown = sorted(set(self.payload) - set(keys))
        missing = [key for key in keys if key not in self.payload]
        if unknown or missing:
            parts = []
            if missing:
                parts.append(f"missing {', '.join(missing)}")
            if unknown:
                parts.append(f"unknown {', '.join(unknown)}")
            raise ValidationError(
                {"payload": f"a {self.kind} request needs {', '.join(keys)}: " + "; ".join(parts)}
            )
        try:
            return {key: _payload_amount(self.payload, key) for key in keys}
        except ValueError as error:
            raise ValidationError({"payload": str(error)}) from None

    def clean(self) -> None:
        """The request names a target of its kind, belongs to its tenant, and asks for
        well-formed amounts (a queue quota's in whole numbers on a flavor given whole,
        ``whole_gpu_errors``, checked while it is filed: a request filed before that rule can
        still be rejected or withdrawn, and its approval is refused by the quota's own
        ``clean``), stored as decimal strings (``payload_texts``); nobody decides their own
        request."""
        errors: dict[str, str] = {}
        if (
            self.decided_by_id is not None
            and self.requested_by_id is not None
            and self.decided_by_id == self.requested_by_id
        ):
            errors["decided_by"] = "nobody approves or rejects their own request"
        if self.kind == QuotaRequestKind.QUEUE_QUOTA:
            if self.queue_id is None:
                errors["queue"] = "a queue-quota request names the queue"
            elif self.tenant_id is not None and Queue.objects.get(pk=self.queue_id).tenant_id != (
                self.tenant_id
            ):
                errors["queue"] = f"queue {self.queue} does not belong to tenant {self.tenant}"
            if self.flavor_id is None:
                errors["flavor"] = "a queue-quota request names the flavor"
        elif self.kind == QuotaRequestKind.BUDGET:
            if self.priority_class_id is None:
                errors["priority_class"] = "a budget request names the priority class"
            else:
                priority_class = PriorityClass.objects.get(pk=self.priority_class_id)
                if priority_class.budget_rate <= 0:
                    errors["priority_class"] = (
                        f"{priority_class.name} has a budget rate of 0 and needs no budget"
                    )
            if self.period_start is None:
                errors["period_start"] = "a budget request names the period's first day"
            if self.period_end is None:
                errors["period_end"] = "a budget request names the period's end"
            elif self.period_start is not None and self.period_end <= self.period_start:
                errors["period_end"] = (
                    f"the period's end ({self.period_end}) must be after its start "
                    f"({self.period_start})"
                )
        if self.kind in QuotaRequestKind.values:
            try:
                amounts = self.requested_amounts()
            except ValidationError as error:
                errors["payload"] = " ".join(error.message_dict["payload"])
            else:
                # One form whoever filed it (a JSON number or a string): decimal strings.
                self.payload = payload_texts(self.payload)
                whole = (
                    whole_gpu_errors(self.flavor, amounts)
                    if self.kind == QuotaRequestKind.QUEUE_QUOTA
                    and self.flavor is not None
                    and self.state in (QuotaRequestState.DRAFT, QuotaRequestState.SUBMITTED)
                    else {}
                )
                if whole:
                    errors["payload"] = "; ".join(whole.values())
                elif self.kind == QuotaRequestKind.QUEUE_QUOTA:
                    # Every pair out of order at once, joined as the whole-number rule's are.
                    out_of_order = levels_out_of_order(amounts)
                    if out_of_order:
                        errors["payload"] = "; ".join(found.message for found in out_of_order)
        if not (self.justification or "").strip():
            errors["justification"] = "say why the change is needed"
        elif len(self.justification) > JUSTIFICATION_MAX_LENGTH:
            errors["justification"] = too_long(JUSTIFICATION_MAX_LENGTH, len(self.justification))
        if errors:
            raise ValidationError(errors)


class WhatIfRun(models.Model):
    """A what-if replay of a queue-quota request's change over the pool's recent demand,
    run in the background: its progress while it runs and its result, kept with the request."""

    request = models.ForeignKey(QuotaRequest, on_delete=models.CASCADE, related_name="what_if_runs")
    state = models.CharField(max_length=16, choices=WhatIfState.choices, default=WhatIfState.QUEUED)
    days = models.PositiveSmallIntegerField(
        default=30,
        validators=[MinValueValidator(1), MaxValueValidator(90)],
        help_text="How many days of recorded demand, up to the run's start, it replays.",
    )
    progress = models.FloatField(default=0.0, help_text="0 (queued) to 1 (done).")
    message = models.CharField(max_length=200, blank=True, help_text="What it is doing now.")
    result = models.JSONField(
        null=True, blank=True, help_text="Waits and use per tenant, today and with the change."
    )
    error = models.TextField(blank=True, help_text="Why it failed.")
    started_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="what_if_runs"
    )
    created_at = models.DateTimeField(default=pool_time, editable=False)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # Its age on the wall clock, which the worker's time limit counts: a run still queued or
    # running that long after is lost (its worker died), and another may start. Not on the
    # pool's clock, which runs ahead in a simulation and stands still when the loop stops.
    queued_wall_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.CheckConstraint(
                condition=Q(state__in=WhatIfState.values), name="whatifrun_state_valid"
            ),
            models.CheckConstraint(
                condition=Q(progress__gte=0, progress__lte=1), name="whatifrun_progress_fraction"
            ),
            models.CheckConstraint(
                condition=Q(days__gte=1, days__lte=90), name="whatifrun_days_range"
            ),
            models.CheckConstraint(
                condition=~Q(state=WhatIfState.SUCCEEDED) | Q(result__isnull=False),
                name="whatifrun_success_has_result",
            ),
            models.CheckConstraint(
                condition=~Q(state=WhatIfState.FAILED) | ~Q(error=""),
                name="whatifrun_failure_says_why",
            ),
        ]

    def __str__(self) -> str:
        return f"what-if #{self.pk} of request #{self.request_id} ({self.state})"
