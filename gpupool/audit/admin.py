"""Admin for the audit log: read-only, searchable."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.db.models import QuerySet
from django.http import HttpRequest

from gpupool.audit.models import AuditEvent

# django-stubs makes the admin classes generic; at run time they are not subscriptable.
if TYPE_CHECKING:
    ModelAdmin = admin.ModelAdmin[Any]
    TabularInline = admin.TabularInline[Any, Any]
else:
    ModelAdmin = admin.ModelAdmin
    TabularInline = admin.TabularInline


@admin.register(AuditEvent)
class AuditEventAdmin(ModelAdmin):
    """The audit log cannot be edited or deleted from the admin."""

    list_display = ["at", "actor_name", "action", "object_type", "object_repr"]
    list_filter = ["action", "object_type"]
    search_fields = ["object_repr", "actor_name", "action", "object_id", "reason"]
    date_hierarchy = "at"
    readonly_fields = [f.name for f in AuditEvent._meta.fields]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


def error_text(error: Exception) -> str:
    """One line from a ValidationError (field: message) or PermissionDenied."""
    if isinstance(error, ValidationError) and hasattr(error, "error_dict"):
        return "; ".join(
            f"{field}: {' '.join(messages)}" for field, messages in error.message_dict.items()
        )
    if isinstance(error, ValidationError):
        return " ".join(error.messages)
    return str(error)


class ActionModelAdmin(ModelAdmin):
    """Base for admins of audited models: writes go through ``<app>/actions.py``.

    The form has already validated the object with the model's own rules; an action that still
    refuses (a rule over other rows that changed meanwhile) rolls the whole admin request back
    and shows why, so the database and the audit log stay consistent.
    """

    def run_action(self, request: HttpRequest, call: Callable[[], Any]) -> Any:
        """Run ``call`` and return its result; on refusal roll back, tell the user, return None."""
        try:
            return call()
        except (ValidationError, PermissionDenied) as error:
            transaction.set_rollback(True)
            self.message_user(request, f"Not saved: {error_text(error)}", messages.ERROR)
            return None

    @staticmethod
    def adopt(obj: Any, saved: Any) -> None:
        """Give the admin's object the primary key of the row the action saved."""
        if saved is not None:
            obj.pk = saved.pk

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> None:
        """Bulk delete goes through delete_model, one object at a time, so each is audited."""
        for obj in queryset:
            self.delete_model(request, obj)
