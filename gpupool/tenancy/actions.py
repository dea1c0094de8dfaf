"""State changes of tenancy: tenants and their namespaces, memberships and site roles. Each is
atomic and audited."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from functools import partial
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction

from gpupool.audit.actions import (
    audited_change,
    delete_audited,
    model_snapshot,
    record_audit_event,
    save_audited,
)
from gpupool.tenancy.choices import MembershipRole
from gpupool.tenancy.models import Membership, SiteRole, Tenant, TenantNamespace
from gpupool.workloads.choices import unfinished
from gpupool.workloads.models import Workload

# created_at says when a row was made, not what it holds: left out of before/after.
_fields_without_created_at = partial(model_snapshot, exclude=["created_at"])


def _tenant_snapshot(tenant: Tenant) -> dict[str, Any]:
    """A tenant's fields and the names of the namespaces it owns, for the audit log."""
    return _fields_without_created_at(tenant) | {"namespaces": tenant.namespace_names()}


def _namespace_errors(tenant: Tenant, names: list[str]) -> list[str]:
    """Why ``tenant`` cannot own exactly ``names``: repeats, bad names, another owner."""
    problems = []
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        problems.append(f"listed twice: {', '.join(repeated)}")
    for name in sorted(set(names)):
        try:
            TenantNamespace(tenant=tenant, name=name).clean_fields(exclude=["tenant"])
        except ValidationError as error:
            problems.append(f"{name!r}: {' '.join(error.message_dict.get('name', []))}")
    owned = TenantNamespace.objects.select_related("tenant").filter(name__in=names)
    if tenant.pk is not None:
        owned = owned.exclude(tenant=tenant)
    problems.extend(f"{taken.name!r} belongs to tenant {taken.tenant}" for taken in owned)
    if tenant.pk is not None:
        problems.extend(_busy_namespace_errors(tenant, set(names)))
    return problems


def _busy_namespace_errors(tenant: Tenant, keeping: set[str]) -> list[str]:
    """Why ``tenant`` cannot give up the namespaces it owns outside ``keeping``: unfinished
    workloads live there (their pods would belong to no tenant, and the loop would refuse
    them)."""
    dropped = set(tenant.namespace_names()) - keeping
    if not dropped:
        return []
    busy: dict[str, int] = {}
    for namespace in (
        Workload.objects.filter(unfinished(), namespace__in=sorted(dropped))
        .values_list("namespace", flat=True)
        .order_by("namespace")
    ):
        busy[namespace] = busy.get(namespace, 0) + 1
    return [
        f"{namespace!r} still holds {count} unfinished workload{'s' * (count != 1)} of "
        f"{tenant}; they must finish or be cancelled before it is given up"
        for namespace, count in busy.items()
    ]


@transaction.atomic
def do_save_tenant(
    tenant: Tenant,
    *,
    namespaces: Iterable[str] | None = None,
    acting_user: Any,
    reason: str = "",
) -> Tenant:
    """Create or update a tenant; with ``namespaces``, it owns exactly those Kubernetes
    namespaces afterwards (each namespace belongs to at most one tenant)."""
    wanted = None if namespaces is None else list(namespaces)
    with audited_change(
        tenant,
        action="tenancy.save_tenant",
        acting_user=acting_user,
        reason=reason,
        snapshot=_tenant_snapshot,
    ):
        tenant.full_clean()
        if wanted is not None:
            problems = _namespace_errors(tenant, wanted)
            if problems:
                raise ValidationError({"namespaces": "; ".join(problems)})
        tenant.save()
        if wanted is not None:
            tenant.namespaces.exclude(name__in=wanted).delete()
            have = set(tenant.namespace_names())
            TenantNamespace.objects.bulk_create(
                TenantNamespace(tenant=tenant, name=name) for name in sorted(set(wanted) - have)
            )
    return tenant


def tenant_in_use_refusal(tenant: Tenant) -> ValidationError | None:
    """Why ``tenant`` cannot be deleted, keyed ``tenant``, or None: it still has queues,
    budgets, quota requests or usage (history its delete would lose)."""
    related_rows: list[tuple[str, Any]] = [
        ("queues", tenant.queues),
        ("budgets", tenant.budgets),
        ("quota requests", tenant.quota_requests),
        ("usage", tenant.usage),
    ]
    in_use = [what for what, related in related_rows if related.exists()]
    if in_use:
        return ValidationError({"tenant": f"{tenant} still has {', '.join(in_use)}"})
    return None


def remove_tenant_memberships(tenant: Tenant, *, acting_user: Any) -> None:
    """Take every membership of ``tenant`` away through the audited action, as the tenant is
    deleted (``tenancy.remove_membership``, reason ``tenant <name> deleted``; the last-lead
    rule does not hold a team that goes)."""
    for membership in list(tenant.memberships.select_related("user")):
        do_remove_membership(
            membership,
            acting_user=acting_user,
            reason=f"tenant {tenant} deleted",
            tenant_deleted=True,
        )


# The tenants ``do_delete_tenant`` is deleting now, by id: it audits their delete itself (with
# its acting user and reason), so the delete receiver (``audit_tenant_delete``) does not.
_deleted_by_the_action: ContextVar[frozenset[int]] = ContextVar(
    "gpupool_tenants_deleted_by_the_action", default=frozenset()
)


@contextmanager
def _deleting(tenant: Tenant) -> Iterator[None]:
    """Mark ``tenant`` as being deleted by ``do_delete_tenant`` while the block runs."""
    token = _deleted_by_the_action.set(_deleted_by_the_action.get() | {tenant.pk})
    try:
        yield
    finally:
        _deleted_by_the_action.reset(token)


