"""API of tenancy: tenants (public names, private namespaces) and their memberships."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db.models import Prefetch
from django_filters import rest_framework as filters
from rest_framework import mixins, serializers, viewsets
from rest_framework.exceptions import PermissionDenied
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.routers import BaseRouter

from gpupool.api.fields import NamedChoiceField, NameRelatedField
from gpupool.api.filters import NameFilter
from gpupool.api.permissions import ADMINS, EVERYONE, TENANT_ROLES, ActionRoles, TenantScoped
from gpupool.api.rows import PlannedRows
from gpupool.api.strict import StrictInput
from gpupool.tenancy.actions import do_remove_membership, do_save_tenant, do_set_membership
from gpupool.tenancy.choices import MembershipRole
from gpupool.tenancy.models import Membership, Tenant, TenantNamespace, validate_tenant_name


class NamespaceNames(serializers.ListField):
    """A tenant's namespaces as a list of names (read from the prefetched rows)."""

    def to_representation(self, data: Any) -> list[str]:
        """The names, sorted (``data`` is the related manager)."""
        return sorted(namespace.name for namespace in data.all())


class TenantSerializer(StrictInput, PlannedRows, serializers.ModelSerializer[Tenant]):
    """A team: its slug, display name, organization and the namespaces it owns."""

    namespaces = NamespaceNames(
        child=serializers.CharField(max_length=63),
        required=False,
        help_text="Kubernetes namespaces the tenant owns (each belongs to one tenant).",
    )

    class Meta:
        model = Tenant
        fields = ("name", "display_name", "organization", "namespaces", "created_at")
        read_only_fields = ("created_at",)

    def get_fields(self) -> dict[str, serializers.Field[Any, Any, Any, Any]]:
        """On a change, the name rule (``validate_tenant_name``) is the model's to apply
        (``Tenant.clean_fields``): a tenant made before the rule may still be changed with
        its own name in the body, and another name is refused as a rename (400 naming
        ``name``)."""
        fields = super().get_fields()
        if isinstance(self.instance, Tenant) and "name" in fields:
            fields["name"].validators = [
                check for check in fields["name"].validators if check is not validate_tenant_name
            ]
        return fields


class TenantViewSet(
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.CreateModelMixin,
    mixins.UpdateModelMixin,
    viewsets.GenericViewSet[Tenant],
):
    """Tenants: every role sees the teams that share the pool; admins create and change them."""

    queryset = Tenant.objects.prefetch_related(
        Prefetch("namespaces", queryset=TenantNamespace.objects.order_by("name"))
    )
    serializer_class = TenantSerializer
    permission_classes = (ActionRoles,)
    default_roles = ADMINS
    action_roles = {"list": EVERYONE, "retrieve": EVERYONE}
    lookup_field = "name"
    filterset_fields = ("organization",)

    def perform_create(self, serializer: TenantSerializer) -> None:  # type: ignore[override]
        """Create through the audited action."""
        data = dict(serializer.validated_data)
        namespaces = data.pop("namespaces", [])
        serializer.instance = do_save_tenant(
            Tenant(**data), namespaces=namespaces, acting_user=self.request.user
        )

    def perform_update(self, serializer: TenantSerializer) -> None:  # type: ignore[override]
        """Change through the audited action."""
        data = dict(serializer.validated_data)
        namespaces = data.pop("namespaces", None)
        tenant = serializer.instance
        assert tenant is not None
        for field, value in data.items():
            setattr(tenant, field, value)
        serializer.instance = do_save_tenant(
            tenant, namespaces=namespaces, acting_user=self.request.user
        )


