"""``gpupool seed-demo``: build a realistic demo pool. Running it again changes nothing: it
only makes what is missing.

The pool is the node profile ``demo`` (``gpupool/clusters/profiles/demo.yaml``, in the local
plane's format): 40 HGX H100 nodes (8 GPUs, each node its own NVLink domain), one GB200 NVL72
rack of 18 nodes of 4 GPUs (one 72-GPU domain), 4 time-sliced L40S nodes and 2 A100 nodes cut
into MIG 3g.40gb instances: 64 nodes. On the simulated cluster (``make demo``) seed-demo makes
them, two with a broken GPU; ``make demo-k8s`` starts the local plane with the same profile
(``--profile demo``), whose KWOK nodes carry the same labels. The flavors pick their nodes by
those labels, and the inventory is read from the cluster ``GPUPOOL_CLUSTER`` names, through
the backend protocol, as the control loop reads it.
Then two organizations of three teams each (each team owns the Kubernetes namespace of its
name), a queue tree with quotas, the priority classes normal / high (budgeted) / interactive
(Never; with an idle policy: alerted after 20 idle minutes, reclaimed after an idle hour), this
month's budgets, and one user per role. Everything is looked up by its natural key and
**made only when missing**, through the actions: a flavor, class, tenant, queue or node that
exists is left as it is, a queue's quotas are set only when seed-demo makes the queue, a
budget only when the month has none, a user's roles and memberships only when seed-demo makes
the user. So a second run (``make demo`` resuming the pool) keeps every change made since (an
approved quota, a new price, a revoked role, a repaired GPU) and writes no audit rows. (Demo
users are Django accounts, made here directly.)

The demo's quotas are not sized down for nodes that are down: a queue's guarantees must fit
the healthy capacity of nodes that take pods (``inventory.models.takes_pods``), and they are
set only when the queue is made, so a run that would make a queue while too many of the
demo's nodes are NotReady, cordoned or gone refuses (exit 2), naming them, and writes
nothing: run it again once they are back.
"""

from __future__ import annotations

import argparse
from datetime import date
from decimal import Decimal
from typing import Any, TextIO, cast

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from gpupool.cli.subcommands.demo import record_gpu_findings
from gpupool.clusters.base import ClusterBackend, NodeFacts
from gpupool.clusters.inventory import FlavorSelector, FlavorSharing, node_inventory
from gpupool.clusters.node_profiles import node_manifests, packaged_profile
from gpupool.clusters.simulated import SimulatedBackend, SimulatedCluster
from gpupool.control.backends import backend_from_settings
from gpupool.control.snapshot import CLUSTER_UNHEALTHY
from gpupool.inventory.actions import do_save_flavor, do_sync_node
from gpupool.inventory.choices import NodeState, Sharing
from gpupool.inventory.models import Flavor, Node, takes_pods
from gpupool.quotas.actions import (
    do_create_quota_request,
    do_grant_budget,
    do_save_priority_class,
    do_save_queue,
    do_set_queue_quota,
    do_submit_quota_request,
)
from gpupool.quotas.choices import PreemptionPolicy, QuotaRequestKind
from gpupool.quotas.models import PriorityBudget, PriorityClass, Queue, QuotaRequest
from gpupool.tenancy.actions import do_grant_site_role, do_save_tenant, do_set_membership
from gpupool.tenancy.choices import MembershipRole, SiteRoleName
from gpupool.tenancy.models import Tenant

HELP = "Create (or bring back) the demo pool, tenants, queues, classes, budgets and users"

REASON = "seed-demo"

ORGANIZATIONS = {
    "research": ["nlp", "vision", "speech"],
    "product": ["search", "ads", "recsys"],
}

