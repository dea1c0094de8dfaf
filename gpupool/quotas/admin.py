"""Admin for the queue tree, quotas, priority classes, budgets and quota requests.

Every save and delete of these audited models runs an action from ``gpupool.quotas.actions``,
so each change is validated against the tree and the pool and lands in the audit log.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied, ValidationError
from django.db.models import QuerySet
from django.forms import BaseModelFormSet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect

from gpupool.audit.admin import ActionModelAdmin, ModelAdmin, TabularInline, error_text
from gpupool.quotas.actions import (
    do_apply_quota_request,
    do_approve_quota_request,
    do_create_quota_request,
    do_delete_priority_class,
    do_delete_queue,
    do_delete_queue_quota,
    do_grant_budget,
    do_reject_quota_request,
    do_save_priority_class,
    do_save_queue,
    do_set_queue_quota,
    do_submit_quota_request,
    queue_history_refusal,
)
from gpupool.quotas.models import (
    BudgetLedgerEntry,
    PriorityBudget,
    PriorityClass,
    Queue,
    QueueQuota,
    QuotaRequest,
)
from gpupool.quotas.queries import without_others_drafts


def _set_quota(request: HttpRequest, quota: QueueQuota) -> QueueQuota:
    return do_set_queue_quota(
        quota.queue,
        quota.flavor,
        guarantee=quota.guarantee,
        deserved=quota.deserved,
        capability=quota.capability,
        acting_user=request.user,
    )


class QueueQuotaInline(TabularInline):
    """The queue's guarantee / deserved / capability per flavor."""

    model = QueueQuota
    extra = 1
    fields = ["flavor", "guarantee", "deserved", "capability"]


class ChildQueueInline(TabularInline):
    """The queue's children, for orientation (edit them on their own page)."""

    model = Queue
    fk_name = "parent"
    extra = 0
    can_delete = False
    fields = ["name", "tenant", "weight", "reclaimable"]
    readonly_fields = ["name", "tenant", "weight", "reclaimable"]
    show_change_link = True

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(Queue)
class QueueAdmin(ActionModelAdmin):
    """Queues with their quotas inline. Quotas are added once the queue exists, so the tree
    rules can check them against its parent."""

    list_display = [
        "name",
        "parent",
        "tenant",
        "weight",
        "reclaimable",
        "lending_limit",
        "default_protected_runtime_s",
        "max_protected_runtime_s",
    ]
    list_filter = ["tenant", "reclaimable", "parent"]
    search_fields = ["name", "description"]
    list_select_related = ["parent", "tenant"]
    autocomplete_fields = ["parent", "tenant"]

    def get_inlines(self, request: HttpRequest, obj: Any = None) -> Any:
        return [QueueQuotaInline, ChildQueueInline] if obj is not None else []

    def save_model(self, request: HttpRequest, obj: Queue, form: Any, change: bool) -> None:
        self.adopt(
            obj, self.run_action(request, lambda: do_save_queue(obj, acting_user=request.user))
        )

    def get_deleted_objects(self, objs: Any, request: HttpRequest) -> Any:
        """A queue that holds or held work is kept with its history (``queue_history_refusal``):
        the confirmation page says so and how to retire it, instead of listing its workloads
        and usage as objects nobody may delete."""
        deletable, counts, perms_needed, protected = super().get_deleted_objects(objs, request)
        kept = [line for line in map(queue_history_refusal, objs) if line]
        if kept:
            return deletable, counts, set(), kept
        return deletable, counts, perms_needed, protected

    def delete_model(self, request: HttpRequest, obj: Queue) -> None:
        self.run_action(request, lambda: do_delete_queue(obj, acting_user=request.user))

    def save_formset(
        self, request: HttpRequest, form: Any, formset: BaseModelFormSet[Any, Any], change: bool
    ) -> None:
        if formset.model is not QueueQuota:
            super().save_formset(request, form, formset, change)
            return
        changed = formset.save(commit=False)
        for quota in formset.deleted_objects:
            self.run_action(
                request, partial(do_delete_queue_quota, quota, acting_user=request.user)
            )
        for quota in changed:
            self.run_action(request, partial(_set_quota, request, quota))


