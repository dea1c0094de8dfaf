"""A user's memberships and site roles are taken away through the tenancy actions whenever the
user is deleted, not only on the admin site: a delete from ``manage.py shell`` (``user.delete()``
or ``User.objects.filter(...).delete()``) or any other code would otherwise cascade them away
with no audit row and past the last-lead rule. So are a tenant's memberships whenever the
tenant is deleted (``tenant.delete()`` in a shell cascades them), not only by
``do_delete_tenant``.

The receiver runs before Django deletes anything (``pre_delete``, inside the delete's
transaction): each membership and site role goes through ``remove_from_tenancy``, so it is
audited as the admin's user delete audits it (``tenancy.remove_membership`` and
``tenancy.revoke_site_role``, reason ``user <name> deleted``), by the system (no acting user
is known here). A delete that would leave a tenant with members but no lead is refused with
the action's ``ValidationError`` (naming ``role``), and nothing is deleted. A queryset's
delete is judged as one batch, as the admin's "delete selected" is. On the admin site the
memberships are gone before the delete starts, so the receiver finds nothing to do.

A tenant's delete is held to ``do_delete_tenant``'s rules the same way: one that still has
queues, budgets, quota requests or usage is refused with the action's ``ValidationError``
(naming ``tenant``: a cascade would drop its budgets and requests unrecorded), and each
membership is removed through ``do_remove_membership`` (audited ``tenancy.remove_membership``,
reason ``tenant <name> deleted``), by the system. ``do_delete_tenant`` removes them first, so
there the receiver finds nothing to do. The delete itself is audited as the action audits it
(``tenancy.delete_tenant``, the tenant's last state and namespaces), by the system, once: not
again when the delete is the action's own (``audit_tenant_delete``)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.db.models import QuerySet
from django.db.models.signals import pre_delete

from gpupool.tenancy.actions import (
    audit_tenant_delete,
    remove_from_tenancy,
    remove_tenant_memberships,
    tenant_in_use_refusal,
)
from gpupool.tenancy.models import Membership, SiteRole, Tenant

DISPATCH_UID = "gpupool.tenancy.remove_deleted_user_from_tenancy"
TENANT_DISPATCH_UID = "gpupool.tenancy.remove_deleted_tenant_s_memberships"


def remove_deleted_user_from_tenancy(
    sender: Any, instance: Any, origin: Any = None, **kwargs: Any
) -> None:
    """Before ``instance`` (a user) is deleted, take its memberships and site roles away
    through the audited actions. When the delete started from a queryset of users
    (``origin``), all of them are taken together, so the last-lead rule judges the batch (the
    others' receivers then find nothing left)."""
    if not (
        Membership.objects.filter(user=instance).exists()
        or SiteRole.objects.filter(user=instance).exists()
    ):
        return
    batch = [instance]
    if isinstance(origin, QuerySet) and origin.model is sender:
        batch = list(origin)
    remove_from_tenancy(batch, acting_user=None)


def remove_deleted_tenant_s_memberships(sender: Any, instance: Tenant, **kwargs: Any) -> None:
    """Before ``instance`` (a tenant) is deleted, refuse it while it is in use
    (``tenant_in_use_refusal``), take its memberships away through the audited action and
    audit the delete (``audit_tenant_delete``: not twice when the action deletes it)."""
    refusal = tenant_in_use_refusal(instance)
    if refusal is not None:
        raise refusal
    remove_tenant_memberships(instance, acting_user=None)
    audit_tenant_delete(instance)


def connect() -> None:
    """Connect the receivers to the user model's and the tenants' deletes
    (``TenancyConfig.ready``)."""
    pre_delete.connect(
        remove_deleted_user_from_tenancy, sender=get_user_model(), dispatch_uid=DISPATCH_UID
    )
    pre_delete.connect(
        remove_deleted_tenant_s_memberships, sender=Tenant, dispatch_uid=TENANT_DISPATCH_UID
    )
