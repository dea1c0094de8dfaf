"""Walk-through s16: a pending workload's estimated start is refreshed about once a minute,
so the one a page reads may lie before the pool's now. The workload page and the workloads
list then say it is due, in words, with the time it was estimated for, not a past time as if
it were still to come; the same for the moment the estimates looked ahead to
(``estimate_not_before``). A start still to come reads as before."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from dashboard_pages import live, rows, text
from django.utils import timezone
from domain_builders import explained
from two_teams import submit

from gpupool.workloads.models import Workload


def card(page: str) -> str:
    """The workload card's line on its start."""
    return page.split("data-start-estimate>", 1)[1].split("</p>", 1)[0]


def pending(pool: Any, **fields: Any) -> Workload:
    """max's pending workload ``train`` on nlp, explained by a cycle, with ``fields``."""
    workload = submit(pool, "train", pool.nlp_queue, "max")
    explained(workload, "capacity", "Needs 8 GPUs of h100 together; 7 are free.", queue_rank=1)
    Workload.objects.filter(pk=workload.pk).update(**fields)
    return workload


def test_an_estimate_before_the_pools_now_is_said_to_be_due(pool: Any, page_as: Any) -> None:
    past = timezone.now() - timedelta(minutes=10)
    pending(pool, estimated_start_at=past)
    line = card(text(live(page_as("max"), "/workloads/nlp/train/")))
    assert line.startswith("due to start now (estimated <time")
    assert f'datetime="{past.isoformat()}"' in line
    assert line.endswith("; estimates are refreshed every minute)")
    assert "estimated start <time" not in line


def test_an_estimate_still_to_come_reads_as_a_time(pool: Any, page_as: Any) -> None:
    soon = timezone.now() + timedelta(hours=2)
    pending(pool, estimated_start_at=soon)
    line = card(text(live(page_as("max"), "/workloads/nlp/train/")))
    assert line.startswith("estimated start <time") and "due" not in line


def test_a_not_before_that_has_passed_says_there_is_no_estimate_yet(
    pool: Any, page_as: Any
) -> None:
    workload = submit(pool, "train", pool.nlp_queue, "max")
    past = timezone.now() - timedelta(minutes=5)
    explained(
        workload,
        "capacity",
        "Needs 8 GPUs of h100 together; 7 are free.",
        {"estimate_not_before": past.isoformat()},
        queue_rank=1,
    )
    line = card(text(live(page_as("max"), "/workloads/nlp/train/")))
    assert line.startswith("no estimated start yet (the last estimate looked ahead to <time")
    assert "which has passed; estimates are refreshed every minute)" in line
    assert "not before" not in line
    ahead = (timezone.now() + timedelta(hours=1)).isoformat()
    explained(workload, "capacity", "Needs 8.", {"estimate_not_before": ahead}, queue_rank=1)
    assert card(text(live(page_as("max"), "/workloads/nlp/train/"))).startswith(
        "estimated start not before <time"
    )


def test_the_workloads_list_says_a_past_estimate_is_due(pool: Any, page_as: Any) -> None:
    pending(pool, estimated_start_at=timezone.now() - timedelta(minutes=10))
    table = rows(text(page_as("max").get("/workloads/")))
    assert 'due to start now <span class="muted">(estimated <time' in table
