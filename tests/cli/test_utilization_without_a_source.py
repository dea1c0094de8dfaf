"""`manage.py gpupool utilization` without a utilisation source says so and calls no
GPU-hour idle: the table gives allocation alone ("not measured"), ``--json`` the API's rows
(``source`` ``none``, the measured figures null). With a source, unmeasured time stays idle."""

from __future__ import annotations

import json
from datetime import timedelta
from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command
from domain_builders import flavor, priority_class, queue, tenant

from gpupool.accounting.actions import do_open_usage
from gpupool.control.clock import pool_clock
from gpupool.workloads.actions import PodSetSpec, do_submit_workload

pytestmark = pytest.mark.django_db

MEASURED = ("active_gpu_hours", "idle_gpu_hours", "unobserved_gpu_hours", "active_share")


@pytest.fixture
def held() -> None:
    """Team a holds 4 GPUs for the last half hour; no activity recorded."""
    now = pool_clock()
    h100 = flavor("h100")
    priority_class("normal", default=True)
    on = queue("team-a", parent=queue("root"), tenant=tenant("a", namespaces=("team-a",)))
    job = do_submit_workload(
        "job", queue=on, pod_sets=[PodSetSpec(1, gpus=4, flavor=h100)], at=now - timedelta(hours=1)
    )
    do_open_usage(job, flavor=h100, gpus=4, at=now - timedelta(minutes=30))


def utilization(*arguments: str) -> str:
    out = StringIO()
    call_command("gpupool", "utilization", *arguments, stdout=out)
    return out.getvalue()


@pytest.mark.usefixtures("held")
def test_the_cli_table_without_a_source_says_so_and_shows_no_idle(settings: Any) -> None:
    settings.GPUPOOL_UTILIZATION_SOURCE = "none"

    text = utilization()

    assert "No utilisation source is configured" in text
    (line,) = [line for line in text.splitlines() if line.startswith("a ")]
    assert line.split()[:2] == ["a", "2.00"]
    assert "not measured" in line
    assert "idle" not in text.splitlines()[-1]  # the team's line names no idle figure


@pytest.mark.usefixtures("held")
def test_the_cli_json_without_a_source_has_the_apis_nulls(settings: Any) -> None:
    settings.GPUPOOL_UTILIZATION_SOURCE = "kubernetes"  # a cluster without Prometheus

    document = json.loads(utilization("--json"))

    assert document["source"] == "none"
    (row,) = document["tenants"]
    assert row["source"] == "none"
    assert row["allocated_gpu_hours"] == pytest.approx(2.0, abs=0.01)
    assert {name: row[name] for name in MEASURED} == dict.fromkeys(MEASURED)


@pytest.mark.usefixtures("held")
def test_the_cli_with_a_source_counts_unmeasured_time_as_idle(settings: Any) -> None:
    settings.GPUPOOL_UTILIZATION_SOURCE = "simulated"

    document = json.loads(utilization("--json"))
    text = utilization()

    assert document["source"] == "simulated"
    (row,) = document["tenants"]
    assert row["idle_gpu_hours"] == row["unobserved_gpu_hours"] == pytest.approx(2.0, abs=0.01)
    assert "No utilisation source" not in text