class MembershipSerializer(StrictInput, PlannedRows, serializers.ModelSerializer[Membership]):
    """A user's membership of a tenant, as member or lead."""

    user = NameRelatedField(slug_field="username", queryset=get_user_model().objects.all())
    tenant = NameRelatedField(slug_field="name", queryset=Tenant.objects.all())
    role = NamedChoiceField(choices=MembershipRole.choices)

    class Meta:
        model = Membership
        fields = ("id", "user", "tenant", "role", "created_at")
        read_only_fields = ("id", "created_at")

    def get_validators(self) -> list[Any]:
        """None of DRF's: its one-membership-per-user-and-tenant check answers "The fields
        user, tenant must make a unique set."; ``validate`` makes it on create, in words. A
        change keeps its user and tenant, so it has none to make (and answers nothing about the
        pair asked for: whether that user belongs to another tenant)."""
        return []

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        """On create, a user not yet in the tenant (a 400 naming ``user``, saying so). On a
        change, only the role: another user or tenant is another membership (remove this one
        and add that one)."""
        membership = self.instance
        if membership is None:
            user, tenant = attrs["user"], attrs["tenant"]  # both required on create
            existing = Membership.objects.filter(user=user, tenant=tenant).first()
            if existing is not None:
                raise serializers.ValidationError(
                    {
                        "user": f"{user.get_username()} is already a member of {tenant.name} "
                        f"(role {existing.role}); to change the role, PATCH "
                        f"memberships/{existing.pk}/"
                    }
                )
        else:
            fixed = {
                name: f"{name} cannot be changed once created (it is {current!r}); remove "
                "this membership and add one instead"
                for name, current in (
                    ("user", membership.user.get_username()),
                    ("tenant", membership.tenant.name),
                )
                if name in attrs and attrs[name] != getattr(membership, name)
            }
            if fixed:
                raise serializers.ValidationError(fixed)
        return attrs


class MembershipFilter(filters.FilterSet):  # type: ignore[misc]
    """Filter memberships by tenant name, username and role (a tenant or user that names
    nothing is a 400 naming it: ``NameFilter``)."""

    tenant = NameFilter(field_name="tenant__name", names=Tenant)
    user = NameFilter(
        field_name="user__username", names=settings.AUTH_USER_MODEL, name_field="username"
    )

    class Meta:
        model = Membership
        fields = ("tenant", "user", "role")


class MembershipViewSet(TenantScoped, viewsets.ModelViewSet[Membership]):
    """Memberships of the caller's tenants; a tenant's lead (or an admin) manages them."""

    queryset = Membership.objects.select_related("user", "tenant")
    serializer_class = MembershipSerializer
    filterset_class = MembershipFilter
    permission_classes = (ActionRoles,)
    default_roles = TENANT_ROLES
    tenant_field = "tenant"
    http_method_names = ("get", "post", "patch", "delete", "head", "options")

    def _require_lead(self, tenant: Tenant) -> None:
        if not self.access().leads(tenant.pk):
            raise PermissionDenied(f"Only a lead of {tenant} (or an admin) manages its members.")

    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """Permission first, then validation: a caller who does not lead the tenant named is
        refused (403) before the request is checked, so the answer says nothing about that
        tenant's members (not whether the user already belongs). A body naming no tenant, or
        one that does not exist, is the validation's to report (tenants are public)."""
        named = request.data.get("tenant") if isinstance(request.data, Mapping) else None
        if isinstance(named, str) and "\x00" not in named:
            tenant = Tenant.objects.filter(name=named).first()
            if tenant is not None:
                self._require_lead(tenant)
        return super().create(request, *args, **kwargs)

    def update(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """Permission first, then validation (as ``create``): only the tenant's lead (or an
        admin) learns what a change would be refused for."""
        self._require_lead(self.get_object().tenant)
        return super().update(request, *args, **kwargs)

    def perform_create(self, serializer: MembershipSerializer) -> None:  # type: ignore[override]
        """Add a member through the audited action (leads of the tenant and admins)."""
        data = serializer.validated_data
        self._require_lead(data["tenant"])
        serializer.instance = do_set_membership(
            data["user"], data["tenant"], role=data["role"], acting_user=self.request.user
        )

    def perform_update(self, serializer: MembershipSerializer) -> None:  # type: ignore[override]
        """Change a member's role (the user and tenant stay: ``MembershipSerializer.validate``)."""
        membership = serializer.instance
        assert membership is not None
        role = serializer.validated_data.get("role", membership.role)
        serializer.instance = do_set_membership(
            membership.user, membership.tenant, role=role, acting_user=self.request.user
        )

    def perform_destroy(self, instance: Membership) -> None:
        """Remove a member through the audited action."""
        self._require_lead(instance.tenant)
        do_remove_membership(instance, acting_user=self.request.user)


def register(router: BaseRouter) -> None:
    """Add this app's resources to the API router."""
    router.register("tenants", TenantViewSet, basename="tenant")
    router.register("memberships", MembershipViewSet, basename="membership")
