"""Finance reads per-workload idle as it reads per-workload cost (walk finding 7): a
workload's idle GPU-hours are a line of its cost (``reports/workloads/`` gives finance every
team's, with ``idle_gpu_hours``), so ``/api/v1/utilization/wasters/`` and the Utilisation
page name every team's idle workloads to finance too (``named_tenants_of``, the per-workload
cost report's scope), without their owners (``shows_owners``: cost data, not the people);
what stays private is the workload itself (``/api/v1/workloads/`` answers finance 403)."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient
from test_waster_names import named, people  # noqa: F401 (the fixture)

from gpupool.accounting.actions import do_roll_up_usage

pytestmark = pytest.mark.django_db


def test_finance_is_given_every_teams_idle_workloads_as_the_cost_report_gives_them(
    people: dict[str, Any],  # noqa: F811
) -> None:
    # given a and b each holding 4 GPUs idle for two hours, rolled up into cost lines
    do_roll_up_usage(until=timezone.now())
    api = APIClient()
    api.force_authenticate(people["fin"])
    costed = api.get("/api/v1/reports/workloads/").json()["results"]
    # then finance reads the same workloads by name in the idle list, JSON and CSV
    expected = {"team-a/job-a", "team-b/job-b"}
    assert named(people["fin"]) == expected
    assert named(people["fin"], "csv") == expected
    # as the per-workload cost report names them to finance
    assert {f"{row['namespace']}/{row['name']}" for row in costed} == expected
    # and the rows say nobody's name
    rows = api.get("/api/v1/utilization/wasters/").json()
    assert rows and all("owner" not in row for row in rows)
    # while the workloads themselves stay the teams' own
    assert api.get("/api/v1/workloads/").status_code == 403


def test_the_utilisation_page_lists_them_to_finance_without_owners(
    people: dict[str, Any],  # noqa: F811
) -> None:
    page = Client()
    page.force_login(people["fin"])
    html = page.get("/utilization/").content.decode()
    wasters = html.split('id="utilization-wasters"')[1].split("</table>")[0]
    assert "team-a/job-a" in wasters and "team-b/job-b" in wasters
    assert "<td>ann</td>" not in wasters and "<td>bob</td>" not in wasters
    assert 'id="csv-wasters"' in html
    # and no link to a workload page finance would be refused
    assert "href=" not in wasters
    assert page.get("/workloads/team-a/job-a/").status_code in (403, 404)
