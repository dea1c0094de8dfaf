"""API of notification preferences: every user reads and changes their own, kind by kind."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import serializers, viewsets
from rest_framework.exceptions import NotFound
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.routers import BaseRouter

from gpupool.api.permissions import EVERYONE, ActionRoles
from gpupool.api.strict import StrictInput
from gpupool.notifications.actions import do_set_notification_preference
from gpupool.notifications.choices import NotificationKind
from gpupool.notifications.models import NotificationPreference


class NotificationPreferenceSerializer(StrictInput, serializers.Serializer[Any]):
    """Whether the caller gets mails of one kind (every kind is on until turned off)."""

    kind = serializers.ChoiceField(choices=NotificationKind.choices, read_only=True)
    description = serializers.CharField(read_only=True)
    enabled = serializers.BooleanField()


def preferences_of(user: Any) -> list[dict[str, Any]]:
    """Every kind with the user's choice (on where they made none), in the kinds' order."""
    off = set(
        NotificationPreference.objects.filter(user=user, enabled=False).values_list(
            "kind", flat=True
        )
    )
    return [
        {"kind": kind.value, "description": kind.label, "enabled": kind.value not in off}
        for kind in NotificationKind
    ]


class NotificationPreferenceViewSet(viewsets.GenericViewSet[NotificationPreference]):
    """The caller's own notification preferences, one per kind of mail: read them all, turn
    one on or off. Nobody reads or changes another user's."""

    queryset = NotificationPreference.objects.none()
    serializer_class = NotificationPreferenceSerializer
    permission_classes = (ActionRoles,)
    default_roles = EVERYONE
    lookup_field = "kind"
    lookup_value_regex = r"[a-z\-]+"
    pagination_class = None  # one row per kind: a short, fixed list
    filter_backends = ()

    def _one(self, kind: str) -> dict[str, Any]:
        found = next((p for p in preferences_of(self.request.user) if p["kind"] == kind), None)
        if found is None:
            raise NotFound(f"no kind of notification {kind!r}")
        return found

    def list(self, request: Request) -> Response:
        """Every kind of mail and whether the caller gets it."""
        return Response(self.get_serializer(preferences_of(request.user), many=True).data)

    def retrieve(self, request: Request, kind: str) -> Response:
        """Whether the caller gets mails of ``kind``."""
        return Response(self.get_serializer(self._one(kind)).data)

    @extend_schema(request=NotificationPreferenceSerializer)
    def partial_update(self, request: Request, kind: str) -> Response:
        """Turn mails of ``kind`` on or off for the caller (``{"enabled": false}``)."""
        self._one(kind)
        form = self.get_serializer(data=request.data)
        form.is_valid(raise_exception=True)
        do_set_notification_preference(
            request.user, kind, enabled=form.validated_data["enabled"], acting_user=request.user
        )
        return Response(self.get_serializer(self._one(kind)).data)


def register(router: BaseRouter) -> None:
    """Add the caller's notification preferences to the API router."""
    router.register(
        "notification-preferences",
        NotificationPreferenceViewSet,
        basename="notification-preference",
    )
