"""Enumerations of the tenancy app."""

from django.db import models


class MembershipRole(models.TextChoices):
    """A user's role inside one tenant."""

    MEMBER = "member", "member"
    LEAD = "lead", "lead"


class SiteRoleName(models.TextChoices):
    """Roles that apply across all tenants."""

    ADMIN = "admin", "admin"
    FINANCE = "finance", "finance"
