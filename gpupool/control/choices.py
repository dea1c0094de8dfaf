"""Enumerations of the control app."""

from django.db import models


class CycleStatus(models.TextChoices):
    """How a scheduling cycle ended (or that it is still running)."""

    RUNNING = "running", "running"
    SUCCEEDED = "succeeded", "succeeded"
    FAILED = "failed", "failed"
    SKIPPED = "skipped", "skipped (another cycle held the lock)"
