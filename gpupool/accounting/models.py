"""Accounting: GPU usage intervals (the basis of GPU-hours and cost), preemption events, and
the hourly and daily roll-ups that the cost reports read."""

from __future__ import annotations

import uuid
from datetime import datetime
from decimal import Decimal
from typing import Any

from django.core.exceptions import ValidationError
from django.core.validators import MinValueValidator
from django.db import models
from django.db.models import F, Q

from gpupool.accounting.choices import REASONS_WITH_PREEMPTOR, PreemptionReason
from gpupool.inventory.models import Flavor
from gpupool.quotas.models import PriorityClass, Queue
from gpupool.tenancy.models import Tenant
from gpupool.workloads.models import Workload, copied_from_workload

SECONDS_PER_HOUR = Decimal(3600)


class UsageInterval(models.Model):
    """GPUs of one flavor held by one workload from start to end (open while it runs)."""

    workload = models.ForeignKey(Workload, on_delete=models.PROTECT, related_name="usage")
    # Not indexed alone: usage_tenant_start_idx and usage_queue_start_idx lead with them.
    tenant = copied_from_workload(Tenant, null=True, related_name="usage", db_index=False)
    queue = copied_from_workload(Queue, related_name="usage", db_index=False)
    flavor = models.ForeignKey(Flavor, on_delete=models.PROTECT, related_name="usage")
    priority_class = copied_from_workload(PriorityClass, related_name="usage")
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
            # The roll-up reads the intervals that start in, or run into, the hours it counts.
            models.Index(fields=["started_at"], name="usage_start_idx"),
            models.Index(fields=["ended_at"], name="usage_end_idx"),
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
    victim_queue = copied_from_workload(Queue, related_name="+")
    victim_tenant = copied_from_workload(Tenant, null=True, related_name="+")
    preemptor = models.ForeignKey(
        Workload,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="preemptions_caused",
    )
    preemptor_queue = copied_from_workload(Queue, null=True, related_name="+")
    preemptor_tenant = copied_from_workload(Tenant, null=True, related_name="+")
    gpus_freed = models.DecimalField(
        max_digits=10, decimal_places=3, validators=[MinValueValidator(Decimal(0))]
    )
    lost_gpu_hours = models.DecimalField(
        max_digits=12,
        decimal_places=4,
        validators=[MinValueValidator(Decimal(0))],
        help_text="Progress lost since the victim started (or last checkpointed), in the "
        "hours of what it freed (the API's unit): GPU-hours, or MIG instance-hours for a "
        "victim stopped on a MIG flavor's nodes.",
    )
    cycle = models.ForeignKey(
        "control.SchedulingCycle",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="preemptions",
    )
    nodes = models.JSONField(
        default=list,
        blank=True,
        help_text="Names of the nodes the victim ran on when it was stopped, sorted (empty in "
        "events recorded before they were kept): which node's drain an admin eviction was.",
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
        if not isinstance(self.nodes, list) or not all(
            isinstance(node, str) and node for node in self.nodes
        ):
            errors["nodes"] = "a list of node names"
        if errors:
            raise ValidationError(errors)


# ----------------------------------------------------------------------------- roll-ups
#
# The reports read these tables, never the usage intervals, so a year of history stays fast.
# ``do_roll_up_usage`` writes them hour by hour: an hour is rolled up once it has passed and
# is final from then on. Hours are accounting hours and days accounting days
# (``gpupool.accounting.periods``); ``hour`` is the hour's start in UTC.


def _gpu_hours(help_text: str = "") -> models.DecimalField[Decimal, Decimal]:
    """A GPU-hour amount (to 1/10,000)."""
    return models.DecimalField(
        max_digits=16, decimal_places=4, default=Decimal(0), help_text=help_text
    )


def _counted(to: type[models.Model], *, null: bool = False) -> Any:
    """A roll-up row's reference: protected by the ORM (a referenced row cannot be deleted),
    without a database constraint or index, since roll-ups are written by the million from
    rows that exist and are read by period."""
    return models.ForeignKey(
        to,
        null=null,
        blank=null,
        on_delete=models.PROTECT,
        related_name="+",
        db_constraint=False,
        db_index=False,
    )


def _money() -> models.DecimalField[Decimal, Decimal]:
    """A cost: GPU-hours times an hourly price, exact (8 decimal places)."""
    return models.DecimalField(max_digits=24, decimal_places=8, default=Decimal(0))


class RollUpState(models.Model):
    """How far usage is rolled up: every accounting hour before ``rolled_until`` is final."""

    name = models.CharField(max_length=32, unique=True, default="usage")
    rolled_until = models.DateTimeField(null=True, blank=True)
    time_zone = models.CharField(
        max_length=64, help_text="The accounting time zone the roll-ups were counted in."
    )
    version = models.UUIDField(
        default=uuid.uuid4,
        help_text="Changes whenever the roll-ups change: what cached reports are keyed by.",
    )

    def __str__(self) -> str:
        return f"{self.name} rolled up until {self.rolled_until} ({self.time_zone})"


class CapacitySample(models.Model):
    """A flavor's healthy GPUs (MIG: instances) as the roll-up saw them at ``observed_at``; in
    force until the next sample."""

    flavor = models.ForeignKey(Flavor, on_delete=models.CASCADE, related_name="capacity_samples")
    observed_at = models.DateTimeField()
    healthy_gpus = models.DecimalField(max_digits=12, decimal_places=3)

    class Meta:
        ordering = ["flavor", "observed_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["flavor", "observed_at"], name="capacitysample_once_per_instant"
            ),
            models.CheckConstraint(
                condition=Q(healthy_gpus__gte=0), name="capacitysample_non_negative"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.flavor.name}: {self.healthy_gpus} healthy at {self.observed_at}"


class UsageBase(models.Model):
    """GPU-hours and cost of a period, per tenant, queue, flavor and priority class."""

    tenant = _counted(Tenant, null=True)
    queue = _counted(Queue)
    flavor = _counted(Flavor)
    priority_class = _counted(PriorityClass)
    gpu_hours = _gpu_hours()
    cost = _money()
    active_gpu_hours = _gpu_hours("GPU-hours in which the GPUs worked (the activity windows).")
    idle_gpu_hours = _gpu_hours("GPU-hours allocated but idle: gpu_hours - active_gpu_hours.")
    active_cost = _money()
    idle_cost = _money()

    class Meta:
        abstract = True


class UsageHour(UsageBase):
    """GPU-hours and cost of one accounting hour, per tenant, queue, flavor and priority class."""

    hour = models.DateTimeField()
    day = models.DateField()

    class Meta:
        ordering = ["hour", "queue", "flavor", "priority_class"]
        indexes = [
            models.Index(fields=["hour"], name="usagehour_hour_idx"),
            models.Index(fields=["day"], name="usagehour_day_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.hour:%Y-%m-%d %H:%M} {self.queue_id}/{self.flavor_id}: {self.gpu_hours}"


class UsageDay(UsageBase):
    """GPU-hours and cost of one accounting day, per tenant, queue, flavor and priority class."""

    day = models.DateField()

    class Meta:
        ordering = ["day", "queue", "flavor", "priority_class"]
        indexes = [
            models.Index(fields=["day"], name="usageday_day_idx"),
            models.Index(fields=["tenant", "day"], name="usageday_tenant_day_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.day} {self.queue_id}/{self.flavor_id}: {self.gpu_hours}"


class UsageMonth(UsageBase):
    """GPU-hours and cost of one accounting month (``month`` is its first day), per tenant,
    queue, flavor and priority class: what reports over many months read."""

    month = models.DateField()

    class Meta:
        ordering = ["month", "queue", "flavor", "priority_class"]
        indexes = [
            models.Index(fields=["month"], name="usagemonth_month_idx"),
            models.Index(fields=["tenant", "month"], name="usagemonth_tenant_month_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.month:%Y-%m} {self.queue_id}/{self.flavor_id}: {self.gpu_hours}"


class WorkloadDay(models.Model):
    """One workload's GPU-hours and cost of one flavor in one accounting day."""

    day = models.DateField()
    workload = _counted(Workload)
    tenant = _counted(Tenant, null=True)
    queue = _counted(Queue)
    flavor = _counted(Flavor)
    gpu_hours = _gpu_hours()
    cost = _money()
    active_gpu_hours = _gpu_hours("GPU-hours in which the GPUs worked (the activity windows).")
    idle_gpu_hours = _gpu_hours("GPU-hours allocated but idle: gpu_hours - active_gpu_hours.")

    class Meta:
        ordering = ["day", "workload", "flavor"]
        constraints = [
            models.UniqueConstraint(
                fields=["day", "workload", "flavor"], name="workloadday_once_per_day"
            ),
        ]
        indexes = [
            models.Index(fields=["day"], name="workloadday_day_idx"),
            models.Index(fields=["tenant", "day"], name="workloadday_tenant_day_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.day} workload {self.workload_id}/{self.flavor_id}: {self.gpu_hours}"


class FlavorLinesBase(models.Model):
    """A flavor's healthy capacity in a period and the four lines that add up to it."""

    flavor = _counted(Flavor)
    capacity = _gpu_hours("Healthy GPU-hours (at least the GPU-hours used).")
    used = _gpu_hours()
    used_within_guarantee = _gpu_hours()
    reserved_idle = _gpu_hours()
    used_above_guarantee = _gpu_hours()
    pool_idle = _gpu_hours()
    pool_idle_shared = _gpu_hours("The part of the pool idle shared out in proportion to use.")
    capacity_cost = _money()
    used_cost = _money()
    used_within_guarantee_cost = _money()
    reserved_idle_cost = _money()
    used_above_guarantee_cost = _money()
    pool_idle_cost = _money()
    pool_idle_shared_cost = _money()
    used_active = _gpu_hours("Of used, the GPU-hours in which the GPUs worked.")
    used_idle = _gpu_hours("Of used, the GPU-hours allocated but idle.")
    used_within_guarantee_active = _gpu_hours()
    used_within_guarantee_idle = _gpu_hours()
    used_above_guarantee_active = _gpu_hours()
    used_above_guarantee_idle = _gpu_hours()
    used_active_cost = _money()
    used_idle_cost = _money()
    used_within_guarantee_active_cost = _money()
    used_within_guarantee_idle_cost = _money()
    used_above_guarantee_active_cost = _money()
    used_above_guarantee_idle_cost = _money()

    class Meta:
        abstract = True


class FlavorHour(FlavorLinesBase):
    """One flavor's accounting hour: healthy capacity, price and guarantees then in force, and
    the four lines."""

    hour = models.DateTimeField()
    day = models.DateField()
    hourly_price = models.DecimalField(
        max_digits=10, decimal_places=4, help_text="The price in force (time-weighted)."
    )
    guaranteed = _gpu_hours("Top-level guarantees before scaling to the capacity.")
    guarantee_scale = models.DecimalField(
        max_digits=9,
        decimal_places=6,
        default=Decimal(1),
        help_text="1, or capacity / guaranteed when the guarantees exceed the capacity.",
    )

    class Meta:
        ordering = ["hour", "flavor"]
        constraints = [
            models.UniqueConstraint(fields=["hour", "flavor"], name="flavorhour_once"),
        ]
        indexes = [models.Index(fields=["day"], name="flavorhour_day_idx")]

    def __str__(self) -> str:
        return f"{self.hour:%Y-%m-%d %H:%M} {self.flavor_id}: {self.capacity} GPU-hours"


class FlavorDay(FlavorLinesBase):
    """One flavor's accounting day: healthy capacity and the four lines."""

    day = models.DateField()

    class Meta:
        ordering = ["day", "flavor"]
        constraints = [models.UniqueConstraint(fields=["day", "flavor"], name="flavorday_once")]

    def __str__(self) -> str:
        return f"{self.day} {self.flavor_id}: {self.capacity} GPU-hours"


class FlavorMonth(FlavorLinesBase):
    """One flavor's accounting month (``month`` is its first day): capacity and the lines."""

    month = models.DateField()

    class Meta:
        ordering = ["month", "flavor"]
        constraints = [models.UniqueConstraint(fields=["month", "flavor"], name="flavormonth_once")]

    def __str__(self) -> str:
        return f"{self.month:%Y-%m} {self.flavor_id}: {self.capacity} GPU-hours"


class QueueLinesBase(models.Model):
    """A queue's part of a flavor's lines in a period."""

    queue = _counted(Queue)
    tenant = _counted(Tenant, null=True)
    flavor = _counted(Flavor)
    guarantee = _gpu_hours("Guarantee in force, in GPU-hours, after scaling to the capacity.")
    used = _gpu_hours()
    used_within_guarantee = _gpu_hours()
    reserved_idle = _gpu_hours()
    used_above_guarantee = _gpu_hours()
    pool_idle_share = _gpu_hours("Its part of the pool idle, in proportion to its usage.")
    used_cost = _money()
    used_within_guarantee_cost = _money()
    reserved_idle_cost = _money()
    used_above_guarantee_cost = _money()
    pool_idle_share_cost = _money()
    used_active = _gpu_hours("Of used, the GPU-hours in which the GPUs worked.")
    used_idle = _gpu_hours("Of used, the GPU-hours allocated but idle.")
    used_within_guarantee_active = _gpu_hours()
    used_within_guarantee_idle = _gpu_hours()
    used_above_guarantee_active = _gpu_hours()
    used_above_guarantee_idle = _gpu_hours()
    used_active_cost = _money()
    used_idle_cost = _money()
    used_within_guarantee_active_cost = _money()
    used_within_guarantee_idle_cost = _money()
    used_above_guarantee_active_cost = _money()
    used_above_guarantee_idle_cost = _money()

    class Meta:
        abstract = True


class QueueHour(QueueLinesBase):
    """One queue's lines of one flavor in one accounting hour."""

    hour = models.DateTimeField()
    day = models.DateField()

    class Meta:
        ordering = ["hour", "queue", "flavor"]
        constraints = [
            models.UniqueConstraint(fields=["hour", "queue", "flavor"], name="queuehour_once"),
        ]
        indexes = [models.Index(fields=["day"], name="queuehour_day_idx")]

    def __str__(self) -> str:
        return f"{self.hour:%Y-%m-%d %H:%M} {self.queue_id}/{self.flavor_id}"


class QueueDay(QueueLinesBase):
    """One queue's lines of one flavor in one accounting day."""

    day = models.DateField()

    class Meta:
        ordering = ["day", "queue", "flavor"]
        constraints = [
            models.UniqueConstraint(fields=["day", "queue", "flavor"], name="queueday_once"),
        ]
        indexes = [
            models.Index(fields=["day"], name="queueday_day_idx"),
            models.Index(fields=["tenant", "day"], name="queueday_tenant_day_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.day} {self.queue_id}/{self.flavor_id}"


class QueueMonth(QueueLinesBase):
    """One queue's lines of one flavor in one accounting month (``month``: its first day)."""

    month = models.DateField()

    class Meta:
        ordering = ["month", "queue", "flavor"]
        constraints = [
            models.UniqueConstraint(fields=["month", "queue", "flavor"], name="queuemonth_once"),
        ]
        indexes = [
            models.Index(fields=["month"], name="queuemonth_month_idx"),
            models.Index(fields=["tenant", "month"], name="queuemonth_tenant_month_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.month:%Y-%m} {self.queue_id}/{self.flavor_id}"