FLAVORS: list[dict[str, Any]] = [
    {
        "name": "h100",
        "sharing": Sharing.EXCLUSIVE,
        "gpu_model": "H100-80GB",
        "mig_profile": "",
        "gpu_memory_gb": 80,
        "hourly_price": Decimal("2.50"),
        "node_labels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
        "description": "HGX H100: 8 GPUs per node over NVSwitch; the node is the NVLink domain.",
    },
    {
        "name": "gb200",
        "sharing": Sharing.EXCLUSIVE,
        "gpu_model": "GB200",
        "mig_profile": "",
        "gpu_memory_gb": 186,
        "hourly_price": Decimal("6.00"),
        "node_labels": {"nvidia.com/gpu.product": "NVIDIA-GB200"},
        "description": "GB200 NVL72: 18 compute trays of 4 GPUs share one 72-GPU NVLink domain.",
    },
    {
        "name": "l40s-shared",
        "sharing": Sharing.SHARED,
        "gpu_model": "L40S",
        "mig_profile": "",
        "gpu_memory_gb": 48,
        "hourly_price": Decimal("1.10"),
        # The NVIDIA device plugin suffixes a time-sliced GPU's product with -SHARED.
        "node_labels": {
            "nvidia.com/gpu.product": "NVIDIA-L40S-SHARED",
            "nvidia.com/gpu.sharing-strategy": "time-slicing",
        },
        "description": "Time-sliced L40S for notebooks and inference: pods ask for milli-GPUs.",
    },
    {
        "name": "a100-3g.40gb",
        "sharing": Sharing.MIG,
        "gpu_model": "A100-80GB",
        "mig_profile": "3g.40gb",
        "gpu_memory_gb": 40,
        "hourly_price": Decimal("1.20"),
        # Any A100 80GB in MIG's mixed strategy: gpupool schedules its 3g.40gb instances
        # (two per card in the demo's all-3g.40gb layout, one in the plane's all-balanced).
        "node_labels": {
            "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB",
            "nvidia.com/mig.strategy": "mixed",
        },
        "description": "A100 80GB cut into MIG 3g.40gb instances (two per card).",
    },
]


# GPUs that are broken in the demo, and why, so health shows up in capacity and the admin.
UNHEALTHY_GPUS = {
    "h100-07": {3: "XID 79: the GPU has fallen off the bus"},
    "h100-23": {5: "DCGM health check: uncorrectable ECC errors"},
}

# (guarantee, deserved, capability) per flavor.
ORG_QUOTAS = {
    "research": {
        "h100": (100, 160, 318),
        "gb200": (36, 36, 72),
        "l40s-shared": (4, 8, 16),
        "a100-3g.40gb": (8, 16, 32),
    },
    "product": {
        "h100": (100, 158, 318),
        "gb200": (0, 36, 72),
        "l40s-shared": (4, 8, 16),
        "a100-3g.40gb": (8, 16, 32),
    },
}
TEAM_QUOTAS = {
    "nlp": {"h100": (32, 53, 160), "gb200": (18, 18, 72)},
    "vision": {"h100": (32, 53, 160), "gb200": (18, 18, 36)},
    "speech": {"h100": (32, 54, 160), "gb200": (0, 0, 18)},
    "search": {"h100": (32, 53, 160), "gb200": (0, 12, 36)},
    "ads": {"h100": (32, 53, 160), "gb200": (0, 12, 36)},
    "recsys": {"h100": (32, 52, 160), "gb200": (0, 12, 36)},
}
TEAM_SHARED_QUOTAS = {"l40s-shared": (1, 2, 8), "a100-3g.40gb": (2, 5, 16)}

PRIORITY_CLASSES: list[dict[str, Any]] = [
    {
        "name": "normal",
        "value": 0,
        "preemption_policy": PreemptionPolicy.PREEMPT_LOWER_PRIORITY,
        "budget_rate": Decimal(0),
        "default": True,
        "description": "Everyday work. Free; protected only up to the queue's maximum.",
    },
    {
        "name": "high",
        "value": 100,
        "preemption_policy": PreemptionPolicy.PREEMPT_LOWER_PRIORITY,
        "budget_rate": Decimal(1),
        "default": False,
        "description": "Deadlines. Preempts normal work; spends the team's budget per GPU-hour.",
    },
    {
        "name": "interactive",
        "value": 50,
        "preemption_policy": PreemptionPolicy.NEVER,
        "budget_rate": Decimal(0),
        "default": False,
        "description": "Notebooks and debugging: ahead of normal in line, but never preempts. "
        "Idle for 20 minutes: its owner and team leads are alerted; idle for an hour: it is "
        "reclaimed (it ends).",
        "idle_alert_after_s": 20 * 60,
        "idle_reclaim_after_s": 60 * 60,
    },
]

