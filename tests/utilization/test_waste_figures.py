"""Allocated, active and idle GPU-hours per tenant, checked against a hand count."""

from __future__ import annotations

import json
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.utils import timezone
from domain_builders import flavor, priority_class, queue, tenant

from gpupool.accounting.actions import do_close_usage, do_open_usage
from gpupool.utilization.models import ActivityWindow
from gpupool.utilization.queries import tenant_utilization, top_wasters, workload_sparkline
from gpupool.workloads.actions import PodSetSpec, do_submit_workload
from gpupool.workloads.models import Workload

pytestmark = pytest.mark.django_db


def window(workload: Workload, start: object, end: object, observed: float, active: float,
           mean: float = 50.0) -> ActivityWindow:  # fmt: skip
    return ActivityWindow.objects.create(
        workload=workload, tenant=workload.queue.tenant, queue=workload.queue, started_at=start,
        ended_at=end, gpus=4, observed_gpu_seconds=observed, active_gpu_seconds=active,
        mean_utilization=mean, last_active_at=end if active else None,
    )  # fmt: skip


@pytest.fixture
def pool() -> dict[str, Workload]:
    """Now T. Team a's 4-GPU ``train`` holds its GPUs from T-2h on; the source saw it work
    7,200 GPU-s in [T-90m, T-30m] and 3,600 GPU-s in [T-30m, T]. Team b's 2-GPU ``notebook``
    held its GPUs from T-30m to T-15m and the source saw it do nothing."""
    now = timezone.now()
    h100 = flavor("h100")
    priority_class("normal", default=True)
    root = queue("root")
    a = queue("team-a", parent=root, tenant=tenant("a", namespaces=("team-a",)))
    b = queue("team-b", parent=root, tenant=tenant("b", namespaces=("team-b",)))
    earlier = now - timedelta(hours=3)
    train = do_submit_workload("train", queue=a, pod_sets=[PodSetSpec(1, gpus=4, flavor=h100)],
                               at=earlier)  # fmt: skip
    notebook = do_submit_workload(
        "notebook", queue=b, pod_sets=[PodSetSpec(1, gpus=2, flavor=h100)], at=earlier
    )
    do_open_usage(train, flavor=h100, gpus=4, at=now - timedelta(hours=2))
    do_open_usage(notebook, flavor=h100, gpus=2, at=now - timedelta(minutes=30))
    do_close_usage(notebook, at=now - timedelta(minutes=15))
    window(train, now - timedelta(minutes=90), now - timedelta(minutes=30), 14_400, 7_200)
    window(train, now - timedelta(minutes=30), now, 7_200, 3_600, mean=35.0)
    window(notebook, now - timedelta(minutes=30), now - timedelta(minutes=15), 1_800, 0, 0.0)
    return {"train": train, "notebook": notebook, "now": now}  # type: ignore[dict-item]


def test_the_last_hours_figures_per_tenant_match_the_hand_count(pool: dict) -> None:
    now = pool["now"]
    rows = tenant_utilization(now - timedelta(hours=1), now)

    # a: 4 GPUs x 1 h allocated; active: half of 7,200 GPU-s (the window's half inside the
    # hour) plus 3,600 GPU-s = 7,200 GPU-s = 2 GPU-h; idle 2. b: 2 GPUs x 15 min, never active.
    assert rows == [
        {"tenant": "a", "allocated_gpu_hours": 4.0, "active_gpu_hours": 2.0,
         "idle_gpu_hours": 2.0, "unobserved_gpu_hours": 0.0, "active_share": 0.5},
        {"tenant": "b", "allocated_gpu_hours": 0.5, "active_gpu_hours": 0.0,
         "idle_gpu_hours": 0.5, "unobserved_gpu_hours": 0.0, "active_share": 0.0},
    ]  # fmt: skip


def test_usage_intervals_that_straddle_either_edge_count_only_their_part_inside(
    pool: dict,
) -> None:
    """The database clips each interval to the window (``allocated_gpu_hours`` sums in SQL):
    an open one, one that ends after the window and one that starts before it."""
    from gpupool.utilization.queries import allocated_gpu_hours

    now = pool["now"]
    # [T-2h, T-20m]: a's open interval from T-2h, 100 min of 4 GPUs; b's 2 GPUs from T-30m to
    # T-15m cut at T-20m, 10 min.
    early = allocated_gpu_hours(now - timedelta(hours=2), now - timedelta(minutes=20))
    assert early == pytest.approx({"a": 4 * 100 / 60, "b": 2 * 10 / 60})
    # [T-25m, T]: a 25 min; b from T-25m to T-15m, 10 min.
    late = allocated_gpu_hours(now - timedelta(minutes=25), now)
    assert late == pytest.approx({"a": 4 * 25 / 60, "b": 2 * 10 / 60})
    # Only team b, and a window after b's interval ended: a is left out, b held nothing.
    assert (
        allocated_gpu_hours(now - timedelta(minutes=10), now, [pool["notebook"].queue.tenant_id])
        == {}
    )


