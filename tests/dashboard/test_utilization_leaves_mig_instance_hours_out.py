"""The Utilisation page (and the utilisation API and CSV, which read the same queries) counts
GPU-hours of the whole-GPU flavors, and says which MIG flavors it leaves out: a MIG flavor's
usage counts its MIG instances (``inventory.units``), never added to GPU-hours -- the Cost
page keeps them apart, and its note compares its GPU-hours with this page's.

Found walking the demo as admin and finance: the team table's Allocated, the per-team and pool
charts, the idle lists and the API added the MIG notebooks' MIG instance-hours to GPU-hours,
and the pool chart's healthy capacity added the MIG flavor's 32 MIG instances to 406 GPUs.

The pool (conftest): h100 nodes n1 and n2 (15 healthy GPUs), and MIG node m1 of
``a100-3g.40gb`` beside them (16 MIG instances). For the last two hours nlp's ``wl-gpu`` held
4 h100 GPUs, half of the time busy, and its ``wl-mig`` 4 MIG instances, all of the time idle:
nlp's allocated GPU-hours are 8 (4 active, 4 idle), not 16."""

from __future__ import annotations

import json
import re
from datetime import timedelta
from typing import Any

import pytest
from dashboard_pages import live, text
from django.utils import timezone
from domain_builders import MIG_FLAVOR, mig_beside

from gpupool.accounting.actions import do_close_usage, do_open_usage
from gpupool.utilization.models import ActivityWindow
from gpupool.workloads.actions import PodSetSpec, do_submit_workload

URL = "/utilization/"


def held(pool: Any, name: str, flavor: Any, units: int, busy: float) -> Any:
    """nlp's workload holding ``units`` of ``flavor`` for the last two hours, the source seeing
    it work the fraction ``busy`` of each 10-minute window."""
    now = timezone.now()
    workload = do_submit_workload(
        name,
        queue=pool.nlp_queue,
        pod_sets=[PodSetSpec(1, gpus=units, flavor=flavor)],
        submitter=pool.users["max"],
        at=now - timedelta(hours=3),
    )
    do_open_usage(workload, flavor=flavor, gpus=units, at=now - timedelta(hours=2))
    do_close_usage(workload, at=now)
    for step in range(12):
        start = now - timedelta(hours=2) + step * timedelta(minutes=10)
        seen = units * 600.0
        ActivityWindow.objects.create(
            workload=workload, tenant=pool.nlp, queue=pool.nlp_queue, started_at=start,
            ended_at=start + timedelta(minutes=10), gpus=units, observed_gpu_seconds=seen,
            active_gpu_seconds=seen * busy, mean_utilization=60.0 * busy,
            last_active_at=start + timedelta(minutes=10) if busy else None,
        )  # fmt: skip
    return workload


@pytest.fixture
def both(pool: Any) -> Any:
    mig_beside(pool)
    held(pool, "wl-gpu", pool.h100, 4, busy=0.5)
    held(pool, "wl-mig", pool.mig, 4, busy=0.0)
    return pool


def words(html: str) -> str:
    return " ".join(re.sub(r"<[^>]+>", " ", html).split())


def test_the_team_table_counts_gpu_hours_and_names_the_mig_flavor_left_out(
    both: Any, page_as: Any
) -> None:
    page = text(page_as("ada").get(URL))

    teams = words(page.split('id="utilization-teams"')[1].split("</table>")[0])
    assert "nlp 8 GPU-h 4 GPU-h 4 GPU-h" in teams, teams  # not 16 allocated, 12 idle
    note = words(page.split('id="utilization-units">')[1].split("</p>")[0])
    assert note.startswith(
        f"In GPU-hours, of the whole-GPU flavors: the MIG flavors' MIG instance-hours "
        f"({MIG_FLAVOR}) are not added to them"
    ), note
    # The idle MIG notebook held no GPU-hour, so it is no GPU-hour waster.
    wasters = page.split('id="utilization-wasters"')[1].split("</table>")[0]
    assert "nlp/wl-gpu" in wasters and "wl-mig" not in wasters


def test_the_pool_charts_capacity_is_the_whole_gpu_flavors_healthy_gpus(
    both: Any, page_as: Any
) -> None:
    part = text(live(page_as("fin"), URL))

    figure = json.loads(part.split('id="pool-chart-figure"')[1].split(">", 1)[1].split("<")[0])
    (capacity,) = [trace for trace in figure["data"] if trace["name"] == "healthy capacity"]
    assert set(capacity["y"]) == {15.0}  # n1 and n2's healthy GPUs, not 15 + 16 MIG instances
    allocated = next(trace for trace in figure["data"] if trace["name"] == "allocated")
    assert max(allocated["y"]) <= 4.0  # nlp's 4 h100 GPUs at most, never its MIG instances


def test_the_utilization_api_and_its_csv_count_the_same_gpu_hours(both: Any, page_as: Any) -> None:
    client = page_as("fin")
    (row,) = client.get("/api/v1/utilization/tenants/").json()
    assert (row["tenant"], row["allocated_gpu_hours"], row["idle_gpu_hours"]) == ("nlp", 8.0, 4.0)
    lines = text(client.get("/api/v1/utilization/tenants/?format=csv")).splitlines()
    assert lines[0].startswith("tenant,allocated_gpu_hours,active_gpu_hours,idle_gpu_hours,")
    assert lines[1].split(",")[:4] == ["nlp", "8.0", "4.0", "4.0"], lines
