"""``/api/v1/utilization/wasters/`` names workloads by the Utilisation page's rule
(``utilization.queries.named_tenants_of``, the per-workload cost report's scope): admins and
finance every team's, leads and members their own teams'."""

from __future__ import annotations

import csv
import io
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from domain_builders import flavor, priority_class, queue, tenant, user
from rest_framework.test import APIClient

from gpupool.accounting.actions import do_open_usage
from gpupool.tenancy.actions import do_grant_site_role
from gpupool.utilization.models import ActivityWindow
from gpupool.workloads.actions import PodSetSpec, do_submit_workload

pytestmark = pytest.mark.django_db


@pytest.fixture
def people(settings: Any) -> dict[str, Any]:
    """Teams a and b each hold 4 GPUs idle for the last two hours (source simulated);
    users: a's member, b's lead, a finance user, an admin."""
    settings.GPUPOOL_UTILIZATION_SOURCE = "simulated"
    now = timezone.now()
    h100 = flavor("h100")
    priority_class("normal", default=True)
    root = queue("root")
    found = {name: user(name) for name in ("ann", "bob", "fin", "ada")}
    do_grant_site_role(found["fin"], role="finance", acting_user=None)
    do_grant_site_role(found["ada"], role="admin", acting_user=None)
    roles = {"a": {"members": (found["ann"],)}, "b": {"lead": found["bob"]}}
    for name, role in roles.items():
        team = tenant(name, namespaces=(f"team-{name}",), **role)
        on = queue(f"team-{name}", parent=root, tenant=team)
        job = do_submit_workload(f"job-{name}", queue=on,
                                 pod_sets=[PodSetSpec(1, gpus=4, flavor=h100)],
                                 at=now - timedelta(hours=3))  # fmt: skip
        do_open_usage(job, flavor=h100, gpus=4, at=now - timedelta(hours=2))
        ActivityWindow.objects.create(
            workload=job, tenant=team, queue=on, started_at=now - timedelta(minutes=50),
            ended_at=now - timedelta(minutes=10), gpus=4, observed_gpu_seconds=9_600,
            active_gpu_seconds=0, mean_utilization=0.0,
        )  # fmt: skip
    return found


def named(who: Any, fmt: str = "json") -> set[str]:
    client = APIClient()
    client.force_authenticate(who)
    answer = client.get(f"/api/v1/utilization/wasters/?format={fmt}")
    assert answer.status_code == 200
    if fmt == "csv":
        return {row["workload"] for row in csv.DictReader(io.StringIO(answer.content.decode()))}
    return {row["workload"] for row in answer.json()}


def test_finance_is_given_every_teams_workload_names_as_in_the_cost_reports(
    people: dict[str, Any],
) -> None:
    # (until 2026-12-07 none: test_finance_reads_per_workload_idle.py says why)
    assert named(people["fin"]) == {"team-a/job-a", "team-b/job-b"}
    assert named(people["fin"], "csv") == {"team-a/job-a", "team-b/job-b"}


def test_members_and_leads_are_given_their_own_teams_workloads_and_admins_all(
    people: dict[str, Any],
) -> None:
    assert named(people["ann"]) == {"team-a/job-a"}
    assert named(people["bob"]) == {"team-b/job-b"}
    assert named(people["ada"]) == {"team-a/job-a", "team-b/job-b"}