BUDGET_GPU_HOURS = {"research": Decimal(500), "product": Decimal(300)}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """--reset-passwords puts the demo passwords back on existing demo users."""
    parser.add_argument(
        "--reset-passwords",
        action="store_true",
        help="also reset existing demo users' passwords to the printed demo passwords",
    )


def demo_password(username: str) -> str:
    """The demo password of a demo user (printed; never use these outside a demo)."""
    return f"{username}-demo"


def demo_users() -> list[tuple[str, str]]:
    """The demo users ``seed`` makes, with what each is (the order ``run`` prints them in)."""
    users = [("admin", "site admin (Django superuser)"), ("finance", "site finance")]
    for teams in ORGANIZATIONS.values():
        for team in teams:
            users += [
                (f"{team}-{role}", f"{role} of {team}")
                for role in (MembershipRole.LEAD, MembershipRole.MEMBER)
            ]
    return users


def month_period(today: date) -> tuple[date, date]:
    """The first day of ``today``'s month and of the next month."""
    start = today.replace(day=1)
    end = date(start.year + (start.month == 12), start.month % 12 + 1, 1)
    return start, end


def _user(username: str, *, reset_password: bool, **flags: Any) -> tuple[Any, bool]:
    """Get or create a demo user (``flags`` only for a new one: an existing account is left
    as it is) and whether it was created; set the demo password when new (or when asked to).

    Users are Django's accounts, not domain state: no action owns them, so this writes them
    directly (their roles and memberships go through the tenancy actions)."""
    user_model = get_user_model()
    user, created = user_model.objects.get_or_create(username=username, defaults=flags)
    if created or reset_password:
        user.set_password(demo_password(username))
        user.save()
    return user, created


def _flavors() -> dict[str, Flavor]:
    """The demo's flavors: those that exist as they are (a price changed since stays), the
    missing ones made."""
    flavors = {}
    for spec in FLAVORS:
        flavor = Flavor.objects.filter(name=spec["name"]).first()
        if flavor is None:
            flavor = Flavor(**spec)
            flavor = do_save_flavor(flavor, acting_user=None, reason=REASON)
        flavors[flavor.name] = flavor
    return flavors


def _tenant(name: str, organization: str) -> Tenant:
    """The team's tenant as it is, or made when missing, owning the namespace of its name."""
    tenant = Tenant.objects.filter(name=name).first()
    if tenant is not None:
        return tenant
    tenant = Tenant(name=name, display_name=name.upper(), organization=organization)
    return do_save_tenant(tenant, namespaces=[name], acting_user=None, reason=REASON)


DEMO_PROFILE = "demo"  # the demo's pool: gpupool/clusters/profiles/demo.yaml


def _cluster_nodes(cluster: SimulatedCluster) -> None:
    """Give the simulated cluster the demo profile's nodes it lacks, with their broken GPUs
    (a node it has keeps its GPUs' health: a GPU repaired since stays repaired)."""
    present = {node.name for node in cluster.nodes()}
    missing = [
        m
        for m in node_manifests(packaged_profile(DEMO_PROFILE))
        if m["metadata"]["name"] not in present
    ]
    cluster.add_nodes(missing)
    added = {m["metadata"]["name"] for m in missing}
    for name, broken in UNHEALTHY_GPUS.items():
        if name in added:
            for index, why in broken.items():
                cluster.set_gpu_health(name, index, healthy=False, reason=why)


