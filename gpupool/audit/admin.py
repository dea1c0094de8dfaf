"""Admin for the audit log: read-only, searchable."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import reverse

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


# Request attribute set when an action refused a write the admin form had accepted.
_REFUSED = "_gpupool_action_refused"


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
            setattr(request, _REFUSED, True)
            self.message_user(request, f"Not saved: {error_text(error)}", messages.ERROR)
            return None

    @staticmethod
    def action_refused(request: HttpRequest) -> bool:
        """Whether an action refused (and rolled back) a write during this request."""
        return bool(getattr(request, _REFUSED, False))

    def message_user(self, request: HttpRequest, message: Any, *args: Any, **kwargs: Any) -> None:
        """Drop Django's success and info notes once an action refused: nothing was saved."""
        level = kwargs.get("level", args[0] if args else messages.INFO)
        if self.action_refused(request) and level in (messages.SUCCESS, messages.INFO):
            return
        super().message_user(request, message, *args, **kwargs)

    def save_related(self, request: HttpRequest, form: Any, formsets: Any, change: bool) -> None:
        """Skip the inlines once an action refused: the transaction is already rolled back."""
        if not self.action_refused(request):
            super().save_related(request, form, formsets, change)

    def log_addition(self, request: HttpRequest, obj: Any, message: Any) -> Any:
        """No admin log entry for a refused add (and no query in the doomed transaction)."""
        return None if self.action_refused(request) else super().log_addition(request, obj, message)

    def log_change(self, request: HttpRequest, obj: Any, message: Any) -> Any:
        """No admin log entry for a refused change (and no query in the doomed transaction)."""
        return None if self.action_refused(request) else super().log_change(request, obj, message)

    def response_add(
        self, request: HttpRequest, obj: Any, post_url_continue: Any = None
    ) -> HttpResponse:
        """After a refused add, back to the empty add form (the error says why)."""
        if self.action_refused(request):
            return HttpResponseRedirect(request.get_full_path())
        return super().response_add(request, obj, post_url_continue)

    def response_change(self, request: HttpRequest, obj: Any) -> HttpResponse:
        """After a refused change, back to the object's page, which shows it unchanged."""
        if self.action_refused(request):
            return HttpResponseRedirect(request.get_full_path())
        return super().response_change(request, obj)

    def response_delete(self, request: HttpRequest, obj_display: str, obj_id: Any) -> HttpResponse:
        """After a refused delete, back to the object, which still exists."""
        if self.action_refused(request):
            opts = self.opts
            url = reverse(f"admin:{opts.app_label}_{opts.model_name}_change", args=[obj_id])
            return HttpResponseRedirect(url)
        return super().response_delete(request, obj_display, obj_id)

    @staticmethod
    def adopt(obj: Any, saved: Any) -> None:
        """Give the admin's object the primary key of the row the action saved."""
        if saved is not None:
            obj.pk = saved.pk

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> None:
        """Bulk delete goes through delete_model, one object at a time, so each is audited;
        one refusal rolls back the whole batch (and ends it: the transaction is doomed, and a
        further query in it would fail)."""
        with transaction.atomic():
            for obj in queryset:
                self.delete_model(request, obj)
                if self.action_refused(request):
                    break
