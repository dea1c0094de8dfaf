"""A tenant's namespaces hold its work: a namespace is not handed to another tenant, and is not
given up while unfinished workloads of the tenant live there (their pods would belong to no
tenant); a tenant's name, which queues, labels and URLs use, stays as created."""

from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.utils import timezone
from domain_builders import flavor, priority_class, queue, tenant, user
from rest_framework.test import APIClient

from gpupool.tenancy.actions import do_save_tenant
from gpupool.tenancy.models import Tenant, TenantNamespace
from gpupool.workloads.actions import PodSetSpec, do_submit_workload, do_transition_workload
from gpupool.workloads.models import Workload

pytestmark = pytest.mark.django_db


@pytest.fixture
def nlp_at_work() -> dict[str, Any]:
    """Tenant nlp owning namespaces nlp and nlp-eval, one pending workload in nlp."""
    priority_class("normal", default=True)
    team = tenant("nlp", namespaces=("nlp", "nlp-eval"))
    leaf = queue("nlp", parent=queue("root"), tenant=team)
    spec = PodSetSpec(1, gpus=1, flavor=flavor("h100"))
    work = do_submit_workload("train", queue=leaf, pod_sets=[spec], namespace="nlp")
    client = APIClient()
    client.force_authenticate(user("ada", admin=True))
    return {"team": team, "work": work, "api": client}


def owned() -> list[tuple[str, str]]:
    return list(TenantNamespace.objects.values_list("name", "tenant__name").order_by("name"))


def test_giving_up_a_namespace_with_unfinished_work_is_refused_naming_namespaces(
    nlp_at_work: dict,
) -> None:
    response = nlp_at_work["api"].patch("/api/v1/tenants/nlp/", {"namespaces": []}, format="json")
    assert response.status_code == 400, response.content
    message = response.json()["error"]["fields"]["namespaces"][0]
    assert "'nlp' still holds 1 unfinished workload of nlp" in message
    assert owned() == [("nlp", "nlp"), ("nlp-eval", "nlp")]


def test_a_namespace_without_unfinished_work_may_be_given_up(nlp_at_work: dict) -> None:
    do_save_tenant(nlp_at_work["team"], namespaces=["nlp"], acting_user=None)
    assert owned() == [("nlp", "nlp")]
    work: Workload = nlp_at_work["work"]
    do_transition_workload(work, "cancelled", reason="not needed", at=timezone.now())
    do_save_tenant(nlp_at_work["team"], namespaces=[], acting_user=None)
    assert owned() == []


def test_a_namespace_another_tenant_owns_is_refused_naming_namespaces(nlp_at_work: dict) -> None:
    response = nlp_at_work["api"].post(
        "/api/v1/tenants/", {"name": "tmp-t", "namespaces": ["nlp"]}, format="json"
    )
    assert response.status_code == 400, response.content
    assert "belongs to tenant nlp" in response.json()["error"]["fields"]["namespaces"][0]
    assert not Tenant.objects.filter(name="tmp-t").exists()
    assert owned() == [("nlp", "nlp"), ("nlp-eval", "nlp")]


def test_renaming_a_tenant_is_refused_naming_name(nlp_at_work: dict) -> None:
    response = nlp_at_work["api"].patch("/api/v1/tenants/nlp/", {"name": "nlp2"}, format="json")
    assert response.status_code == 400, response.content
    assert "cannot be changed" in response.json()["error"]["fields"]["name"][0]
    assert list(Tenant.objects.values_list("name", flat=True)) == ["nlp"]
    with pytest.raises(ValidationError):
        team = Tenant.objects.get(name="nlp")
        team.name = "nlp2"
        do_save_tenant(team, acting_user=None)
