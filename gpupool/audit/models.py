"""The audit log: one row per change to policy (quotas, budgets, classes, requests, members)."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from gpupool.audit.stamps import pool_time


class AuditEvent(models.Model):
    """One recorded change: who did what to which object, and its state before and after."""

    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="audit_events",
        help_text="The user who made the change; empty for the system (the control loop).",
    )
    actor_name = models.CharField(
        max_length=150,
        blank=True,
        help_text="The actor's username at the time, kept if the user is deleted later.",
    )
    at = models.DateTimeField(default=pool_time, db_index=True)
    action = models.CharField(max_length=80, help_text="e.g. quotas.set_queue_quota")
    object_type = models.CharField(max_length=100, help_text="app_label.model of the object")
    object_id = models.CharField(max_length=64)
    object_repr = models.CharField(max_length=200)
    before = models.JSONField(null=True, blank=True, help_text="Fields before; empty on create.")
    after = models.JSONField(null=True, blank=True, help_text="Fields after; empty on delete.")
    reason = models.TextField(blank=True)

    class Meta:
        ordering = ["-at", "-id"]
        indexes = [models.Index(fields=["object_type", "object_id"], name="audit_object_idx")]

    def __str__(self) -> str:
        who = self.actor_name or "system"
        return f"{self.at:%Y-%m-%d %H:%M:%S} {who} {self.action} {self.object_repr}"

    def changed_fields(self) -> list[str]:
        """Names of the fields whose value differs between before and after."""
        before = self.before or {}
        after = self.after or {}
        return sorted(key for key in set(before) | set(after) if before.get(key) != after.get(key))
