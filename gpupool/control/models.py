"""Records of the control loop's scheduling cycles."""

from __future__ import annotations

from datetime import datetime

from django.db import models
from django.db.models import F, Q

from gpupool.control.choices import CycleStatus


class SchedulingCycle(models.Model):
    """One run of sync -> snapshot -> plan -> apply -> record, with its outcome counts."""

    started_at = models.DateTimeField(db_index=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    cluster_at = models.DateTimeField(
        null=True,
        blank=True,
        db_index=True,
        help_text="The cluster's clock when the cycle read it, which stamps what it recorded "
        "(the pool's clock: a simulated cluster runs ahead of the wall clock that stamps "
        "started_at and finished_at); empty for a cycle that recorded nothing.",
    )
    status = models.CharField(
        max_length=16, choices=CycleStatus.choices, default=CycleStatus.RUNNING
    )
    nodes = models.PositiveIntegerField(default=0, help_text="Nodes in the snapshot.")
    workloads = models.PositiveIntegerField(default=0, help_text="Workloads in the snapshot.")
    admitted = models.PositiveIntegerField(default=0)
    evicted = models.PositiveIntegerField(default=0)
    pending = models.PositiveIntegerField(default=0)
    error = models.TextField(blank=True)
    sync_s = models.FloatField(default=0.0, help_text="Seconds syncing the cluster view.")
    snapshot_s = models.FloatField(default=0.0, help_text="Seconds updating the snapshot.")
    plan_s = models.FloatField(default=0.0, help_text="Seconds in the decision core's plan().")
    record_s = models.FloatField(default=0.0, help_text="Seconds writing the cycle's record.")
    apply_s = models.FloatField(default=0.0, help_text="Seconds binding, evicting, creating.")
    outcome = models.JSONField(
        default=dict,
        blank=True,
        help_text="What the cycle did beyond its counts (transitions, binds, evictions, pods "
        "created and deleted, errors) and the gauges /metrics reports from it.",
    )
    totals = models.JSONField(
        default=dict,
        blank=True,
        help_text="Counters since the first cycle, carried from cycle to cycle (phase duration "
        "histograms, preemptions by reason, bind and evict errors): /metrics reads the last row.",
    )

    class Meta:
        ordering = ["-started_at", "-id"]
        constraints = [
            models.CheckConstraint(
                condition=Q(status__in=CycleStatus.values), name="cycle_status_valid"
            ),
            models.CheckConstraint(
                condition=Q(finished_at__isnull=True) | Q(finished_at__gte=F("started_at")),
                name="cycle_finishes_after_start",
            ),
        ]

    def __str__(self) -> str:
        """The cycle by its time on the pool's clock (``pool_time``), as the pages name it,
        with its zone (the admin's page title read the wall clock's start, unlabelled)."""
        return f"cycle {self.pk} at {self.pool_time():%Y-%m-%d %H:%M:%S %Z} ({self.status})"

    def pool_time(self) -> datetime:
        """When the cycle ran on the pool's clock (``control.clock``): the cluster's clock it
        read, or, for a cycle that recorded nothing (skipped, or failed before its record),
        its start. The pages name a cycle by this time, as they name what it recorded."""
        return self.cluster_at or self.started_at

    def duration_s(self) -> float | None:
        """Seconds from start to finish, or None while running."""
        if self.finished_at is None:
            return None
        return (self.finished_at - self.started_at).total_seconds()
