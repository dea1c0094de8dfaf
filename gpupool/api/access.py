"""Who the caller is to the pool: site roles and tenant memberships, read once per request.

Roles (DESIGN section 2): **admin** sees and does everything; **finance** reads cost and usage
of every tenant, and its quota and budget requests (never deciding them), and nothing else
that is private; a tenant's **lead** manages its requests,
members and workloads; a **member** sees its tenants' queues and workloads and the pool's
public state. Private objects of another tenant answer 404, not 403, so their existence is
not disclosed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpupool.tenancy.choices import MembershipRole, SiteRoleName
from gpupool.tenancy.models import Membership, SiteRole

ADMIN = "admin"
FINANCE = "finance"
LEAD = "lead"
MEMBER = "member"
ROLES = (ADMIN, FINANCE, LEAD, MEMBER)
# Who reads quota and budget requests (DESIGN section 2): a tenant's leads their tenants',
# admins and finance every tenant's (``Access.reads_every_request``); only admins decide them.
REQUEST_READERS = frozenset({ADMIN, FINANCE, LEAD})


@dataclass(frozen=True, slots=True)
class Access:
    """A user's site roles and tenants (ids), as one request sees them."""

    user_id: int | None
    admin: bool
    finance: bool
    tenant_ids: frozenset[int]
    lead_tenant_ids: frozenset[int]

    @property
    def roles(self) -> frozenset[str]:
        """Every role the user holds somewhere (``lead`` and ``member`` in any tenant)."""
        roles = set()
        if self.admin:
            roles.add(ADMIN)
        if self.finance:
            roles.add(FINANCE)
        if self.lead_tenant_ids:
            roles.add(LEAD)
        if self.tenant_ids:
            roles.add(MEMBER)
        return frozenset(roles)

    def sees_tenant(self, tenant_id: int | None) -> bool:
        """Whether the tenant's private data is visible (admins see every tenant)."""
        return self.admin or (tenant_id is not None and tenant_id in self.tenant_ids)

    @property
    def reads_every_request(self) -> bool:
        """Whether every tenant's quota and budget requests are visible (admins; finance,
        who reads them and never decides), not only those of the tenants the user leads."""
        return self.admin or self.finance

    def leads(self, tenant_id: int | None) -> bool:
        """Whether the user may act as the tenant's lead (admins may)."""
        return self.admin or (tenant_id is not None and tenant_id in self.lead_tenant_ids)


NOBODY = Access(None, False, False, frozenset(), frozenset())


def access_of(user: Any) -> Access:
    """The roles and tenants of ``user`` (two queries; nobody for anonymous users)."""
    if user is None or not getattr(user, "is_authenticated", False):
        return NOBODY
    roles = set(SiteRole.objects.filter(user=user).values_list("role", flat=True))
    tenants: set[int] = set()
    leads: set[int] = set()
    for tenant_id, role in Membership.objects.filter(user=user).values_list("tenant_id", "role"):
        tenants.add(tenant_id)
        if role == MembershipRole.LEAD:
            leads.add(tenant_id)
    return Access(
        user_id=user.pk,
        admin=bool(user.is_superuser) or SiteRoleName.ADMIN in roles,
        finance=SiteRoleName.FINANCE in roles,
        tenant_ids=frozenset(tenants),
        lead_tenant_ids=frozenset(leads),
    )


def request_access(request: Any) -> Access:
    """The caller's ``Access``, computed once per request and kept on it."""
    found = getattr(request, "_gpupool_access", None)
    if found is None:
        found = access_of(getattr(request, "user", None))
        request._gpupool_access = found
    return found
