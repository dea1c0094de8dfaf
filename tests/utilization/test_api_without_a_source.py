"""Without a utilisation source nothing was measured, so the API calls no GPU-hour idle: the
teams' rows say ``source: none`` with their measured figures null (empty in the CSV), and the
wasters' list is refused with ``not_measured`` rather than rank unmeasured hours as idle. The
schema says both."""

from __future__ import annotations

import csv
import io
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from domain_builders import flavor, priority_class, queue, tenant, user
from drf_spectacular.generators import SchemaGenerator
from rest_framework.test import APIClient

from gpupool.accounting.actions import do_open_usage
from gpupool.tenancy.actions import do_grant_site_role
from gpupool.workloads.actions import PodSetSpec, do_submit_workload

pytestmark = pytest.mark.django_db

MEASURED = ("active_gpu_hours", "idle_gpu_hours", "unobserved_gpu_hours", "active_share")


@pytest.fixture
def finance() -> APIClient:
    """Team a holds 4 GPUs for the last two hours (no activity recorded: nothing measured);
    a finance user's client."""
    now = timezone.now()
    h100 = flavor("h100")
    priority_class("normal", default=True)
    on = queue("team-a", parent=queue("root"), tenant=tenant("a", namespaces=("team-a",)))
    job = do_submit_workload(
        "job", queue=on, pod_sets=[PodSetSpec(1, gpus=4, flavor=h100)], at=now - timedelta(hours=3)
    )
    do_open_usage(job, flavor=h100, gpus=4, at=now - timedelta(hours=2))
    person = user("fin")
    do_grant_site_role(person, role="finance", acting_user=None)
    client = APIClient()
    client.force_authenticate(person)
    return client


@pytest.fixture
def no_source(settings: Any) -> None:
    settings.GPUPOOL_UTILIZATION_SOURCE = "none"


@pytest.mark.usefixtures("no_source")
def test_a_teams_row_without_a_source_says_so_and_counts_nothing_idle(finance: APIClient) -> None:
    answer = finance.get("/api/v1/utilization/tenants/")

    assert answer.status_code == 200
    (row,) = answer.json()
    # The default window, the last 24 hours (utilization.windows), holds both hours of it.
    assert row["allocated_gpu_hours"] == pytest.approx(8.0, abs=0.01)
    assert row["source"] == "none"
    assert {name: row[name] for name in MEASURED} == dict.fromkeys(MEASURED)


@pytest.mark.usefixtures("no_source")
def test_the_teams_csv_without_a_source_leaves_idle_empty_and_names_no_source(
    finance: APIClient,
) -> None:
    answer = finance.get("/api/v1/utilization/tenants/?format=csv")

    (row,) = csv.DictReader(io.StringIO(answer.content.decode()))
    assert row["tenant"] == "a" and float(row["allocated_gpu_hours"]) == pytest.approx(8.0, 0.01)
    assert row["source"] == "none"
    assert [row[name] for name in MEASURED] == [""] * len(MEASURED)


def test_a_cluster_without_prometheus_has_no_source_either(
    finance: APIClient, settings: Any
) -> None:
    settings.GPUPOOL_UTILIZATION_SOURCE = "kubernetes"

    (row,) = finance.get("/api/v1/utilization/tenants/").json()

    assert row["source"] == "none" and row["idle_gpu_hours"] is None


def test_with_a_source_the_row_names_it_and_unmeasured_time_is_idle(
    finance: APIClient, settings: Any
) -> None:
    """The simulated source saw nothing of this workload: its hours are idle, all unobserved."""
    settings.GPUPOOL_UTILIZATION_SOURCE = "simulated"

    (row,) = finance.get("/api/v1/utilization/tenants/").json()

    assert row["source"] == "simulated"
    assert row["idle_gpu_hours"] == row["unobserved_gpu_hours"] == pytest.approx(8.0, abs=0.01)


@pytest.mark.usefixtures("no_source")
def test_the_wasters_without_a_source_are_refused_not_ranked(finance: APIClient) -> None:
    answer = finance.get("/api/v1/utilization/wasters/")

    assert answer.status_code == 409
    error = answer.json()["error"]
    assert error["code"] == "not_measured"
    assert "GPUPOOL_UTILIZATION_SOURCE" in error["message"]


@pytest.mark.usefixtures("no_source")
def test_the_wasters_csv_without_a_source_is_the_errors_row(finance: APIClient) -> None:
    answer = finance.get("/api/v1/utilization/wasters/?format=csv")

    assert answer.status_code == 409
    (row,) = csv.DictReader(io.StringIO(answer.content.decode()))
    assert (row["status"], row["code"]) == ("409", "not_measured")


@pytest.mark.usefixtures("no_source")
def test_a_bad_limit_without_a_source_is_still_refused_naming_the_field(
    finance: APIClient,
) -> None:
    answer = finance.get("/api/v1/utilization/wasters/?limit=0")

    assert answer.status_code == 400
    assert "limit" in answer.json()["error"]["fields"]


def test_the_schema_says_the_figures_may_be_null_and_the_wasters_may_be_409() -> None:
    schema = SchemaGenerator().get_schema(request=None, public=True)
    row = schema["components"]["schemas"]["TenantUtilizationRow"]["properties"]
    wasters = schema["paths"]["/api/v1/utilization/wasters/"]["get"]["responses"]

    assert [name for name in MEASURED if row[name].get("nullable")] == list(MEASURED)
    assert "none" in row["source"]["description"]
    assert wasters["409"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/Error"
    }
