"""State changes of notifications: a user turns a kind of mail on or off (audited)."""

from __future__ import annotations

from functools import partial
from typing import Any

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction

from gpupool.audit.actions import model_snapshot, save_audited
from gpupool.notifications.choices import NotificationKind
from gpupool.notifications.models import NotificationPreference

_fields_without_updated_at = partial(model_snapshot, exclude=["updated_at"])


@transaction.atomic
def do_set_notification_preference(
    user: Any, kind: str, *, enabled: bool, acting_user: Any
) -> NotificationPreference:
    """Turn ``user``'s mails of ``kind`` on or off; a user sets only their own."""
    if acting_user is None or acting_user.pk != user.pk:
        raise PermissionDenied("a user sets only their own notification preferences")
    if kind not in NotificationKind.values:
        raise ValidationError({"kind": f"unknown kind {kind!r}; one of {NotificationKind.values}"})
    preference = NotificationPreference.objects.filter(user=user, kind=kind).first()
    if preference is None:
        preference = NotificationPreference(user=user, kind=kind)
    preference.enabled = enabled
    return save_audited(
        preference,
        action="notifications.set_preference",
        acting_user=acting_user,
        snapshot=_fields_without_updated_at,
    )