def _inventory(flavors: dict[str, Flavor], backend: ClusterBackend) -> int:
    """Sync the inventory with the cluster's nodes, read through the backend protocol. A
    broken GPU is recorded as the cluster's verdict, as the loop's sync records it
    (``CLUSTER_UNHEALTHY``: the device plugin leaves it out of allocatable and the label
    ``gpupool.io/unhealthy-gpus`` names it), so no mark lifts it while the cluster reports it;
    why it is broken comes from a health source, one path for both clusters:
    ``demo.record_gpu_findings`` records the reasons, as DCGM would -- here for the simulated
    cluster's, on the demo's plane by ``hack/demo_k8s.sh`` after this."""
    selectors = [
        # Sharing's choices are the selector's sharing words.
        FlavorSelector(f.name, f.node_labels, cast(FlavorSharing, f.sharing), f.mig_profile or None)
        for f in flavors.values()
    ]
    cluster = backend.cluster if isinstance(backend, SimulatedBackend) else None
    count = 0
    nodes = backend.sync().nodes
    known = set(Node.objects.values_list("name", flat=True))
    findings: dict[str, dict[int, str]] = {}  # the simulated cluster's reasons, by node
    for facts in sorted(nodes.values(), key=lambda node: node.name):
        if facts.name in known:  # the loop's sync keeps it up to date, not seed-demo
            count += node_inventory(facts, selectors).flavor is not None
            continue
        unhealthy = cluster.unhealthy_gpus(facts.name) if cluster is not None else {}
        if _sync_node(facts, selectors, flavors, dict.fromkeys(unhealthy, CLUSTER_UNHEALTHY)):
            count += 1
            findings[facts.name] = unhealthy
    record_gpu_findings({name: reasons for name, reasons in findings.items() if reasons})
    return count


def _sync_node(
    facts: NodeFacts,
    selectors: list[FlavorSelector],
    flavors: dict[str, Flavor],
    unhealthy: dict[int, str],
) -> bool:
    """Whether the node is one of the demo's flavors (then synced); a cluster's other nodes
    (no GPU, a model the demo has no flavor for) are the loop's to take in, excluded."""
    inventory = node_inventory(facts, selectors)
    if inventory.flavor is None:
        return False
    do_sync_node(
        facts.name,
        flavor=flavors[inventory.flavor],
        gpus=inventory.physical_gpus or inventory.gpus,
        cpu=inventory.cpu_milli // 1000,
        memory_gb=inventory.memory_mib // 1024,
        unhealthy_gpus=unhealthy,
        nvlink_domain=inventory.nvlink_domain,
        zone=inventory.zone or "",
        labels=dict(facts.labels),
        mig_layout=dict(inventory.mig_layout),
        reason=REASON,
    )
    return True


def _queue(
    name: str, *, parent: Queue | None, tenant: Tenant | None, **settings: Any
) -> tuple[Queue, bool]:
    """The queue as it is (its parent, tenant and settings changed since stay), or made when
    missing; and whether it was made."""
    queue = Queue.objects.filter(name=name).first()
    if queue is not None:
        return queue, False
    queue = Queue(name=name, parent=parent, tenant=tenant, **settings)
    return do_save_queue(queue, acting_user=None, reason=REASON), True


class DemoDoesNotFit(ValueError):
    """The cluster's pool cannot hold the demo's quotas (it is not the ``demo`` profile's)."""


class DemoNodesDown(DemoDoesNotFit):
    """The demo's quotas do not fit while some of the flavor's nodes take no pods (not Ready,
    cordoned, gone: ``inventory.models.takes_pods``), whose GPUs the guarantee rule does not
    count: a re-run once they are back fits. ``nodes``: each such node, with why."""

    def __init__(self, problems: str, nodes: list[str]) -> None:
        super().__init__(problems)
        self.problems = problems
        self.nodes = nodes


