"""The API's utilisation figures: per tenant and the top wasters, scoped, as JSON and CSV."""

from __future__ import annotations

import csv
import io
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from domain_builders import flavor, priority_class, queue, tenant, user
from rest_framework.test import APIClient

from gpupool.accounting.actions import do_open_usage
from gpupool.tenancy.actions import do_grant_site_role
from gpupool.utilization.models import ActivityWindow
from gpupool.workloads.actions import PodSetSpec, do_submit_workload

pytestmark = pytest.mark.django_db


@pytest.fixture
def teams() -> dict[str, object]:
    """Teams a and b each run a 4-GPU workload for the last two hours, a's half busy, b's
    idle; users: a's member, b's lead, an outsider, a finance user."""
    now = timezone.now()
    h100 = flavor("h100")
    priority_class("normal", default=True)
    root = queue("root")
    people = {name: user(name) for name in ("ann", "bob", "out", "fin")}
    do_grant_site_role(people["fin"], role="finance", acting_user=None)
    roles = {"a": {"members": (people["ann"],)}, "b": {"lead": people["bob"]}}
    for name, role in roles.items():
        team = tenant(name, namespaces=(f"team-{name}",), **role)
        on = queue(f"team-{name}", parent=root, tenant=team)
        job = do_submit_workload("job", queue=on, pod_sets=[PodSetSpec(1, gpus=4, flavor=h100)],
                                 at=now - timedelta(hours=3))  # fmt: skip
        do_open_usage(job, flavor=h100, gpus=4, at=now - timedelta(hours=2))
        ActivityWindow.objects.create(
            workload=job, tenant=team, queue=on, started_at=now - timedelta(minutes=50),
            ended_at=now - timedelta(minutes=10), gpus=4, observed_gpu_seconds=9_600,
            active_gpu_seconds=4_800 if name == "a" else 0, mean_utilization=40.0,
        )  # fmt: skip
    return people


def get(who: object, url: str) -> object:
    client = APIClient()
    client.force_authenticate(who)
    return client.get(url)


def test_a_member_sees_only_their_tenants_figures(teams: dict) -> None:
    answer = get(teams["ann"], "/api/v1/utilization/tenants/")

    assert answer.status_code == 200
    (row,) = answer.json()
    assert row["tenant"] == "a"
    # The default window, the last 24 hours (utilization.windows): both hours of the usage.
    assert row["allocated_gpu_hours"] == pytest.approx(8.0, abs=0.01)
    assert row["active_gpu_hours"] == pytest.approx(4_800 / 3600, abs=0.01)


def test_finance_sees_every_tenant_and_an_outsider_nothing(teams: dict) -> None:
    finance = get(teams["fin"], "/api/v1/utilization/tenants/").json()
    outsider = get(teams["out"], "/api/v1/utilization/tenants/")

    assert [row["tenant"] for row in finance] == ["a", "b"]
    assert outsider.status_code == 403


def test_the_top_wasters_of_a_leads_tenant(teams: dict) -> None:
    rows = get(teams["bob"], "/api/v1/utilization/wasters/").json()

    # The last 24 hours: held 8 GPU-h, never active; the source observed 9,600 GPU-s of it.
    # (The usage began inside the window: the few milliseconds since the fixture ran count.)
    assert [(r["workload"], r["idle_gpu_hours"], r["unobserved_gpu_hours"]) for r in rows] == [
        ("team-b/job", pytest.approx(8.0, abs=0.01), pytest.approx(19_200 / 3600, abs=0.01))
    ]  # held 28,800 GPU-s, observed 9,600


def test_the_figures_come_as_csv(teams: dict) -> None:
    answer = get(teams["fin"], "/api/v1/utilization/tenants/?format=csv")

    assert answer["Content-Type"].startswith("text/csv")
    lines = answer.content.decode().splitlines()
    assert lines[0] == (
        "tenant,allocated_gpu_hours,active_gpu_hours,idle_gpu_hours,unobserved_gpu_hours,"
        "active_share,source"
    )
    assert [line.split(",")[0] for line in lines[1:]] == ["a", "b"]


def test_no_rows_still_come_as_csv_with_their_header(teams: dict) -> None:
    answer = get(teams["fin"], "/api/v1/utilization/wasters/?format=csv&until=2000-01-01T00:00:00Z")

    assert answer.status_code == 200
    assert answer.content.decode() == (
        "workload,queue,tenant,held_gpu_hours,idle_gpu_hours,unobserved_gpu_hours\r\n"
    )
    assert answer["Content-Disposition"] == 'attachment; filename="utilization-wasters.csv"'


def test_a_bad_window_asked_as_csv_is_refused_in_a_row_that_says_why(teams: dict) -> None:
    """The error's fields as the reports' CSV gives them, not the JSON body's text."""
    answer = get(teams["fin"], "/api/v1/utilization/tenants/?since=yesterday&format=csv")

    assert answer.status_code == 400
    assert answer["Content-Type"].startswith("text/csv")
    assert "Content-Disposition" not in answer  # an error is no download
    (row,) = csv.DictReader(io.StringIO(answer.content.decode()))
    assert row["status"] == "400" and row["code"] == "invalid"
    assert row["message"].startswith("since: an ISO 8601 time with a zone")


def test_a_bad_window_is_refused_with_the_field(teams: dict) -> None:
    answer = get(teams["fin"], "/api/v1/utilization/tenants/?since=yesterday")

    assert answer.status_code == 400
    assert "since" in str(answer.json())


@pytest.mark.parametrize("path", ["tenants", "wasters"])
@pytest.mark.parametrize("name", ["since", "until"])
@pytest.mark.parametrize("moment", ["2026-12-01T25:00:00Z", "2026-02-31T10:00:00Z"])
def test_a_well_formed_time_that_is_no_real_time_is_refused_naming_it_not_a_500(
    teams: dict, path: str, name: str, moment: str
) -> None:
    answer = get(teams["fin"], f"/api/v1/utilization/{path}/?{name}={moment}")

    assert answer.status_code == 400
    assert answer.json()["error"]["fields"] == {
        name: ["an ISO 8601 time with a zone, e.g. 2026-12-01T10:00:00Z"]
    }


def test_the_queries_do_not_grow_with_the_rows(teams: dict) -> None:
    # A team's own member: finance is given no workload names, and asks nothing for them.
    with CaptureQueriesContext(connection) as queries:
        answer = get(teams["ann"], "/api/v1/utilization/wasters/")
    assert answer.status_code == 200 and answer.json()
    assert len(queries) <= 8


def test_a_window_that_ends_before_it_starts_says_which_way_round_it_must_be(teams: dict) -> None:
    since, until = "2026-12-02T00:00:00Z", "2026-12-01T00:00:00Z"
    answer = get(teams["fin"], f"/api/v1/utilization/tenants/?since={since}&until={until}")

    assert answer.status_code == 400
    (message,) = answer.json()["error"]["fields"]["since"]
    assert (
        message == "must be before until (2026-12-02T00:00:00+00:00 >= 2026-12-01T00:00:00+00:00)"
    )


@pytest.mark.parametrize("limit", ["-1", "0", "101", "abc"])
def test_a_limit_outside_one_to_a_hundred_is_refused_not_clamped(teams: dict, limit: str) -> None:
    answer = get(teams["fin"], f"/api/v1/utilization/wasters/?limit={limit}")

    assert answer.status_code == 400
    assert answer.json()["error"]["fields"] == {"limit": ["a whole number from 1 to 100"]}
