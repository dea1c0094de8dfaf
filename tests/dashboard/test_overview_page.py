"""The Overview: GPUs allocated per team and flavor over the last day (from the cycles'
records), how much of each flavor is allocated now, and each cycle's duration by phase."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from dashboard_pages import live, text
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from domain_builders import queue
from two_teams import submit

from gpupool.control.models import SchedulingCycle
from gpupool.control.queries import sampled_cycles
from gpupool.dashboard.views import allocation_series, team_of_leaf_queue
from gpupool.workloads.models import Workload


def cycle(minutes_ago: float, **allocated: float) -> SchedulingCycle:
    """A succeeded cycle's record as the loop writes it, with each queue's h100 GPUs."""
    at = timezone.now() - timedelta(minutes=minutes_ago)
    gauges = {
        name: {"h100": {"allocated": gpus, "borrowed": 0.0, "lent": 0.0}}
        for name, gpus in allocated.items()
    }
    return SchedulingCycle.objects.create(
        started_at=at,
        cluster_at=at,  # the loop's cycles carry the cluster's clock (here the wall's)
        finished_at=at + timedelta(seconds=1),
        status="succeeded",
        plan_s=0.25,
        record_s=0.5,
        outcome={"queues": {"pool": {"h100": {"allocated": sum(allocated.values())}}} | gauges},
    )


def test_allocations_add_up_per_team_without_counting_a_parent_queue(pool: Any) -> None:
    cycle(30, nlp=8, vision=4)
    cycle(5, nlp=4, vision=7)
    series = allocation_series(
        sampled_cycles(timezone.now() - timedelta(hours=1), timezone.now()), team_of_leaf_queue()
    )
    assert series == {("nlp", "h100"): [8.0, 4.0], ("vision", "h100"): [4.0, 7.0]}


def test_a_teams_nested_queues_count_once_at_their_leaves(pool: Any) -> None:
    queue("nlp-big", parent=pool.nlp_queue, tenant=pool.nlp)
    assert team_of_leaf_queue() == {"nlp-big": "nlp", "vision": "vision"}


def test_sampling_keeps_the_last_cycle_of_each_minute(pool: Any) -> None:
    minute = timezone.now().replace(second=0, microsecond=0) - timedelta(minutes=10)
    ago = (timezone.now() - minute).total_seconds() / 60
    cycle(ago - 10 / 60, nlp=1)
    last = cycle(ago - 40 / 60, nlp=2)
    later = cycle(ago - 5, nlp=3)
    kept = sampled_cycles(timezone.now() - timedelta(hours=1), timezone.now())
    assert [c.pk for c in kept] == [last.pk, later.pk]


def test_the_overview_draws_allocation_utilisation_and_phases(pool: Any, page_as: Any) -> None:
    cycle(30, nlp=8, vision=4)
    cycle(5, nlp=4, vision=7)
    page = text(live(page_as("max"), "/overview/"))
    assert 'id="allocation-chart-figure"' in page and "nlp · h100" in page
    assert "73%" in page  # 11 of 15 healthy GPUs allocated at the last cycle
    assert 'id="phases-chart-figure"' in page and "plan 250 ms" in page


def test_the_overview_reads_a_fixed_number_of_queries_whatever_the_number_of_cycles(
    pool: Any, page_as: Any
) -> None:
    cycle(50, nlp=1)
    client = page_as("ada")
    with CaptureQueriesContext(connection) as few:
        client.get("/overview/")
    for minutes in range(40):
        cycle(minutes, nlp=minutes % 8, vision=2)
    with CaptureQueriesContext(connection) as many:
        assert client.get("/overview/").status_code == 200
    assert len(many) == len(few)


def test_the_overview_counts_the_work_that_waits_or_runs_now(pool: Any, page_as: Any) -> None:
    waiting = submit(pool, "waits", pool.nlp_queue, "max")
    done = submit(pool, "done", pool.nlp_queue, "max")
    Workload.objects.filter(pk=done.pk).update(state="succeeded")
    page = text(live(page_as("ada"), "/overview/"))
    assert "Workloads now" in page
    counted = '<td>{}</td><td class="number">{}</td>'
    assert counted.format("pending", 1) in page and counted.format("running", 0) in page
    assert counted.format("admitted", 0) in page and "<td>succeeded</td>" not in page
    Workload.objects.filter(pk=waiting.pk).update(state="cancelled")
    assert "Nothing waits or runs now" in text(live(page_as("ada"), "/overview/"))
