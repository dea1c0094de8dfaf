"""Walk s23: the page of a notebook reclaimed for sitting idle ("It ends here and is not
requeued") drew its timeline's Preempted bar on to now, hour after hour, squeezing its life
(pending, running) into the chart's first tenth, though the work had ended as a succeeded
one does. The timeline ends where the work ended (``choices.is_unfinished``, the cancel's rule);
preempted work about to be requeued still waits on to now. And the page of work just submitted
(from the form, its first view) drew a chart of no bar whose axis repeated one moment four
times ("10:54:09 10:54:09 ..."): no chart until a state has lasted; the table says the moment."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest
from dashboard_pages import text
from django.utils import timezone

from gpupool.dashboard.views import chart_time, state_spans
from gpupool.inventory.models import Node
from gpupool.workloads.actions import (
    PlacementSpec,
    PodSetSpec,
    do_submit_workload,
    do_transition_workload,
)
from gpupool.workloads.models import Workload

pytestmark = pytest.mark.django_db

T0 = datetime.fromisoformat("2026-12-07T08:54:00+00:00")
RECLAIMED_AT = T0 + timedelta(hours=1)
NOW = T0 + timedelta(hours=15)


def preempted(pool: Any, name: str, *, ends: bool) -> Workload:
    """A notebook of nlp run on n2 from T0 + 10 min, preempted at RECLAIMED_AT; ``ends``: not
    requeued (the loop stamps ``finished_at`` on a preemption that ends the work)."""
    spec = PodSetSpec(1, gpus=1, flavor=pool.h100, image="jupyter")
    workload = do_submit_workload(name, queue=pool.nlp_queue, pod_sets=[spec], at=T0)
    start = T0 + timedelta(minutes=10)
    placement = PlacementSpec("main", 0, Node.objects.get(name="n2"), [0])
    do_transition_workload(workload, "admitted", reason="fits", at=start, placements=[placement])
    do_transition_workload(workload, "running", reason="started", at=start)
    do_transition_workload(workload, "preempted", reason="evicted (idle)", at=RECLAIMED_AT)
    if ends:
        Workload.objects.filter(pk=workload.pk).update(finished_at=RECLAIMED_AT)
    workload.refresh_from_db()
    return workload


def test_work_that_ended_preempted_has_no_bar_after_its_end(pool: Any) -> None:
    spans = state_spans(preempted(pool, "notebook", ends=True), NOW)
    assert [state for state, _, _ in spans] == ["pending", "admitted", "running"]
    assert max(end for _, _, end in spans) == chart_time(RECLAIMED_AT)


def test_preempted_work_about_to_be_requeued_waits_on_to_now(pool: Any) -> None:
    spans = state_spans(preempted(pool, "requeued", ends=False), NOW)
    assert spans[-1] == ("preempted", chart_time(RECLAIMED_AT), chart_time(NOW))


def test_work_just_submitted_has_no_chart_yet_and_its_table(pool: Any, page_as: Any) -> None:
    spec = PodSetSpec(1, gpus=1, flavor=pool.h100, image="python:3.12")
    # Stamped by the pool's clock, which a simulated cluster runs ahead of the wall clock.
    at = timezone.now() + timedelta(minutes=5)
    do_submit_workload("fresh", queue=pool.nlp_queue, pod_sets=[spec], at=at)
    page = text(page_as("max").get("/workloads/nlp/fresh/"))
    assert 'id="timeline-chart-figure"' not in page
    assert "<td>submitted</td>" in page  # the timeline's table: its one move
    do_submit_workload("older", queue=pool.nlp_queue, pod_sets=[spec], at=at - timedelta(hours=1))
    page = text(page_as("max").get("/workloads/nlp/older/"))
    assert 'id="timeline-chart-figure"' in page
