"""Tenants (teams), the Kubernetes namespaces they own, the users who belong to them, and
site-wide roles."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import RegexValidator
from django.db import models

from gpupool.audit.stamps import pool_time
from gpupool.tenancy.choices import MembershipRole, SiteRoleName


def fixed_field_errors(instance: models.Model, *fields: str) -> dict[str, str]:
    """``{field: why}`` for each of ``fields`` that ``instance`` would change from what is
    stored: a name the scheduling loop, URLs and pods' labels address a row by stays as it was
    created (a rename would leave them pointing at nothing). Nothing for a new row."""
    if instance.pk is None:
        return {}
    stored = type(instance)._default_manager.filter(pk=instance.pk).values(*fields).first()
    if stored is None:
        return {}
    return {
        field: f"{field} cannot be changed once created (it is {stored[field]!r}): workloads, "
        f"pods' labels and URLs refer to it by {field}; create a new one instead"
        for field in fields
        if getattr(instance, field) != stored[field]
    }


# Kubernetes' DNS label (RFC 1123), the rule of a namespace's name: 1 to 63 lowercase letters,
# digits and '-', starting and ending with a letter or digit. ``\Z``, not ``$``: a name with a
# trailing newline is no name.
DNS_LABEL_PATTERN = r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?\Z"

validate_namespace_name = RegexValidator(
    DNS_LABEL_PATTERN,
    "A Kubernetes namespace name: at most 63 lowercase letters, digits and '-', starting and "
    "ending with a letter or digit.",
)

# A tenant's name follows the namespace rule: a tenant usually owns the namespace of its own
# name (the demo's and a seeded year's teams do), and one rule keeps the two writable alike.
validate_tenant_name = RegexValidator(
    DNS_LABEL_PATTERN,
    "Enter a tenant name as a Kubernetes namespace name is written: 1 to 63 lowercase "
    "letters, digits and '-', starting and ending with a letter or digit (e.g. nlp or "
    "vision-2).",
)


class Tenant(models.Model):
    """A team that shares the pool: it owns queues, budgets and the workloads in them."""

    name = models.CharField(
        max_length=63,
        unique=True,
        validators=[validate_tenant_name],
        help_text="Lowercase letters, digits and '-', as a namespace name, e.g. nlp.",
    )
    display_name = models.CharField(max_length=200, blank=True)
    organization = models.CharField(
        max_length=100, blank=True, help_text="The organization the team belongs to."
    )
    created_at = models.DateTimeField(default=pool_time, editable=False)

    class Meta:
        ordering = ["organization", "name"]

    def __str__(self) -> str:
        return self.name

    def clean_fields(self, exclude: Any = None) -> None:
        """The fields' own rules, except the name rule for a stored tenant that keeps the name
        it has: a tenant made before the rule (``validate_tenant_name``) keeps its name (it
        cannot be renamed, ``clean``) and can still be edited; the system check
        ``tenancy.W001`` names such tenants."""
        if self.pk is not None and "name" not in (exclude or ()):
            stored = Tenant.objects.filter(pk=self.pk).values_list("name", flat=True).first()
            if stored is not None and stored == self.name:
                exclude = {*(exclude or ()), "name"}
        super().clean_fields(exclude=exclude)

    def clean(self) -> None:
        """The name stays as created (queues' tenants, namespaces and budgets name it)."""
        errors = fixed_field_errors(self, "name")
        if errors:
            raise ValidationError(errors)

    def namespace_names(self) -> list[str]:
        """The Kubernetes namespaces this tenant owns, by name."""
        return sorted(self.namespaces.values_list("name", flat=True))


class TenantNamespace(models.Model):
    """A Kubernetes namespace owned by a tenant: its pods may use only that tenant's queues."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="namespaces")
    name = models.CharField(
        max_length=63,
        unique=True,
        validators=[validate_namespace_name],
        error_messages={"unique": "This namespace already belongs to a tenant."},
        help_text="A namespace belongs to at most one tenant.",
    )
    created_at = models.DateTimeField(default=pool_time, editable=False)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return f"{self.name} ({self.tenant})"


class Membership(models.Model):
    """A user's membership of a tenant, as a member or as its lead."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships"
    )
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(
        max_length=16, choices=MembershipRole.choices, default=MembershipRole.MEMBER
    )
    created_at = models.DateTimeField(default=pool_time, editable=False)

    class Meta:
        ordering = ["tenant__name", "user__username"]
        constraints = [
            models.UniqueConstraint(
                fields=["user", "tenant"], name="membership_unique_user_tenant"
            ),
            models.CheckConstraint(
                condition=models.Q(role__in=MembershipRole.values), name="membership_role_valid"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.user} in {self.tenant} ({self.role})"


class SiteRole(models.Model):
    """A site-wide role held by a user: admin (everything) or finance (all cost data)."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="site_roles"
    )
    role = models.CharField(max_length=16, choices=SiteRoleName.choices)
    created_at = models.DateTimeField(default=pool_time, editable=False)

    class Meta:
        ordering = ["role", "user__username"]
        constraints = [
            models.UniqueConstraint(fields=["user", "role"], name="siterole_unique_user_role"),
            models.CheckConstraint(
                condition=models.Q(role__in=SiteRoleName.values), name="siterole_role_valid"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.user} ({self.role})"


def is_site_admin(user: Any) -> bool:
    """True for superusers and users holding the site ``admin`` role."""
    if user is None or not getattr(user, "is_authenticated", False):
        return False
    if user.is_superuser:
        return True
    return SiteRole.objects.filter(user=user, role=SiteRoleName.ADMIN).exists()


def is_tenant_lead(user: Any, tenant: Tenant) -> bool:
    """True when ``user`` is a lead of ``tenant``."""
    if user is None or not getattr(user, "is_authenticated", False):
        return False
    return Membership.objects.filter(user=user, tenant=tenant, role=MembershipRole.LEAD).exists()
