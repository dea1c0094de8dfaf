"""Enumerations of the accounting app."""

from django.db import models


class PreemptionReason(models.TextChoices):
    """Why a running workload was stopped before it finished."""

    PREEMPT = "preempt", "preempt (a higher-priority workload needed the GPUs)"
    RECLAIM = "reclaim", "reclaim (the lending queue wanted its quota back)"
    # Only in rows of earlier releases: a budget that runs out now demotes its work to the
    # default class and never evicts it (DESIGN §2).
    BUDGET = "budget", "budget (its priority budget ran out)"
    IDLE = "idle", "idle (its GPUs sat idle past its idle timeout; it ends)"
    NODE_FAILURE = "node-failure", "node failure"
    ADMIN = "admin", "admin (drain or manual eviction)"


# Reasons where another workload caused the eviction and is recorded as the preemptor.
REASONS_WITH_PREEMPTOR = frozenset({PreemptionReason.PREEMPT, PreemptionReason.RECLAIM})
