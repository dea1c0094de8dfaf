"""Which roles may call which action of a viewset, and the one tenant-scoping mixin.

A viewset declares, per DRF action (``list``, ``retrieve``, ``create``, a custom ``@action``),
the roles that may call it (``action_roles``, with ``default_roles`` for the rest); the check
needs no object. What a caller may *see* is decided by the queryset: ``TenantScoped`` filters
rows to the caller's tenants through ``tenant_field``, so another tenant's private object
answers 404. What a caller may *change* is decided again by the action it calls (an action
raises ``PermissionDenied``), so the API never has a rule the admin or the pages lack.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from django.db.models import QuerySet
from rest_framework.permissions import BasePermission
from rest_framework.request import Request

from gpupool.api.access import ADMIN, FINANCE, LEAD, MEMBER, Access, request_access
from gpupool.api.parameters import refuse_unknown_query_parameters

EVERYONE: frozenset[str] = frozenset({ADMIN, FINANCE, LEAD, MEMBER})
TENANT_ROLES: frozenset[str] = frozenset({ADMIN, LEAD, MEMBER})
COST_ROLES: frozenset[str] = frozenset({ADMIN, FINANCE, LEAD, MEMBER})
ADMINS: frozenset[str] = frozenset({ADMIN})


def allowed_roles(view: Any) -> frozenset[str]:
    """The roles that may call the view's current action."""
    action = getattr(view, "action", None) or ""
    rules: Mapping[str, frozenset[str]] = getattr(view, "action_roles", {})
    return rules.get(action, getattr(view, "default_roles", TENANT_ROLES))


class ActionRoles(BasePermission):
    """Allows an authenticated caller holding one of the action's roles (admins always).

    Every API view has this permission, so it is also where a read's query parameters are
    checked, once the caller is allowed: one the endpoint does not take is a 400 naming it
    (``gpupool.api.parameters``)."""

    message = "Your role does not allow this."

    def has_permission(self, request: Request, view: Any) -> bool:
        """Logged in, and one of the caller's roles is among the action's; then a read's
        query parameters are all ones it takes (else a 400)."""
        if not (request.user and request.user.is_authenticated):
            return False
        access = request_access(request)
        if not (access.admin or bool(access.roles & allowed_roles(view))):
            return False
        refuse_unknown_query_parameters(request, view)
        return True


def tenant_scoped(
    queryset: QuerySet[Any],
    access: Access,
    tenant_field: str | None,
    *,
    finance_sees_all: bool = False,
) -> QuerySet[Any]:
    """The rows of ``queryset`` that ``access`` may see through ``tenant_field`` (the ORM path
    to the row's tenant; None: the pool's public state): admins all, finance all when
    ``finance_sees_all``, everyone else their tenants' rows. The API's viewsets and the
    dashboard's pages scope with this one rule."""
    if tenant_field is None or access.admin:
        return queryset
    if finance_sees_all and access.finance:
        return queryset
    return queryset.filter(**{f"{tenant_field}__in": access.tenant_ids})


class TenantScoped:
    """Viewset mixin: rows of the caller's tenants only (admins all; finance all if allowed).

    ``tenant_field`` is the ORM path from the model to its tenant (``"tenant"``,
    ``"queue__tenant"``); ``None`` marks the pool's public state, visible to every role that
    may call the action.
    """

    tenant_field: ClassVar[str | None] = None
    finance_sees_all: ClassVar[bool] = False
    request: Any  # the view's DRF request

    def access(self) -> Access:
        """The caller's roles and tenants."""
        return request_access(self.request)

    def scope(self, queryset: QuerySet[Any]) -> QuerySet[Any]:
        """``queryset`` limited to what the caller may see."""
        return tenant_scoped(
            queryset, self.access(), self.tenant_field, finance_sees_all=self.finance_sees_all
        )

    def get_queryset(self) -> QuerySet[Any]:
        """The declared queryset, scoped to the caller."""
        return self.scope(super().get_queryset())  # type: ignore[misc]
