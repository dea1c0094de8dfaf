"""State changes of tenancy: memberships and site roles. Each is atomic and audited."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from gpupool.audit.actions import model_snapshot, record_audit_change, record_audit_event
from gpupool.tenancy.models import Membership, SiteRole, Tenant


@transaction.atomic
def do_set_membership(
    user: Any, tenant: Tenant, *, role: str, acting_user: Any, reason: str = ""
) -> Membership:
    """Add ``user`` to ``tenant`` with ``role``, or change the role of an existing membership."""
    membership = Membership.objects.select_for_update().filter(user=user, tenant=tenant).first()
    before = model_snapshot(membership, exclude=["created_at"]) if membership else None
    if membership is None:
        membership = Membership(user=user, tenant=tenant)
    membership.role = role
    membership.full_clean()
    membership.save()
    after = model_snapshot(membership, exclude=["created_at"])
    record_audit_change(
        acting_user=acting_user,
        action="tenancy.set_membership",
        instance=membership,
        before=before,
        after=after,
        reason=reason,
    )
    return membership


@transaction.atomic
def do_remove_membership(membership: Membership, *, acting_user: Any, reason: str = "") -> None:
    """Remove a user from a tenant."""
    before = model_snapshot(membership, exclude=["created_at"])
    record_audit_event(
        acting_user=acting_user,
        action="tenancy.remove_membership",
        instance=membership,
        before=before,
        after=None,
        reason=reason,
    )
    membership.delete()


@transaction.atomic
def do_grant_site_role(user: Any, *, role: str, acting_user: Any, reason: str = "") -> SiteRole:
    """Give ``user`` a site-wide role (admin or finance); granting it twice changes nothing."""
    existing = SiteRole.objects.filter(user=user, role=role).first()
    if existing is not None:
        return existing
    site_role = SiteRole(user=user, role=role)
    site_role.full_clean()
    site_role.save()
    record_audit_event(
        acting_user=acting_user,
        action="tenancy.grant_site_role",
        instance=site_role,
        before=None,
        after=model_snapshot(site_role, exclude=["created_at"]),
        reason=reason,
    )
    return site_role


@transaction.atomic
def do_revoke_site_role(site_role: SiteRole, *, acting_user: Any, reason: str = "") -> None:
    """Take a site-wide role away from its user."""
    record_audit_event(
        acting_user=acting_user,
        action="tenancy.revoke_site_role",
        instance=site_role,
        before=model_snapshot(site_role, exclude=["created_at"]),
        after=None,
        reason=reason,
    )
    site_role.delete()