def test_gpupool_utilization_prints_the_same_figures_as_json(pool: dict) -> None:
    # The command's hour ends a moment after the fixture's now: the figures agree to 0.01.
    out = StringIO()
    call_command("gpupool", "utilization", "--since", "1h", "--json", stdout=out)

    document = json.loads(out.getvalue())
    figures = {row["tenant"]: row for row in document["tenants"]}
    assert figures["a"]["allocated_gpu_hours"] == pytest.approx(4.0, abs=0.01)
    assert figures["a"]["active_gpu_hours"] == pytest.approx(2.0, abs=0.01)
    assert figures["b"]["idle_gpu_hours"] == pytest.approx(0.5, abs=0.01)


def test_gpupool_utilization_prints_a_table_by_default(pool: dict) -> None:
    out = StringIO()
    call_command("gpupool", "utilization", "--since", "90m", stdout=out)

    lines = out.getvalue().splitlines()
    assert lines[1].split() == [
        "tenant", "allocated", "active", "idle", "unobserved", "active", "%"]  # fmt: skip
    assert lines[2].split()[0] == "a" and lines[3].split()[0] == "b"


def test_the_top_wasters_are_the_workloads_idle_longest(pool: dict) -> None:
    now = pool["now"]
    rows = top_wasters(now - timedelta(hours=2), now)

    # train: held 4 GPUs x 2 h = 8 GPU-h, active 7,200 + 3,600 GPU-s = 3 GPU-h: idle 5 GPU-h,
    # of which the source did not observe 8 - (14,400 + 7,200) / 3,600 = 2. notebook: 0.5 h,
    # all of it observed.
    figures = [
        (r["workload"], r["tenant"], r["held_gpu_hours"], r["idle_gpu_hours"],
         r["unobserved_gpu_hours"]) for r in rows
    ]  # fmt: skip
    assert figures == [
        ("team-a/train", "a", 8.0, 5.0, 2.0),
        ("team-b/notebook", "b", 0.5, 0.5, 0.0),
    ]


def test_teams_queues_and_workloads_count_idle_alike(pool: dict) -> None:
    """Idle is held less active in every table, as the cost reports count it: a team's idle
    is its queues' idle and its workloads' idle, whether or not the source observed the time
    (the Utilisation page showed 430 idle GPU-hours for a team and 406 for its one queue when
    the queue table counted only the time the source had seen)."""
    from gpupool.utilization.queries import queue_waste

    now = pool["now"]
    since = now - timedelta(hours=2)
    teams = {row["tenant"]: row for row in tenant_utilization(since, now)}
    queues = {row["tenant"]: row for row in queue_waste(since, now)}
    workloads = {row["tenant"]: row for row in top_wasters(since, now)}

    for name in ("a", "b"):
        assert teams[name]["allocated_gpu_hours"] == queues[name]["held_gpu_hours"]
        for field in ("idle_gpu_hours", "unobserved_gpu_hours"):
            assert teams[name][field] == queues[name][field] == workloads[name][field]
    assert teams["a"]["idle_gpu_hours"] == 5.0 and teams["a"]["unobserved_gpu_hours"] == 2.0


def test_a_workloads_sparkline_is_its_mean_use_window_by_window(pool: dict) -> None:
    now = pool["now"]
    points = workload_sparkline(pool["train"], now - timedelta(hours=2), now)

    assert [p["utilization"] for p in points] == [50.0, 35.0]


def test_the_hourly_series_is_the_hand_count_before_and_after_the_roll_up() -> None:
    """Team a holds 4 GPUs from 09:30 to 12:00; the source saw them work 7,200 GPU-s in
    [09:30, 10:30] (half in each hour), 3,600 in [10:30, 11:00] and nothing after. Hours
    9, 10, 11: allocated 2, 4, 4 GPU-h; active 1, 2, 0. The same from the raw facts and, once
    the hours are rolled up, from the roll-up."""
    from datetime import datetime

    from gpupool.accounting.actions import do_roll_up_usage
    from gpupool.utilization.queries import hourly_utilization

    at = datetime.fromisoformat("2026-03-10T09:00:00+00:00")
    h = timedelta(hours=1)
    h100 = flavor("h100")
    priority_class("normal", default=True)
    a = queue("team-a", parent=queue("root"), tenant=tenant("a", namespaces=("team-a",)))
    job = do_submit_workload("job", queue=a, pod_sets=[PodSetSpec(1, gpus=4, flavor=h100)],
                             at=at)  # fmt: skip
    do_open_usage(job, flavor=h100, gpus=4, at=at + h / 2)
    do_close_usage(job, at=at + 3 * h)
    window(job, at + h / 2, at + 3 * h / 2, 14_400, 7_200)
    window(job, at + 3 * h / 2, at + 2 * h, 7_200, 3_600)
    window(job, at + 2 * h, at + 3 * h, 14_400, 0)
    expected = ([at, at + h, at + 2 * h], {"a": [2.0, 4.0, 4.0]}, {"a": [1.0, 2.0, 0.0]})

    assert hourly_utilization(at + h / 4, at + 3 * h) == expected
    do_roll_up_usage(until=at + 3 * h)
    assert hourly_utilization(at + h / 4, at + 3 * h) == expected