@admin.register(QueueQuota)
class QueueQuotaAdmin(ActionModelAdmin):
    """All quotas in one list, filterable by flavor and queue."""

    list_display = ["queue", "flavor", "guarantee", "deserved", "capability"]
    list_filter = ["flavor", "queue__tenant"]
    search_fields = ["queue__name", "flavor__name"]
    list_select_related = ["queue", "flavor"]
    autocomplete_fields = ["queue"]

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        return ["queue", "flavor"] if obj is not None else []

    def save_model(self, request: HttpRequest, obj: QueueQuota, form: Any, change: bool) -> None:
        self.adopt(obj, self.run_action(request, lambda: _set_quota(request, obj)))

    def delete_model(self, request: HttpRequest, obj: QueueQuota) -> None:
        self.run_action(request, lambda: do_delete_queue_quota(obj, acting_user=request.user))


class PriorityClassForm(forms.ModelForm):  # type: ignore[type-arg]
    """A priority class's form: ticking ``default`` on another class moves the default to it
    (``do_save_priority_class`` takes it from the class that had it), so the form does not
    refuse it as a second default; the action checks every rule when it saves."""

    # (ModelForm's hook for the fields its model validation leaves out; not in the stubs)
    def _get_validation_exclusions(self) -> set[str]:
        return {*super()._get_validation_exclusions(), "default"}  # type: ignore[misc]


@admin.register(PriorityClass)
class PriorityClassAdmin(ActionModelAdmin):
    """Priority classes: value, preemption policy, budget rate, the default."""

    form = PriorityClassForm

    list_display = [
        "name",
        "value",
        "preemption_policy",
        "budget_rate",
        "default",
        "idle_alert_after_s",
        "idle_reclaim_after_s",
    ]
    list_filter = ["preemption_policy", "default"]
    search_fields = ["name"]

    def save_model(self, request: HttpRequest, obj: PriorityClass, form: Any, change: bool) -> None:
        self.adopt(
            obj,
            self.run_action(request, lambda: do_save_priority_class(obj, acting_user=request.user)),
        )

    def delete_model(self, request: HttpRequest, obj: PriorityClass) -> None:
        self.run_action(request, lambda: do_delete_priority_class(obj, acting_user=request.user))


class LedgerInline(TabularInline):
    """The budget's ledger: grants, reservations, settlements, spending."""

    model = BudgetLedgerEntry
    extra = 0
    can_delete = False
    fields = ["at", "kind", "gpu_hours", "workload", "note"]
    readonly_fields = ["at", "kind", "gpu_hours", "workload", "note"]

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(PriorityBudget)
class PriorityBudgetAdmin(ActionModelAdmin):
    """Budgets per tenant, class and period; a change of the granted hours is a ledger grant."""

    list_display = [
        "tenant",
        "priority_class",
        "period_start",
        "period_end",
        "gpu_hours",
        "remaining",
    ]
    list_filter = ["priority_class", "tenant"]
    search_fields = ["tenant__name"]
    list_select_related = ["tenant", "priority_class"]
    inlines = [LedgerInline]

    @admin.display(description="remaining GPU-hours")
    def remaining(self, obj: PriorityBudget) -> str:
        return f"{obj.balance_gpu_hours:f}"  # kept on the row: no query per budget listed

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        return ["tenant", "priority_class", "period_start"] if obj is not None else []

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # the ledger is history; set the grant to 0 instead

    def save_model(
        self, request: HttpRequest, obj: PriorityBudget, form: Any, change: bool
    ) -> None:
        saved = self.run_action(
            request,
            lambda: do_grant_budget(
                obj.tenant,
                obj.priority_class,
                period_start=obj.period_start,
                period_end=obj.period_end,
                gpu_hours=obj.gpu_hours,
                acting_user=request.user,
                reason="set in the admin",
            ),
        )
        self.adopt(obj, saved)


