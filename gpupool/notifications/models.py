"""A user's choice about one kind of notification mail (every kind is on until turned off)."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

from gpupool.notifications.choices import NotificationKind


class NotificationPreference(models.Model):
    """Whether a user gets mails of one kind; a kind without a row is on."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="notification_preferences"
    )
    kind = models.CharField(max_length=32, choices=NotificationKind.choices)
    enabled = models.BooleanField(default=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["user_id", "kind"]
        constraints = [
            models.UniqueConstraint(fields=["user", "kind"], name="notificationpreference_unique"),
            models.CheckConstraint(
                condition=Q(kind__in=NotificationKind.values),
                name="notificationpreference_kind_valid",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.user} {self.kind}: {'on' if self.enabled else 'off'}"
