"""Accounting: GPU usage intervals (the basis of GPU-hours and cost) and preemption events."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal

from django.core.exceptions import ValidationError
from django.core.validators import MinValueValidator
from django.db import models
from django.db.models import F, Q

from gpupool.accounting.choices import REASONS_WITH_PREEMPTOR, PreemptionReason
from gpupool.inventory.models import Flavor
from gpupool.quotas.models import PriorityClass, Queue
from gpupool.tenancy.models import Tenant
from gpupool.workloads.models import Workload

SECONDS_PER_HOUR = Decimal(3600)


class UsageInterval(models.Model):
    """GPUs of one flavor held by one workload from start to end (open while it runs)."""

    workload = models.ForeignKey(Workload, on_delete=models.PROTECT, related_name="usage")
    tenant = models.ForeignKey(
        Tenant, null=True, blank=True, on_delete=models.PROTECT, related_name="usage"
    )
    queue = models.ForeignKey(Queue, on_delete=models.PROTECT, related_name="usage")
    flavor = models.ForeignKey(Flavor, on_delete=models.PROTECT, related_name="usage")
    priority_class = models.ForeignKey(
        PriorityClass, on_delete=models.PROTECT, related_name="usage"
    )
    gpus = models.DecimalField(
        max_digits=10,
        decimal_places=3,
        validators=[MinValueValidator(Decimal(0))],
        help_text="GPUs held; shared flavors count milli / 1000.",
    )
    started_at = models.DateTimeField()
    ended_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["started_at", "id"]
        indexes = [
            models.Index(fields=["tenant", "started_at"], name="usage_tenant_start_idx"),
            models.Index(fields=["queue", "started_at"], name="usage_queue_start_idx"),
        ]
        constraints = [
            models.CheckConstraint(condition=Q(gpus__gte=0), name="usage_gpus_non_negative"),
            models.CheckConstraint(
                condition=Q(ended_at__isnull=True) | Q(ended_at__gte=F("started_at")),
                name="usage_ends_after_start",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.workload.name} {self.gpus} x {self.flavor.name} from {self.started_at}"

    def clean(self) -> None:
        """The interval ends after it starts and is charged to the workload's queue and tenant."""
        errors: dict[str, str] = {}
        if self.started_at and self.ended_at and self.ended_at < self.started_at:
            errors["ended_at"] = "an interval cannot end before it starts"
        if self.workload_id is not None and self.queue_id is not None:
            if self.workload.queue_id != self.queue_id:
                errors["queue"] = f"workload {self.workload} runs in {self.workload.queue}"
            elif self.queue.tenant_id != self.tenant_id:
                errors["tenant"] = f"queue {self.queue} belongs to tenant {self.queue.tenant}"
        if errors:
            raise ValidationError(errors)

    def gpu_hours(self, now: datetime) -> Decimal:
        """GPU-hours of the interval, counting an open interval up to ``now``."""
        end = self.ended_at or now
        seconds = max(Decimal((end - self.started_at).total_seconds()), Decimal(0))
        return self.gpus * seconds / SECONDS_PER_HOUR

    def cost(self, now: datetime) -> Decimal:
        """GPU-hours times the flavor's hourly price."""
        return self.gpu_hours(now) * self.flavor.hourly_price


class PreemptionEvent(models.Model):
    """A workload stopped before it finished: who, for whom or why, and the progress it lost."""

    at = models.DateTimeField(db_index=True)
    reason = models.CharField(max_length=16, choices=PreemptionReason.choices)
    victim = models.ForeignKey(Workload, on_delete=models.PROTECT, related_name="preempted_by")
    victim_queue = models.ForeignKey(Queue, on_delete=models.PROTECT, related_name="+")
    victim_tenant = models.ForeignKey(
        Tenant, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    preemptor = models.ForeignKey(
        Workload,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="preemptions_caused",
    )
    preemptor_queue = models.ForeignKey(
        Queue, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    preemptor_tenant = models.ForeignKey(
        Tenant, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    gpus_freed = models.DecimalField(
        max_digits=10, decimal_places=3, validators=[MinValueValidator(Decimal(0))]
    )
    lost_gpu_hours = models.DecimalField(
        max_digits=12,
        decimal_places=4,
        validators=[MinValueValidator(Decimal(0))],
        help_text="Progress lost since the victim started (or last checkpointed).",
    )
    cycle = models.ForeignKey(
        "control.SchedulingCycle",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="preemptions",
    )

    class Meta:
        ordering = ["-at", "-id"]
        constraints = [
            models.CheckConstraint(
                condition=Q(reason__in=PreemptionReason.values), name="preemption_reason_valid"
            ),
            models.CheckConstraint(
                condition=Q(preemptor__isnull=True) | ~Q(preemptor=F("victim")),
                name="preemption_not_self",
            ),
            models.CheckConstraint(
                condition=Q(gpus_freed__gte=0) & Q(lost_gpu_hours__gte=0),
                name="preemption_amounts_non_negative",
            ),
        ]

    def __str__(self) -> str:
        cause = f"for {self.preemptor.name}" if self.preemptor_id and self.preemptor else ""
        return f"{self.victim.name} {self.reason} {cause}".strip()

    def clean(self) -> None:
        """preempt needs a preemptor (not the victim); failures and drains have none."""
        errors: dict[str, str] = {}
        if self.reason == PreemptionReason.PREEMPT and self.preemptor_id is None:
            errors["preemptor"] = "a preemption names the workload it made room for"
        elif self.reason not in REASONS_WITH_PREEMPTOR and self.preemptor_id is not None:
            errors["preemptor"] = f"a {self.reason} eviction has no preemptor"
        if self.preemptor_id is not None and self.preemptor_id == self.victim_id:
            errors["preemptor"] = "a workload cannot preempt itself"
        if errors:
            raise ValidationError(errors)