@admin.register(BudgetLedgerEntry)
class BudgetLedgerEntryAdmin(ModelAdmin):
    """The ledgers of all budgets (read-only: actions write them)."""

    list_display = ["at", "budget", "kind", "gpu_hours", "workload"]
    list_filter = ["kind", "budget__tenant"]
    date_hierarchy = "at"
    readonly_fields = ["budget", "kind", "gpu_hours", "at", "workload", "note"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


DECISIONS = ("_submit_request", "_approve", "_reject", "_apply")


@admin.register(QuotaRequest)
class QuotaRequestAdmin(ActionModelAdmin):
    """Quota and budget requests. A request is created as a draft by its requester; the
    buttons on its page submit, approve, reject or apply it through the actions."""

    list_display = ["id", "kind", "tenant", "target", "state", "requested_by", "decided_by"]
    list_filter = ["state", "kind", "tenant"]
    search_fields = ["justification", "requested_by__username", "tenant__name"]
    list_select_related = ["tenant", "queue", "flavor", "priority_class", "requested_by"]
    autocomplete_fields = ["queue", "tenant"]

    @admin.display(description="target")
    def target(self, obj: QuotaRequest) -> str:
        if obj.queue_id:
            return f"{obj.queue}/{obj.flavor}"
        return f"{obj.priority_class} {obj.period_text()}"

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # requests are the history of decisions; reject one instead

    def get_queryset(self, request: HttpRequest) -> QuerySet[QuotaRequest]:
        """Every request but other people's drafts (a draft is its requester's until
        submitted: ``quotas.queries.without_others_drafts``, as the API and pages scope it)."""
        return without_others_drafts(super().get_queryset(request), request.user.pk)

    def get_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        editable = [
            "kind",
            "tenant",
            "queue",
            "flavor",
            "priority_class",
            "period_start",
            "period_end",
            "payload",
            "justification",
        ]
        if obj is None:
            return editable
        return [
            *editable,
            "state",
            "requested_by",
            "created_at",
            "submitted_at",
            "decided_by",
            "decided_at",
            "decision_note",
            "applied_at",
        ]

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        if obj is None:
            return []
        fields = [f for f in self.get_fields(request, obj) if f != "decision_note"]
        return fields if obj.state == "submitted" else [*fields, "decision_note"]

    def get_form(
        self, request: HttpRequest, obj: Any = None, change: bool = False, **kwargs: Any
    ) -> Any:
        form = super().get_form(request, obj, change=change, **kwargs)
        if obj is None:
            # The model's clean() needs the requester; the action sets it from the session.
            class CreateForm(form):  # type: ignore[misc,valid-type]
                def _post_clean(self) -> None:
                    self.instance.requested_by = request.user
                    super()._post_clean()

            return CreateForm
        return form

    def save_model(
        self,
        request: HttpRequest,
        obj: QuotaRequest,
        form: forms.ModelForm[QuotaRequest],
        change: bool,
    ) -> None:
        if change:
            return  # decisions happen in response_change, through the actions
        saved = self.run_action(
            request,
            lambda: do_create_quota_request(
                kind=obj.kind,
                tenant=obj.tenant,
                requested_by=request.user,
                justification=obj.justification,
                payload=obj.payload,
                queue=obj.queue,
                flavor=obj.flavor,
                priority_class=obj.priority_class,
                period_start=obj.period_start,
                period_end=obj.period_end,
            ),
        )
        self.adopt(obj, saved)

    def response_change(self, request: HttpRequest, obj: QuotaRequest) -> HttpResponse:
        decision = next((name for name in DECISIONS if name in request.POST), None)
        if decision is None:
            return super().response_change(request, obj)
        note = request.POST.get("decision_note", "")
        try:
            if decision == "_submit_request":
                do_submit_quota_request(obj, acting_user=request.user)
            elif decision == "_approve":
                do_approve_quota_request(obj, acting_user=request.user, note=note)
            elif decision == "_reject":
                do_reject_quota_request(obj, acting_user=request.user, note=note)
            else:
                do_apply_quota_request(obj, acting_user=request.user)
        except (ValidationError, PermissionDenied) as error:
            self.message_user(request, f"Refused: {error_text(error)}", messages.ERROR)
        else:
            obj.refresh_from_db()
            self.message_user(request, f"Request #{obj.pk} is now {obj.state}.", messages.SUCCESS)
        return HttpResponseRedirect(request.path)
