"""`gpupool seed-demo` builds the demo pool; running it twice gives exactly the same data."""

from decimal import Decimal
from io import StringIO
from typing import Any

import pytest
from django.apps import apps
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.db.models import Count, F
from domain_builders import DOMAIN_APPS

from gpupool.audit.models import AuditEvent
from gpupool.clusters.inventory import UNHEALTHY_GPUS_LABEL
from gpupool.clusters.node_profiles import packaged_profile
from gpupool.inventory.models import Flavor, Gpu, Node, healthy_capacity
from gpupool.quotas.actions import do_apply_quota_request, do_approve_quota_request
from gpupool.quotas.models import PriorityClass, Queue, QueueQuota, QuotaRequest
from gpupool.tenancy.models import Membership, SiteRole, Tenant
from hack import k8s_plane

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def fast_passwords(settings: Any) -> None:
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


def dump() -> dict[str, list[dict[str, Any]]]:
    """Every row of the domain apps and of the users, by model, in primary-key order."""
    models = [apps.get_model("auth", "User")]
    for label in DOMAIN_APPS:
        models.extend(apps.get_app_config(label).get_models())
    return {model._meta.label: list(model.objects.order_by("pk").values()) for model in models}


def seed() -> str:
    out = StringIO()
    call_command("gpupool", "seed-demo", stdout=out)
    return out.getvalue()


def test_seeding_twice_gives_the_same_data() -> None:
    printed = seed()
    first = dump()
    seed()
    assert dump() == first
    assert "admin-demo" in printed and "finance-demo" in printed


def test_a_second_seeding_adds_no_audit_rows() -> None:
    seed()
    first = AuditEvent.objects.count()
    seed()
    assert first > 0 and AuditEvent.objects.count() == first


def test_every_demo_change_is_audited_as_the_system() -> None:
    seed()
    actions = set(AuditEvent.objects.values_list("action", flat=True))
    assert {
        "inventory.save_flavor",
        "inventory.sync_node",
        "tenancy.save_tenant",
        "tenancy.set_membership",
        "quotas.save_queue",
    } <= actions
    assert not AuditEvent.objects.filter(actor__isnull=False).exclude(
        action__endswith="quota_request"
    )


def test_the_demo_pool_is_the_promised_one() -> None:
    seed()
    assert Node.objects.count() == 64
    h100 = Flavor.objects.get(name="h100")
    gb200 = Flavor.objects.get(name="gb200")
    # h100: 8-GPU nodes, each its own NVLink domain
    assert set(
        Node.objects.filter(flavor=h100).annotate(n=Count("gpus")).values_list("n", flat=True)
    ) == {8}
    assert not Node.objects.filter(flavor=h100).exclude(nvlink_domain=F("name")).exists()
    # gb200: 4-GPU nodes in one 72-GPU domain (GPU feature discovery's clique label)
    domains = Node.objects.filter(flavor=gb200).values_list("nvlink_domain", flat=True)
    assert len(set(domains)) == 1 and healthy_capacity(gb200) == 72
    assert {f.sharing for f in Flavor.objects.all()} >= {"exclusive", "shared", "mig"}
    # two organizations of three teams, each with a leaf queue that has quotas
    assert Tenant.objects.values("organization").distinct().count() == 2
    assert Tenant.objects.count() == 6
    # each team owns the Kubernetes namespace of its name
    assert {t.name: t.namespace_names() for t in Tenant.objects.all()} == {
        name: [name] for name in ["nlp", "vision", "speech", "search", "ads", "recsys"]
    }
    # the broken GPUs say why
    assert set(Gpu.objects.filter(healthy=False).values_list("unhealthy_reason", flat=True)) == {
        "XID 79: the GPU has fallen off the bus",
        "DCGM health check: uncorrectable ECC errors",
    }
    for team in Tenant.objects.all():
        assert Queue.objects.get(tenant=team).quotas.count() == 4
    # classes: normal (default), high (budgeted), interactive (Never)
    assert PriorityClass.objects.get(default=True).name == "normal"
    assert PriorityClass.objects.get(name="high").budget_rate > 0
    assert PriorityClass.objects.get(name="interactive").preemption_policy == "Never"
    interactive = PriorityClass.objects.get(name="interactive")
    # the demo's idle policy: alerted after 20 idle minutes, reclaimed after an idle hour
    assert (interactive.idle_alert_after_s, interactive.idle_reclaim_after_s) == (1200, 3600)
    assert PriorityClass.objects.get(name="high").budgets.count() == 6
    # one user per role, and a request waiting for the admin
    assert set(SiteRole.objects.values_list("role", flat=True)) == {"admin", "finance"}
    assert Membership.objects.filter(role="lead").count() == 6
    assert QuotaRequest.objects.filter(state="submitted").count() == 1


def test_the_local_planes_demo_profile_is_the_demo_pool() -> None:
    # `make demo-k8s` starts the plane with `--profile demo`: its KWOK nodes are the nodes
    # seed-demo gives the simulated cluster, by name and labels, so the demo's quotas fit the
    # plane's pool as they fit the simulated one's (they were sized for 320 H100 GPUs and the
    # plane's default profile has 32).
    seed()
    profile = k8s_plane.load_profile("demo")
    assert profile == packaged_profile("demo")
    plane = {m["metadata"]["name"]: m for m in k8s_plane.node_manifests(profile)}
    assert set(plane) == set(Node.objects.values_list("name", flat=True))
    for node in Node.objects.all():
        labels = plane[node.name]["metadata"]["labels"]
        # Which GPUs are broken is the simulated cluster's state (its health label, which
        # seed-demo's failed GPUs set), not the node's identity: the plane's nodes start whole.
        named = {k: v for k, v in node.labels.items() if k != UNHEALTHY_GPUS_LABEL}
        assert {k: labels.get(k) for k in named} == named, node.name
    assert sum(n.startswith("h100-") for n in plane) == 40


def test_the_demo_users_can_log_in(client: Any) -> None:
    seed()
    assert client.login(username="admin", password="admin-demo")
    assert client.get("/admin/").status_code == 200
    assert client.login(username="nlp-lead", password="nlp-lead-demo")
    assert client.get("/admin/").status_code == 302  # leads are not staff


def test_the_waiting_demo_request_can_be_approved_and_applied() -> None:
    """The demo's submitted quota request fits the pool, so an admin can take it to applied."""
    seed()
    admin = get_user_model().objects.get(username="admin")
    request = QuotaRequest.objects.get(state="submitted")
    do_approve_quota_request(request, acting_user=admin)
    do_apply_quota_request(request, acting_user=admin)
    request.refresh_from_db()
    assert request.state == "applied"
    quota = QueueQuota.objects.get(queue=request.queue, flavor=request.flavor)
    assert quota.guarantee == Decimal(request.payload["guarantee"])
