"""Enumerations of the workloads app, and the allowed workload state transitions."""

from typing import get_args

from django.db import models
from django.db.models import Q

from gpupool.scheduler.types import PendingReason


class WorkloadState(models.TextChoices):
    """Where a workload is in its life."""

    PENDING = "pending", "pending"
    ADMITTED = "admitted", "admitted"
    RUNNING = "running", "running"
    SUCCEEDED = "succeeded", "succeeded"
    FAILED = "failed", "failed"
    PREEMPTED = "preempted", "preempted"
    CANCELLED = "cancelled", "cancelled"


class Origin(models.TextChoices):
    """Who creates a workload's pods, and so who recreates them after an eviction (DESIGN 4);
    the values are ``gpupool.clusters.grouping.Origin``'s."""

    GPUPOOL = "gpupool", "gpupool (submitted through the product)"
    CONTROLLER = "controller", "a controller (Job, JobSet, ...)"
    BARE = "bare", "a bare pod (gone once evicted)"


class Topology(models.TextChoices):
    """A workload's NVLink topology requirement."""

    NONE = "", "none"
    DOMAIN = "domain", "domain (all pods in one NVLink domain)"
    PREFERRED = "preferred", "preferred (one domain if possible)"


# From-state -> states a workload may move to. Creation is the move from "" to pending; work
# is cancelled while it waits or runs (the control loop then deletes its pods). A Job's work
# whose pod failed while the Job retries it goes back from running to pending (requeued as
# itself: no preemption, nothing was evicted), and while it waits there for the retry its Job
# may give up (its backoff limit or deadline reached): it fails from pending. (It cannot
# succeed from pending: only a pod gpupool runs completes its Job.)
ALLOWED_TRANSITIONS: dict[str, frozenset[str]] = {
    "": frozenset({WorkloadState.PENDING}),
    WorkloadState.PENDING: frozenset(
        {
            WorkloadState.ADMITTED,
            WorkloadState.CANCELLED,
            WorkloadState.FAILED,
        }
    ),
    WorkloadState.ADMITTED: frozenset(
        {
            WorkloadState.RUNNING,
            WorkloadState.PENDING,
            WorkloadState.PREEMPTED,
            WorkloadState.CANCELLED,
        }
    ),
    WorkloadState.RUNNING: frozenset(
        {
            WorkloadState.PENDING,
            WorkloadState.SUCCEEDED,
            WorkloadState.FAILED,
            WorkloadState.PREEMPTED,
            WorkloadState.CANCELLED,
        }
    ),
    WorkloadState.PREEMPTED: frozenset({WorkloadState.PENDING, WorkloadState.CANCELLED}),
    WorkloadState.SUCCEEDED: frozenset(),
    WorkloadState.FAILED: frozenset(),
    WorkloadState.CANCELLED: frozenset(),
}

# States in which a workload holds its placements (GPUs on nodes).
PLACED_STATES = frozenset({WorkloadState.ADMITTED, WorkloadState.RUNNING})

# States of work not yet over: waiting, or holding its placements.
LIVE_STATES = (WorkloadState.PENDING, *sorted(PLACED_STATES))


def unfinished() -> Q:
    """Work not over yet: live, or preempted and about to be requeued -- what the queue,
    namespace or flavor it names must keep meaning while it lasts. Preempted work that is not
    requeued (a bare pod, or work reclaimed for sitting idle) ended there: it has its
    ``finished_at``."""
    return Q(state__in=LIVE_STATES) | Q(state=WorkloadState.PREEMPTED, finished_at__isnull=True)


def is_unfinished(state: str, finished_at: object) -> bool:
    """``unfinished`` read for one workload, from its state and its ``finished_at``."""
    return state in LIVE_STATES or (state == WorkloadState.PREEMPTED and finished_at is None)


# Why a workload waits: the decision core's reasons (``scheduler.types.PendingReason``), read
# from there so that the two lists cannot drift apart.
PENDING_REASON_CHOICES: list[tuple[str, str]] = [
    (reason, reason) for reason in get_args(PendingReason)
]
