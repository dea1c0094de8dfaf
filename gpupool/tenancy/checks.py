"""System check of tenants' names (``manage.py migrate``, and ``manage.py check --database
default``): a tenant whose name breaks the rule it is now made by (``validate_tenant_name``)
is named, never renamed. Such a tenant was made before the rule; its name is fixed once made
(queues, namespaces, budgets and the audit log name it), so it stays as it is and can still be
edited; an admin who wants a conforming name creates a new tenant and moves the work."""

from __future__ import annotations

from typing import Any

from django.core import checks
from django.core.checks import CheckMessage
from django.core.exceptions import ValidationError
from django.db import DatabaseError

from gpupool.tenancy.models import Tenant, validate_tenant_name

# How many of the names a warning lists before it says how many more.
SHOWN = 10


def nonconforming_tenant_names(using: str = "default") -> list[str]:
    """The names of the stored tenants that break ``validate_tenant_name``, sorted."""
    names = []
    for name in Tenant.objects.using(using).order_by("name").values_list("name", flat=True):
        try:
            validate_tenant_name(name)
        except ValidationError:
            names.append(name)
    return names


def check_tenant_names(databases: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """A warning naming the tenants whose names break the tenant name rule, per database the
    checks are asked to look at (none: the check is not run, as Django's database checks)."""
    messages: list[CheckMessage] = []
    for alias in databases or ():
        try:
            names = nonconforming_tenant_names(alias)
        except DatabaseError:  # no tenancy table yet (before the first migrate)
            continue
        if not names:
            continue
        shown = ", ".join(names[:SHOWN]) + (
            f" and {len(names) - SHOWN} more" if len(names) > SHOWN else ""
        )
        messages.append(
            checks.Warning(
                f"{len(names)} tenant name{'s' * (len(names) != 1)} in database {alias!r} "
                f"break{'s' * (len(names) == 1)} the tenant name rule (1 to 63 lowercase "
                f"letters, digits and '-', starting and ending with a letter or digit): "
                f"{shown}.",
                hint="They were made before the rule and are kept as they are (a tenant's name "
                "is fixed once made, and nothing renames them). To use a conforming name, "
                "create a new tenant and move the queues, members and namespaces to it.",
                id="tenancy.W001",
            )
        )
    return messages
