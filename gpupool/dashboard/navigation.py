"""The dashboard's pages, who may open each, and where each role lands after logging in.

Roles are the API's (``gpupool.api.access``): a page lists the roles that may open it, and
admins open every page, as they may call every endpoint. ``nav_roles`` narrows what the
navigation offers (an admin decides requests on Approvals rather than filing them on
Requests), never what may be opened.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from gpupool.api.access import ADMIN, FINANCE, LEAD, MEMBER, REQUEST_READERS, ROLES, Access

EVERYONE = frozenset(ROLES)
TENANT_ROLES = frozenset({ADMIN, LEAD, MEMBER})


@dataclass(frozen=True)
class Page:
    """One page of the dashboard: its URL name, title, who may open it and what it shows."""

    key: str
    title: str
    roles: frozenset[str]
    summary: str
    nav_roles: frozenset[str] | None = None  # None: everyone who may open it
    admin_title: str | None = None  # the title an admin sees (the page shows every team's)

    def allows(self, access: Access) -> bool:
        """Whether the user may open the page (admins open every page)."""
        return access.admin or bool(access.roles & self.roles)

    def offered_to(self, access: Access) -> bool:
        """Whether the navigation shows the page to the user."""
        if not self.allows(access):
            return False
        wanted = self.nav_roles if self.nav_roles is not None else self.roles
        return bool(access.roles & wanted)

    def title_for(self, access: Access) -> str:
        """The page's title as the user sees it: an admin's page of every team's work says so."""
        return self.admin_title if access.admin and self.admin_title else self.title


PAGES: tuple[Page, ...] = (
    Page(
        "overview",
        "Overview",
        EVERYONE,
        "the pool at a glance: capacity, what runs and waits, and the last scheduling cycles",
    ),
    Page(
        "workloads",
        "My workloads",
        TENANT_ROLES,
        "your teams' workloads: where each waits in line, when it should start and why it waits",
        admin_title="Workloads",
    ),
    Page(
        "queues",
        "Queues",
        EVERYONE,
        "the queue tree with each queue's quota, deserved share and what it holds, borrows "
        "and lends",
    ),
    Page(
        "requests",
        "Requests",
        REQUEST_READERS,
        "your teams' quota and budget requests and where each stands, and their current "
        "priority budgets (finance: every team's)",
        nav_roles=frozenset({FINANCE, LEAD}),
    ),
    Page(
        "approvals",
        "Approvals",
        frozenset({ADMIN}),
        "quota and budget requests waiting for a decision, with their impact",
    ),
    Page(
        "cost",
        "Cost",
        frozenset({ADMIN, FINANCE, LEAD, MEMBER}),
        "GPU-hours and cost per team and month, with capacity split into used, reserved idle, "
        "above guarantee and pool idle",
    ),
    Page(
        "utilization",
        "Utilisation",
        frozenset({ADMIN, FINANCE, LEAD, MEMBER}),
        "GPUs allocated against GPUs that worked, per pool and team, and who holds GPUs idle",
    ),
    Page(
        "preemptions",
        "Preemptions",
        TENANT_ROLES,
        "who preempted whom and why, the GPU-hours lost, and the protection in force",
    ),
    Page(
        "fragmentation",
        "Fragmentation",
        TENANT_ROLES,
        "every GPU by NVLink domain and node, coloured by tenant, and the largest gang that "
        "fits now",
    ),
    Page(
        "cluster",
        "Cluster",
        TENANT_ROLES,
        "nodes and GPUs by flavor and NVLink domain, their health and cordons",
    ),
    Page(
        "audit",
        "Audit",
        frozenset({ADMIN}),
        "who changed what and when",
    ),
)
PAGES_BY_KEY = {page.key: page for page in PAGES}

# The first role a user holds in this order picks their home page.
HOME_BY_ROLE: tuple[tuple[str, str], ...] = (
    (ADMIN, "overview"),
    (FINANCE, "cost"),
    (LEAD, "workloads"),
    (MEMBER, "workloads"),
)


def pages_for(access: Access) -> list[Page]:
    """The pages the navigation offers the user, in order, each titled as the user sees it
    (an admin's "Workloads", every team's, where the others read "My workloads")."""
    return [
        replace(page, title=page.title_for(access)) for page in PAGES if page.offered_to(access)
    ]


def home_page(access: Access) -> Page | None:
    """Where the user lands: admins on Overview, finance on Cost, leads and members on My
    workloads; None for a user who holds no role yet."""
    for role, key in HOME_BY_ROLE:
        if role in access.roles:
            return PAGES_BY_KEY[key]
    return None


def role_names(access: Access) -> list[str]:
    """The user's roles in a fixed order, for the header."""
    return [role for role in ROLES if role in access.roles]
