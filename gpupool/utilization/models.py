"""What the utilisation source said about each workload, window by window."""

from __future__ import annotations

from django.db import models
from django.db.models import F, Q

from gpupool.quotas.models import Queue
from gpupool.tenancy.models import Tenant
from gpupool.workloads.models import Workload, copied_from_workload


class ActivityWindow(models.Model):
    """What one workload's GPUs did in one sampling window: GPU-seconds seen and active."""

    workload = models.ForeignKey(Workload, on_delete=models.CASCADE, related_name="activity")
    tenant = copied_from_workload(Tenant, null=True, related_name="+")
    queue = copied_from_workload(Queue, related_name="+")
    started_at = models.DateTimeField()
    ended_at = models.DateTimeField()
    gpus = models.PositiveIntegerField(help_text="GPUs the source saw the workload hold.")
    observed_gpu_seconds = models.FloatField(help_text="GPU-seconds the source saw held.")
    active_gpu_seconds = models.FloatField(
        help_text="GPU-seconds of those in which the GPU worked (utilisation at the threshold)."
    )
    mean_utilization = models.FloatField(help_text="Percent, over every GPU-second seen.")
    last_active_at = models.DateTimeField(
        null=True, blank=True, help_text="The end of the last step in which any GPU worked."
    )

    class Meta:
        ordering = ["started_at", "id"]
        indexes = [
            models.Index(fields=["tenant", "ended_at"], name="activity_tenant_end_idx"),
            models.Index(fields=["workload", "ended_at"], name="activity_workload_end_idx"),
            models.Index(fields=["ended_at"], name="activity_end_idx"),
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(ended_at__gte=F("started_at")), name="activity_ends_after_start"
            ),
            models.CheckConstraint(
                condition=Q(active_gpu_seconds__gte=0)
                & Q(active_gpu_seconds__lte=F("observed_gpu_seconds")),
                name="activity_active_within_observed",
            ),
        ]

    def __str__(self) -> str:
        return (
            f"{self.workload.name} {self.active_gpu_seconds:.0f}/{self.observed_gpu_seconds:.0f}"
            f" GPU-s active from {self.started_at}"
        )
