"""API of the audit log (``/api/v1/audit-events/``, admins): every audited change, newest
first, with who made it, what it did in words (``audit.words``, as the Audit page says it), the
object, the fields before and after, and the reason; filtered as the Audit page filters, and
``?format=csv`` downloads every event the filters keep (the fields before and after as JSON
text). Nobody writes the log here: the domain's actions record it
(``audit.actions.record_audit_event``)."""

from __future__ import annotations

import json
from typing import Any

from django.db.models import QuerySet
from django_filters import rest_framework as filters
from rest_framework import mixins, serializers, viewsets
from rest_framework.routers import BaseRouter

from gpupool.api.filters import UtcDateTimeFilter
from gpupool.api.permissions import ADMINS, ActionRoles
from gpupool.api.tables import CSVExport
from gpupool.audit.models import AuditEvent
from gpupool.audit.words import action_label, object_kind

SYSTEM = "system"  # the actor of the control loop's and other automatic changes


class AuditEventSerializer(serializers.ModelSerializer[AuditEvent]):
    """One audited change."""

    actor = serializers.SerializerMethodField(
        help_text='The username of who made the change (as it was then), or "system".'
    )
    action_label = serializers.SerializerMethodField(
        help_text='What the action did, in words ("approved a quota request").'
    )
    object_kind = serializers.SerializerMethodField(
        help_text='The kind of object, in words ("quota request").'
    )
    object = serializers.CharField(source="object_repr", read_only=True)
    changed_fields = serializers.SerializerMethodField(
        help_text="The fields whose value differs between before and after."
    )

    class Meta:
        model = AuditEvent
        fields: tuple[str, ...] = (
            "id",
            "at",
            "actor",
            "action",
            "action_label",
            "object_type",
            "object_kind",
            "object_id",
            "object",
            "changed_fields",
            "before",
            "after",
            "reason",
        )
        read_only_fields: tuple[str, ...] = fields

    def get_actor(self, event: AuditEvent) -> str:
        return event.actor_name or SYSTEM

    def get_action_label(self, event: AuditEvent) -> str:
        return action_label(event.action)

    def get_object_kind(self, event: AuditEvent) -> str:
        return object_kind(event.object_type)

    def get_changed_fields(self, event: AuditEvent) -> list[str]:
        return event.changed_fields()


class AuditEventRowSerializer(AuditEventSerializer):
    """One audited change as a CSV row: the fields before and after as JSON text, the changed
    fields separated by spaces."""

    before = serializers.SerializerMethodField()
    after = serializers.SerializerMethodField()

    def get_changed_fields(self, event: AuditEvent) -> str:  # type: ignore[override]
        return " ".join(event.changed_fields())

    def get_before(self, event: AuditEvent) -> str:
        return "" if event.before is None else json.dumps(event.before, sort_keys=True)

    def get_after(self, event: AuditEvent) -> str:
        return "" if event.after is None else json.dumps(event.after, sort_keys=True)


class AuditEventFilter(filters.FilterSet):  # type: ignore[misc]
    """Filter the log by who made the changes, the action, the object and the time."""

    made_by = filters.ChoiceFilter(
        choices=(("people", "people"), (SYSTEM, SYSTEM)),
        method="filter_made_by",
        help_text="people: changes by users; system: the control loop's and other automatic ones.",
    )
    actor = filters.CharFilter(
        method="filter_actor", help_text='A username (as it was at the change), or "system".'
    )
    action = filters.CharFilter(help_text="The action's name, e.g. quotas.approve_quota_request.")
    object_type = filters.CharFilter(help_text="app_label.model, e.g. quotas.quotarequest.")
    object_id = filters.CharFilter()
    since = UtcDateTimeFilter(field_name="at", lookup_expr="gte")
    until = UtcDateTimeFilter(field_name="at", lookup_expr="lt")

    class Meta:
        model = AuditEvent
        fields: tuple[str, ...] = (
            "made_by",
            "actor",
            "action",
            "object_type",
            "object_id",
            "since",
            "until",
        )

    def filter_made_by(
        self, rows: QuerySet[AuditEvent], name: str, value: str
    ) -> QuerySet[AuditEvent]:
        return rows.filter(actor_name="") if value == SYSTEM else rows.exclude(actor_name="")

    def filter_actor(
        self, rows: QuerySet[AuditEvent], name: str, value: str
    ) -> QuerySet[AuditEvent]:
        value = value.strip()
        return rows.filter(actor_name="" if value.lower() == SYSTEM else value)


class AuditEventViewSet(
    CSVExport,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    viewsets.GenericViewSet[AuditEvent],
):
    """The audit log, newest first (admins)."""

    queryset = AuditEvent.objects.order_by("-at", "-id")
    serializer_class = AuditEventSerializer
    filterset_class = AuditEventFilter
    ordering_fields = ("at",)
    permission_classes = (ActionRoles,)
    default_roles = ADMINS
    csv_name = "audit-events"

    def get_serializer_class(self) -> Any:
        """CSV rows carry the fields before and after as JSON text."""
        return AuditEventRowSerializer if self.wants_csv() else AuditEventSerializer


def register(router: BaseRouter) -> None:
    """Add this module's resources to the API router."""
    router.register("audit-events", AuditEventViewSet, basename="audit-event")
