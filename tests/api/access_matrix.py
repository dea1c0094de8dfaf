"""The permission matrix: what every role gets from every API route and method.

One row per named route of ``/api/v1/``. A row says, per HTTP method, the outcome for each role
of the matrix (``admin``, ``finance``, ``lead`` and ``member`` of tenant nlp, ``anonymous``);
routes that address one object also say it for an object of the caller's own tenant and of
another tenant, written ``own|other``. Outcomes: ``ok`` (let through: 2xx, or 400 when the empty
body fails validation), ``forbidden`` (403), ``hidden`` (404), ``unauthorized`` (401).
``tests/api/test_permission_matrix.py`` turns the rows into cases and fails on a route or a
method without a row, so a new endpoint cannot ship without deciding who may call it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import resources_pool

OUTCOMES = {"ok", "forbidden", "hidden", "unauthorized"}
ROLES = ("admin", "finance", "lead", "member", "anonymous")

# Target builders: (world) -> {"own": url kwargs, "other": url kwargs}
Target = Callable[[Any], Mapping[str, Mapping[str, str]]]


@dataclass(frozen=True)
class Row:
    """Expected outcomes of one route: ``{"GET": "admin=ok lead=ok|hidden ...", ...}``."""

    methods: Mapping[str, str]
    target: Target | None = None
    payload: Callable[[Any], Mapping[str, Any]] | None = None  # (world) -> body for writes

    def outcome(self, method: str, role: str, scope: str) -> str:
        """The outcome for ``role`` calling ``method`` on an object of scope own/other."""
        spec = dict(part.split("=", 1) for part in self.methods[method].split())
        if role not in spec:
            raise KeyError(f"no outcome for role {role} on {method}")
        own, _, other = spec[role].partition("|")
        found = other if scope == "other" and other else own
        if found not in OUTCOMES:
            raise ValueError(f"unknown outcome {found!r}")
        return found


def _named(attribute: str) -> Target:
    def target(world: Any) -> Mapping[str, Mapping[str, str]]:
        return {
            "own": {attribute: getattr(world.own, attribute)},
            "other": {attribute: getattr(world.other, attribute)},
        }

    return target


def _membership(world: Any) -> Mapping[str, Mapping[str, str]]:
    own = world.own.memberships.order_by("pk").first()
    other = world.other.memberships.order_by("pk").first()
    return {"own": {"pk": str(own.pk)}, "other": {"pk": str(other.pk)}}


def _flavor(world: Any) -> Mapping[str, Mapping[str, str]]:
    return {"own": {"name": "h100"}, "other": {"name": "h100"}}


EVERYONE_READS = "admin=ok finance=ok lead=ok member=ok anonymous=unauthorized"
PUBLIC = "admin=ok finance=ok lead=ok member=ok anonymous=ok"
ADMIN_ONLY = "admin=ok finance=forbidden lead=forbidden member=forbidden anonymous=unauthorized"
TENANT_ROLES = "admin=ok finance=forbidden lead=ok member=ok anonymous=unauthorized"
TENANT_OWN = "admin=ok finance=forbidden lead=ok|hidden member=ok|hidden anonymous=unauthorized"
TENANT_AND_FINANCE_OWN = (
    "admin=ok finance=ok lead=ok|hidden member=ok|hidden anonymous=unauthorized"
)

ROWS: dict[str, Row] = {
    "api:api-root": Row({"GET": EVERYONE_READS}),
    "api:token": Row({"POST": PUBLIC}),
    # The schema and its docs are public: they describe the API, not the pool.
    "api:schema": Row({"GET": PUBLIC}),
    "api:docs": Row({"GET": PUBLIC}),
    # tenancy
    "api:tenant-list": Row({"GET": EVERYONE_READS, "POST": ADMIN_ONLY}),
    "api:tenant-detail": Row(
        {"GET": EVERYONE_READS, "PUT": ADMIN_ONLY, "PATCH": ADMIN_ONLY}, _named("name")
    ),
    "api:membership-list": Row(
        {
            "GET": "admin=ok finance=forbidden lead=ok member=ok anonymous=unauthorized",
            "POST": "admin=ok finance=forbidden lead=ok member=forbidden anonymous=unauthorized",
        },
        payload=lambda world: {"user": "fin", "tenant": world.own.name, "role": "member"},
    ),
    "api:membership-detail": Row(
        {
            "GET": "admin=ok finance=forbidden lead=ok|hidden member=ok|hidden "
            "anonymous=unauthorized",
            "PATCH": "admin=ok finance=forbidden lead=ok|hidden member=forbidden|hidden "
            "anonymous=unauthorized",
            "DELETE": "admin=ok finance=forbidden lead=ok|hidden member=forbidden|hidden "
            "anonymous=unauthorized",
        },
        _membership,
    ),
    # inventory
    "api:flavor-list": Row({"GET": EVERYONE_READS, "POST": ADMIN_ONLY}),
    "api:flavor-detail": Row(
        {"GET": EVERYONE_READS, "PATCH": ADMIN_ONLY, "DELETE": ADMIN_ONLY}, _flavor
    ),
    # --- resources: workloads, nodes, queues, classes, budgets, preemptions, cycles,
    # fragmentation (tests/api/resources_pool.py builds their objects)
    "api:workload-list": Row({"GET": TENANT_ROLES, "POST": TENANT_ROLES}),
    "api:workload-dry-run": Row({"POST": TENANT_ROLES}),
    "api:workload-refused": Row({"GET": TENANT_ROLES}),
    "api:namespaced-workload-detail": Row({"GET": TENANT_OWN}, resources_pool.workloads),
    # train-1 was submitted by the lead: a member may cancel only what they submitted.
    "api:namespaced-workload-cancel": Row(
        {
            "POST": "admin=ok finance=forbidden lead=ok|hidden member=forbidden|hidden "
            "anonymous=unauthorized"
        },
        resources_pool.workloads,
    ),
    "api:node-list": Row({"GET": EVERYONE_READS}),
    "api:node-detail": Row({"GET": EVERYONE_READS}, resources_pool.nodes),
    "api:node-cordon": Row({"POST": ADMIN_ONLY}, resources_pool.nodes),
    "api:node-uncordon": Row({"POST": ADMIN_ONLY}, resources_pool.nodes),
    "api:node-drain": Row({"POST": ADMIN_ONLY}, resources_pool.nodes),
    "api:node-end-drain": Row({"POST": ADMIN_ONLY}, resources_pool.nodes),
    "api:node-gpu-health": Row({"POST": ADMIN_ONLY}, resources_pool.gpus),
    # Queues and classes are public at the queue level; admins change them.
    "api:queue-list": Row({"GET": EVERYONE_READS, "POST": ADMIN_ONLY}, resources_pool.pool_only),
    "api:queue-detail": Row(
        {"GET": EVERYONE_READS, "PUT": ADMIN_ONLY, "PATCH": ADMIN_ONLY, "DELETE": ADMIN_ONLY},
        resources_pool.queues,
    ),
    "api:queue-quota": Row({"PUT": ADMIN_ONLY, "DELETE": ADMIN_ONLY}, resources_pool.quotas),
    "api:priority-class-list": Row({"GET": EVERYONE_READS, "POST": ADMIN_ONLY}),
    "api:priority-class-detail": Row(
        {"GET": EVERYONE_READS, "PATCH": ADMIN_ONLY, "DELETE": ADMIN_ONLY},
        resources_pool.classes,
    ),
    # Budgets: a tenant's own, and finance reads every tenant's.
    "api:budget-list": Row({"GET": EVERYONE_READS, "POST": ADMIN_ONLY}),
    "api:budget-detail": Row({"GET": TENANT_AND_FINANCE_OWN}, resources_pool.budgets),
    "api:budget-ledger": Row({"GET": TENANT_AND_FINANCE_OWN}, resources_pool.budgets),
    "api:preemption-list": Row({"GET": TENANT_ROLES}),
    "api:preemption-detail": Row({"GET": TENANT_OWN}, resources_pool.preemptions),
    "api:utilization-tenant-list": Row({"GET": EVERYONE_READS}),
    "api:utilization-waster-list": Row({"GET": EVERYONE_READS}),
    "api:scheduling-cycle-list": Row({"GET": ADMIN_ONLY}),
    "api:scheduling-cycle-detail": Row({"GET": ADMIN_ONLY}, resources_pool.cycles),
    "api:scheduling-cycle-latest": Row({"GET": EVERYONE_READS}, resources_pool.pool_only),
    "api:fragmentation-list": Row({"GET": EVERYONE_READS}, resources_pool.pool_only),
    # The audit log: admins only, as its page.
    "api:audit-event-list": Row({"GET": ADMIN_ONLY}),
    "api:audit-event-detail": Row({"GET": ADMIN_ONLY}, lambda world: _audit_event()),
}


def _audit_event() -> Mapping[str, Mapping[str, str]]:
    """Matrix target: the latest audited change (making the world's tenants recorded some)."""
    from gpupool.audit.models import AuditEvent

    latest = AuditEvent.objects.order_by("-id").values_list("pk", flat=True).first()
    return {"own": {"pk": str(latest)}, "other": {"pk": str(latest)}}


# ----------------------------------------------------------------------------- governance
# Quota and budget requests: leads see and file their tenants' (drafts of nlp's lead and of
# vision's lead are the targets); admins see all but other people's drafts, which are their
# requesters' own until submitted (an admin is answered 404 there), and decide and see the
# impact of submitted requests (the targets of those routes). Notification preferences are
# the caller's own: every role reads and changes theirs.


def _request_queues(world: Any) -> dict[str, Any]:
    """The queues of nlp and vision under one root (made once per world)."""
    if "queues" not in world.objects:
        from gpupool.quotas.actions import do_save_queue
        from gpupool.quotas.models import Queue

        root = do_save_queue(Queue(name="pool"), acting_user=None)
        world.objects["queues"] = {
            tenant.name: do_save_queue(
                Queue(name=tenant.name, parent=root, tenant=tenant), acting_user=None
            )
            for tenant in (world.own, world.other)
        }
    return world.objects["queues"]


def _quota_request_payload(world: Any) -> Mapping[str, Any]:
    _request_queues(world)
    return {
        "kind": "queue-quota",
        "queue": world.own.name,
        "flavor": "h100",
        "payload": {"guarantee": 0, "deserved": 0, "capability": 1},
        "justification": "the matrix asks",
    }


def _quota_request(world: Any, *, submit: bool = False) -> Mapping[str, Mapping[str, str]]:
    from gpupool.inventory.models import Flavor
    from gpupool.quotas.actions import do_create_quota_request
    from gpupool.tenancy.models import Membership

    queues = _request_queues(world)
    drafts = {}
    for scope, tenant in (("own", world.own), ("other", world.other)):
        lead = Membership.objects.get(tenant=tenant, role="lead").user
        drafts[scope] = do_create_quota_request(
            kind="queue-quota",
            tenant=tenant,
            requested_by=lead,
            justification="the matrix asks",
            payload={"guarantee": 0, "deserved": 0, "capability": 1},
            queue=queues[tenant.name],
            flavor=Flavor.objects.get(name="h100"),
            submit=submit,
        )
    return {scope: {"pk": str(draft.pk)} for scope, draft in drafts.items()}


def _submitted_quota_request(world: Any) -> Mapping[str, Mapping[str, str]]:
    return _quota_request(world, submit=True)


def _quota_request_with_what_if(world: Any) -> Mapping[str, Mapping[str, str]]:
    from gpupool.quotas.actions import do_start_what_if
    from gpupool.quotas.models import QuotaRequest

    targets = _submitted_quota_request(world)
    for target in targets.values():
        request = QuotaRequest.objects.get(pk=target["pk"])
        do_start_what_if(request, acting_user=world.users["admin"], days=1)
    return targets


def _notification_kind(world: Any) -> Mapping[str, Mapping[str, str]]:
    return {"own": {"kind": "workload-started"}, "other": {"kind": "workload-started"}}


LEADS_READ = "admin=ok finance=forbidden lead=ok member=forbidden anonymous=unauthorized"
# Finance reads every tenant's requests and never files or decides one (a draft is its
# requester's alone: hidden from finance as from the admins).
REQUEST_READERS = "admin=ok finance=ok lead=ok member=forbidden anonymous=unauthorized"
DRAFT_READ = "admin=hidden finance=hidden lead=ok|hidden member=forbidden anonymous=unauthorized"
DRAFT_REQUESTER_ONLY = (
    "admin=hidden finance=forbidden lead=ok|hidden member=forbidden anonymous=unauthorized"
)
OWN_ONLY = "admin=ok finance=ok lead=ok member=ok anonymous=unauthorized"
# A submitted request is withdrawn by its requester only: an admin sees it but may not.
SUBMITTED_REQUESTER_ONLY = (
    "admin=forbidden finance=forbidden lead=ok|hidden member=forbidden anonymous=unauthorized"
)

ROWS |= {
    "api:quota-request-list": Row(
        {"GET": REQUEST_READERS, "POST": LEADS_READ}, payload=_quota_request_payload
    ),
    "api:quota-request-detail": Row(
        {
            "GET": DRAFT_READ,
            "PATCH": DRAFT_REQUESTER_ONLY,
            "DELETE": DRAFT_REQUESTER_ONLY,
        },
        _quota_request,
    ),
    "api:quota-request-submit": Row({"POST": DRAFT_REQUESTER_ONLY}, _quota_request),
    "api:quota-request-withdraw": Row({"POST": SUBMITTED_REQUESTER_ONLY}, _submitted_quota_request),
    "api:quota-request-approve": Row({"POST": ADMIN_ONLY}, _submitted_quota_request),
    "api:quota-request-reject": Row({"POST": ADMIN_ONLY}, _submitted_quota_request),
    "api:quota-request-apply": Row({"POST": ADMIN_ONLY}, _submitted_quota_request),
    "api:quota-request-impact": Row({"GET": ADMIN_ONLY}, _submitted_quota_request),
    "api:quota-request-what-if": Row(
        {"GET": ADMIN_ONLY, "POST": ADMIN_ONLY}, _quota_request_with_what_if
    ),
    "api:notification-preference-list": Row({"GET": OWN_ONLY}),
    "api:notification-preference-detail": Row(
        {"GET": OWN_ONLY, "PATCH": OWN_ONLY}, _notification_kind
    ),
}


# ----------------------------------------------------------------------------- cost (accounting)


def _usage_interval(world: Any) -> Mapping[str, Mapping[str, str]]:
    """A usage interval of a workload of each tenant (made once per world)."""
    if "usage" not in world.objects:
        from datetime import UTC, datetime

        from domain_builders import priority_class, queue

        from gpupool.accounting.actions import do_open_usage
        from gpupool.inventory.models import Flavor
        from gpupool.workloads.actions import PodSetSpec, do_submit_workload

        h100 = Flavor.objects.get(name="h100")
        at = datetime(2026, 3, 10, 10, tzinfo=UTC)
        normal = priority_class("cost-normal", default=True)
        root = queue("cost-root")
        found = {}
        for scope, team in (("own", world.own), ("other", world.other)):
            leaf = queue(f"cost-{team.name}", parent=root, tenant=team)
            job = do_submit_workload(
                f"cost-{team.name}",
                queue=leaf,
                pod_sets=[PodSetSpec(1, gpus=1, flavor=h100)],
                priority_class=normal,
                at=at,
            )
            found[scope] = {"pk": str(do_open_usage(job, flavor=h100, gpus=1, at=at).pk)}
        world.objects["usage"] = found
    return world.objects["usage"]


COST_READS = "admin=ok finance=ok lead=ok member=ok anonymous=unauthorized"

ROWS.update(
    {
        # Reports: every cost role reads them, each caller only its tenants' rows (finance all);
        # the capacity report is the pool's.
        "api:report-usage-list": Row({"GET": COST_READS}),
        "api:report-attribution-list": Row({"GET": COST_READS}),
        "api:report-capacity-list": Row({"GET": COST_READS}),
        "api:report-workloads-list": Row({"GET": COST_READS}),
        "api:usage-list": Row({"GET": COST_READS}),
        "api:usage-detail": Row(
            {"GET": "admin=ok finance=ok lead=ok|hidden member=ok|hidden anonymous=unauthorized"},
            _usage_interval,
        ),
    }
)
