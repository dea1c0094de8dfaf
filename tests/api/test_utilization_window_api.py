"""``?window=`` on the utilisation API: the Utilisation page's windows (``6h``, ``24h``,
``7d`` before ``until``). Before, the API did not read it at all: ``?window=7d`` or
``?window=bogus`` answered the default last hour as if asked."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from domain_builders import flavor, priority_class, queue, tenant, user
from rest_framework.test import APIClient

from gpupool.accounting.actions import do_open_usage
from gpupool.control.clock import pool_clock
from gpupool.tenancy.actions import do_grant_site_role
from gpupool.workloads.actions import PodSetSpec, do_submit_workload

pytestmark = pytest.mark.django_db

URLS = ("/api/v1/utilization/tenants/", "/api/v1/utilization/wasters/")


@pytest.fixture
def finance() -> APIClient:
    """Team a has held 4 GPUs for the last 10 hours; a finance user's client."""
    now = pool_clock()
    h100 = flavor("h100")
    priority_class("normal", default=True)
    team = tenant("a", namespaces=("team-a",))
    on = queue("team-a", parent=queue("root"), tenant=team)
    job = do_submit_workload(
        "job", queue=on, pod_sets=[PodSetSpec(1, gpus=4, flavor=h100)], at=now - timedelta(hours=11)
    )
    do_open_usage(job, flavor=h100, gpus=4, at=now - timedelta(hours=10))
    fin = user("fin")
    do_grant_site_role(fin, role="finance", acting_user=None)
    client = APIClient()
    client.force_authenticate(fin)
    return client


def allocated(answer: Any) -> float:
    assert answer.status_code == 200, answer.content
    (row,) = answer.json()
    return float(row["allocated_gpu_hours"])


def test_a_named_window_reaches_that_far_back(finance: APIClient) -> None:
    url = "/api/v1/utilization/tenants/"
    # The default window, the page's 24 hours (utilization.windows): all 10 hours of use.
    assert allocated(finance.get(url)) == pytest.approx(40.0, abs=0.05)
    assert allocated(finance.get(url + "?window=")) == pytest.approx(40.0, abs=0.05)  # as since=
    assert allocated(finance.get(url + "?window=6h")) == pytest.approx(24.0, abs=0.05)
    assert allocated(finance.get(url + "?window=24h")) == pytest.approx(40.0, abs=0.05)
    until = (pool_clock() - timedelta(hours=8)).isoformat().replace("+00:00", "Z")
    assert allocated(finance.get(f"{url}?window=6h&until={until}")) == pytest.approx(
        8.0, abs=0.05
    )  # 6 h before until: the usage began 2 h before it


@pytest.mark.parametrize("url", URLS)
@pytest.mark.parametrize("value", ["bogus", "-1h", "1h", "7D", " 6h"])
def test_an_unknown_window_is_a_400_naming_it_and_the_windows(
    finance: APIClient, url: str, value: str
) -> None:
    answer = finance.get(f"{url}?window={value}")
    assert answer.status_code == 400
    fields = answer.json()["error"]["fields"]
    assert list(fields) == ["window"]
    assert fields["window"] == [
        f"{value!r} is not a window: one of 6h, 24h, 7d (or give since and until)"
    ]


def test_an_unknown_window_as_csv_is_a_row_saying_why(finance: APIClient) -> None:
    answer = finance.get("/api/v1/utilization/tenants/?window=1w&format=csv")
    assert answer.status_code == 400 and "Content-Disposition" not in answer
    assert "window: '1w' is not a window: one of 6h, 24h, 7d" in answer.content.decode()


def test_window_and_since_together_are_refused(finance: APIClient) -> None:
    answer = finance.get("/api/v1/utilization/tenants/?window=6h&since=2026-12-01T00:00:00Z")
    assert answer.status_code == 400
    assert answer.json()["error"]["fields"] == {"window": ["give window or since, not both"]}
