"""Enumerations of the quotas app."""

from django.db import models


class PreemptionPolicy(models.TextChoices):
    """Whether workloads of a priority class may preempt lower-priority ones."""

    PREEMPT_LOWER_PRIORITY = "PreemptLowerPriority", "PreemptLowerPriority"
    NEVER = "Never", "Never"


class LedgerEntryKind(models.TextChoices):
    """The kinds of movement on a priority budget's ledger."""

    GRANT = "grant", "grant (budget granted or changed)"
    RESERVE = "reserve", "reserve (protected window held up front)"
    SETTLE = "settle", "settle (reservation released when the window ends)"
    SPEND = "spend", "spend (GPU-hours run at the class)"


class QuotaRequestKind(models.TextChoices):
    """What a quota request asks to change."""

    QUEUE_QUOTA = "queue-quota", "queue quota"
    BUDGET = "budget", "priority budget"


class QuotaRequestState(models.TextChoices):
    """A quota request's life: draft -> submitted -> approved | rejected | withdrawn;
    approved -> applied. A draft its requester withdraws is deleted; a submitted one they
    withdraw before an admin decides is kept, withdrawn (the admins may have seen it)."""

    DRAFT = "draft", "draft"
    SUBMITTED = "submitted", "submitted"
    APPROVED = "approved", "approved"
    REJECTED = "rejected", "rejected"
    APPLIED = "applied", "applied"
    WITHDRAWN = "withdrawn", "withdrawn"


# The states of a request whose change was made (applied) or never will be (rejected,
# withdrawn): no longer open, so its impact (the API's, its approval page's) says what became
# of it, not what approving it would do.
CLOSED_STATES = (
    QuotaRequestState.APPLIED,
    QuotaRequestState.REJECTED,
    QuotaRequestState.WITHDRAWN,
)


class WhatIfState(models.TextChoices):
    """A what-if run's life: queued -> running -> succeeded | failed."""

    QUEUED = "queued", "queued"
    RUNNING = "running", "running"
    SUCCEEDED = "succeeded", "succeeded"
    FAILED = "failed", "failed"


ACTIVE_WHAT_IF_STATES = (WhatIfState.QUEUED, WhatIfState.RUNNING)