def nodes_down(flavor: Flavor) -> list[str]:
    """The nodes of ``flavor`` that take no pods, each with why, by name: ``a100-mig-0 (not
    Ready)`` -- the cluster's words where it excludes the node, else the node's state
    (``cordoned``, ``draining``, ``drained``, ``gone``)."""
    words = []
    for node in Node.objects.filter(flavor=flavor).exclude(takes_pods()).order_by("name"):
        state = node.state
        why = node.cluster_exclusion if state == NodeState.EXCLUDED else str(state)
        words.append(f"{node.name} ({why})")
    return words


def _quotas(
    queue: Queue, flavors: dict[str, Flavor], quotas: dict[str, tuple[int, int, int]]
) -> None:
    for flavor_name, (guarantee, deserved, capability) in quotas.items():
        try:
            do_set_queue_quota(
                queue,
                flavors[flavor_name],
                guarantee=guarantee,
                deserved=deserved,
                capability=capability,
                acting_user=None,
                reason=REASON,
            )
        except ValidationError as error:  # the guarantees checked against the pool
            # The rule counts the healthy GPUs of nodes that take pods: a demo node that is
            # down (a restarted plane's NotReady nodes) is no reason to size the demo's
            # guarantees down for good -- they are set only when the queue is made.
            problems = "; ".join(error.messages)
            if down := nodes_down(flavors[flavor_name]):
                raise DemoNodesDown(problems, down) from error
            raise DemoDoesNotFit(problems) from error


def _priority_classes() -> dict[str, PriorityClass]:
    """The demo's classes: those that exist as they are, the missing ones made."""
    classes = {}
    for spec in PRIORITY_CLASSES:
        priority_class = PriorityClass.objects.filter(name=spec["name"]).first()
        if priority_class is None:
            priority_class = do_save_priority_class(
                PriorityClass(**spec), acting_user=None, reason=REASON
            )
        classes[spec["name"]] = priority_class
    return classes


def _budget(
    tenant: Tenant, priority_class: PriorityClass, start: date, end: date, gpu_hours: Decimal
) -> None:
    """Grant the month's budget when the tenant has none of the class in that month (one
    granted, added to or edited since stays as it is)."""
    if PriorityBudget.objects.filter(
        tenant=tenant, priority_class=priority_class, period_start__lt=end, period_end__gt=start
    ).exists():
        return
    do_grant_budget(
        tenant,
        priority_class,
        period_start=start,
        period_end=end,
        gpu_hours=gpu_hours,
        acting_user=None,
        reason=REASON,
    )


