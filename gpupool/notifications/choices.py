"""Enumerations of the notifications app."""

from django.db import models


class NotificationKind(models.TextChoices):
    """What a mail is about; a user may opt out of each kind."""

    REQUEST_SUBMITTED = "request-submitted", "a quota or budget request waits for a decision"
    REQUEST_DECIDED = "request-decided", "a quota or budget request was approved or rejected"
    REQUEST_APPLIED = "request-applied", "an approved request's change was made"
    WORKLOAD_STARTED = "workload-started", "my workload started"
    WORKLOAD_PREEMPTED = "workload-preempted", "my workload was preempted"
    WORKLOAD_FAILED = "workload-failed", "my workload failed"
    WORKLOAD_IDLE = "workload-idle", "my workload, or my team's as its lead, sits idle"


class WorkloadEvent(models.TextChoices):
    """The events of a workload its submitter is told about."""

    STARTED = "started", "started"
    PREEMPTED = "preempted", "preempted"
    FAILED = "failed", "failed"


WORKLOAD_EVENT_KIND = {
    WorkloadEvent.STARTED: NotificationKind.WORKLOAD_STARTED,
    WorkloadEvent.PREEMPTED: NotificationKind.WORKLOAD_PREEMPTED,
    WorkloadEvent.FAILED: NotificationKind.WORKLOAD_FAILED,
}
