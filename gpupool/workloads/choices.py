"""Enumerations of the workloads app, and the allowed workload state transitions."""

from django.db import models


class WorkloadState(models.TextChoices):
    """Where a workload is in its life."""

    PENDING = "pending", "pending"
    ADMITTED = "admitted", "admitted"
    RUNNING = "running", "running"
    SUCCEEDED = "succeeded", "succeeded"
    FAILED = "failed", "failed"
    PREEMPTED = "preempted", "preempted"
    CANCELLED = "cancelled", "cancelled"


class Topology(models.TextChoices):
    """A workload's NVLink topology requirement."""

    NONE = "", "none"
    DOMAIN = "domain", "domain (all pods in one NVLink domain)"
    PREFERRED = "preferred", "preferred (one domain if possible)"


# From-state -> states a workload may move to. Creation is the move from "" to pending.
ALLOWED_TRANSITIONS: dict[str, frozenset[str]] = {
    "": frozenset({WorkloadState.PENDING}),
    WorkloadState.PENDING: frozenset({WorkloadState.ADMITTED, WorkloadState.CANCELLED}),
    WorkloadState.ADMITTED: frozenset(
        {WorkloadState.RUNNING, WorkloadState.PENDING, WorkloadState.PREEMPTED}
    ),
    WorkloadState.RUNNING: frozenset(
        {WorkloadState.SUCCEEDED, WorkloadState.FAILED, WorkloadState.PREEMPTED}
    ),
    WorkloadState.PREEMPTED: frozenset({WorkloadState.PENDING}),
    WorkloadState.SUCCEEDED: frozenset(),
    WorkloadState.FAILED: frozenset(),
    WorkloadState.CANCELLED: frozenset(),
}

# States in which a workload holds its placements (GPUs on nodes).
PLACED_STATES = frozenset({WorkloadState.ADMITTED, WorkloadState.RUNNING})