@transaction.atomic
def seed(*, reset_passwords: bool = False, today: date | None = None) -> dict[str, Any]:
    """Build or refresh the demo data; returns what was made and the demo users."""
    flavors = _flavors()
    # The cluster the loop runs on (GPUPOOL_CLUSTER): the simulated one is the demo's to
    # fill; a Kubernetes cluster's nodes are its own (`make demo-k8s` starts the local plane
    # with the same profile), and the inventory is read from it, not from the profile.
    backend = backend_from_settings()
    try:
        if isinstance(backend, SimulatedBackend):
            _cluster_nodes(backend.cluster)
        nodes = _inventory(flavors, backend)
    finally:
        backend.close()
    classes = _priority_classes()

    users: list[tuple[str, str]] = []
    # A user's roles and memberships come with the user: an existing one keeps what it has
    # (a role revoked since stays revoked).
    admin, created = _user(
        "admin", reset_password=reset_passwords, is_staff=True, is_superuser=True,
        email="admin@gpupool.example",
    )  # fmt: skip
    if created:
        do_grant_site_role(admin, role=SiteRoleName.ADMIN, acting_user=None, reason=REASON)
    users.append(("admin", "site admin (Django superuser)"))
    finance, created = _user(
        "finance", reset_password=reset_passwords, email="finance@gpupool.example"
    )
    if created:
        do_grant_site_role(finance, role=SiteRoleName.FINANCE, acting_user=None, reason=REASON)
    users.append(("finance", "site finance"))

    root, _ = _queue("root", parent=None, tenant=None, description="The whole pool.")
    period_start, period_end = month_period(today or timezone.localdate())
    for organization, teams in ORGANIZATIONS.items():
        org_queue, made = _queue(organization, parent=root, tenant=None, description=organization)
        if made:
            _quotas(org_queue, flavors, ORG_QUOTAS[organization])
        for team in teams:
            tenant = _tenant(team, organization)
            queue, made = _queue(
                team,
                parent=org_queue,
                tenant=tenant,
                weight=Decimal(2) if team == "nlp" else Decimal(1),
                reclaimable=team != "search",
                lending_limit=Decimal(8) if team == "ads" else None,
                default_protected_runtime_s=1800,
                max_protected_runtime_s=7200,
                description=f"Team {team}'s workloads.",
            )
            if made:
                _quotas(queue, flavors, TEAM_QUOTAS[team] | TEAM_SHARED_QUOTAS)
            _budget(
                tenant, classes["high"], period_start, period_end, BUDGET_GPU_HOURS[organization]
            )
            for role in (MembershipRole.LEAD, MembershipRole.MEMBER):
                username = f"{team}-{role}"
                user, created = _user(username, reset_password=reset_passwords,
                                      email=f"{username}@gpupool.example")  # fmt: skip
                if created:
                    do_set_membership(user, tenant, role=role, acting_user=None, reason=REASON)
                users.append((username, f"{role} of {team}"))

    # One request waiting for the admin, to show the approval flow.
    nlp_lead = get_user_model().objects.get(username="nlp-lead")
    justification = "Evaluation sweeps for the Q-end model need four more guaranteed H100 GPUs."
    if not QuotaRequest.objects.filter(requested_by=nlp_lead, justification=justification).exists():
        request = do_create_quota_request(
            kind=QuotaRequestKind.QUEUE_QUOTA,
            tenant=Tenant.objects.get(name="nlp"),
            requested_by=nlp_lead,
            justification=justification,
            # Fits research's guarantee (3 x 32 + 4 <= 100), so the admin can approve it.
            payload={"guarantee": 36, "deserved": 53, "capability": 160},
            queue=Queue.objects.get(name="nlp"),
            flavor=flavors["h100"],
        )
        do_submit_quota_request(request, acting_user=nlp_lead)
    return {"nodes": nodes, "flavors": len(flavors), "users": users}


def run(options: dict[str, Any], stdout: TextIO, stderr: TextIO) -> int:
    """Seed, then print what exists and the demo passwords."""
    try:
        result = seed(reset_passwords=bool(options.get("reset_passwords")))
    except DemoNodesDown as error:  # nothing was written: seed() is one transaction
        stderr.write(
            "seed-demo: the demo's quotas do not fit while these nodes of the pool take no "
            f"pods: {', '.join(error.nodes)} ({error.problems}). "
            "Guarantees must fit the healthy capacity of nodes that take pods, so nothing was "
            "written: run seed-demo again once they are back.\n"
        )
        return 2
    except DemoDoesNotFit as error:  # nothing was written: seed() is one transaction
        stderr.write(
            f"seed-demo: the demo does not fit this cluster ({error}). "
            f"Its quotas are sized for the node profile `{DEMO_PROFILE}` "
            "(gpupool/clusters/profiles/demo.yaml: 40 H100 nodes, a GB200 rack, L40S and MIG "
            "A100 nodes): `make demo` puts them on the simulated cluster, `make demo-k8s` "
            "starts the local plane with them.\n"
        )
        return 2
    stdout.write(
        f"Demo pool ready: {result['nodes']} nodes, {result['flavors']} flavors, "
        f"{len(ORGANIZATIONS)} organizations, "
        f"{sum(len(teams) for teams in ORGANIZATIONS.values())} teams.\n"
    )
    stdout.write("Demo users (passwords are for the demo only):\n")
    for username, role in result["users"]:
        stdout.write(f"  {username:<16} {demo_password(username):<24} {role}\n")
    stdout.write("Passwords are set when a user is created; --reset-passwords sets them again.\n")
    return 0