def audit_tenant_delete(tenant: Tenant) -> None:
    """Audit a delete of ``tenant`` made outside ``do_delete_tenant`` (``tenant.delete()`` in
    a shell, a queryset's delete) with the row the action writes (``tenancy.delete_tenant``,
    its last state and namespaces as ``before``), by the system; nothing for the action's own
    delete, which wrote that row already."""
    if tenant.pk in _deleted_by_the_action.get():
        return
    record_audit_event(
        acting_user=None,
        action="tenancy.delete_tenant",
        instance=tenant,
        before=_tenant_snapshot(tenant),
        after=None,
    )


@transaction.atomic
def do_delete_tenant(tenant: Tenant, *, acting_user: Any, reason: str = "") -> None:
    """Delete a tenant with no queues, budgets, requests or usage (``tenant_in_use_refusal``):
    its memberships are removed (each audited) and its namespaces freed with it."""
    refusal = tenant_in_use_refusal(tenant)
    if refusal is not None:
        raise refusal
    remove_tenant_memberships(tenant, acting_user=acting_user)
    with _deleting(tenant):
        delete_audited(
            tenant,
            action="tenancy.delete_tenant",
            acting_user=acting_user,
            reason=reason,
            snapshot=_tenant_snapshot,
        )


def _require_another_lead(membership: Membership, *, leaving: str) -> None:
    """Refuse to take away the last lead of a tenant that has other members: its leads file
    its requests and manage its members, so without one the team is locked out (an admin
    would have to step in). The same rule for everyone, admins included, on every path (API,
    pages, admin site): to hand the team over, make another member a lead first. A tenant's
    only member may leave it (no one is locked out), and deleting the tenant removes all.
    The tenant row is locked, so two leads stepping down at once cannot both go."""
    if membership.pk is None:
        return
    stored = Membership.objects.filter(pk=membership.pk).values_list("role", flat=True).first()
    if stored != MembershipRole.LEAD:
        return
    tenant = Tenant.objects.select_for_update().get(pk=membership.tenant_id)
    others = tenant.memberships.exclude(pk=membership.pk)
    if not others.exists() or others.filter(role=MembershipRole.LEAD).exists():
        return
    raise ValidationError(
        {
            "role": f"{membership.user} is the only lead of {tenant}, and cannot be "
            f"{leaving} while it has other members: a tenant's lead files its requests and "
            f"manages its members, so without one the team is locked out. Make another "
            f"member a lead first."
        }
    )


@transaction.atomic
def do_set_membership(
    user: Any, tenant: Tenant, *, role: str, acting_user: Any, reason: str = ""
) -> Membership:
    """Add ``user`` to ``tenant`` with ``role``, or change the role of an existing membership
    (not the last lead's to another role: ``_require_another_lead``)."""
    membership = Membership.objects.filter(user=user, tenant=tenant).first()
    if membership is None:
        membership = Membership(user=user, tenant=tenant)
    elif role != MembershipRole.LEAD:
        _require_another_lead(membership, leaving=f"made a {role}")
    membership.role = role
    return save_audited(
        membership,
        action="tenancy.set_membership",
        acting_user=acting_user,
        reason=reason,
        snapshot=_fields_without_created_at,
    )


@transaction.atomic
def do_remove_membership(
    membership: Membership, *, acting_user: Any, reason: str = "", tenant_deleted: bool = False
) -> None:
    """Remove a user from a tenant (not its last lead while others remain,
    ``_require_another_lead``, unless the tenant itself is being deleted)."""
    if not tenant_deleted:
        _require_another_lead(membership, leaving="removed")
    delete_audited(
        membership,
        action="tenancy.remove_membership",
        acting_user=acting_user,
        reason=reason,
        snapshot=_fields_without_created_at,
    )


@transaction.atomic
def do_grant_site_role(user: Any, *, role: str, acting_user: Any, reason: str = "") -> SiteRole:
    """Give ``user`` a site-wide role (admin or finance); granting it twice changes nothing."""
    existing = SiteRole.objects.filter(user=user, role=role).first()
    if existing is not None:
        return existing
    return save_audited(
        SiteRole(user=user, role=role),
        action="tenancy.grant_site_role",
        acting_user=acting_user,
        reason=reason,
        snapshot=_fields_without_created_at,
    )


@transaction.atomic
def do_revoke_site_role(site_role: SiteRole, *, acting_user: Any, reason: str = "") -> None:
    """Take a site-wide role away from its user."""
    delete_audited(
        site_role,
        action="tenancy.revoke_site_role",
        acting_user=acting_user,
        reason=reason,
        snapshot=_fields_without_created_at,
    )


def remove_from_tenancy(users: Sequence[Any], *, acting_user: Any) -> None:
    """Take ``users``' memberships and site roles away through their audited actions, before
    the users are deleted (a cascade would drop them unrecorded, and past the last-lead rule).
    Members' memberships go before leads', so the rule judges the batch as ``admin.leads_lost``
    does; a refusal rolls back all."""
    ids = [account.pk for account in users]
    with transaction.atomic():
        memberships = list(Membership.objects.filter(user__in=ids).select_related("tenant", "user"))
        memberships.sort(
            key=lambda m: (m.role == MembershipRole.LEAD, m.tenant.name, m.user.get_username())
        )
        for membership in memberships:
            do_remove_membership(
                membership, acting_user=acting_user, reason=f"user {membership.user} deleted"
            )
        for site_role in SiteRole.objects.filter(user__in=ids).select_related("user"):
            do_revoke_site_role(
                site_role, acting_user=acting_user, reason=f"user {site_role.user} deleted"
            )
