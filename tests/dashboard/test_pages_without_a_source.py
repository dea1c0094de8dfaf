"""Without a utilisation source the Cost page calls none of the GPU-hours used idle: its
"Of used: idle allocated" cells are a dash leading to a note that says it is not measured
(used, reserved idle and charged as ever); with a source, unmeasured usage is idle allocated.
The Utilisation page's CSV link names only allocated GPU-hours then."""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from typing import Any

import pytest
from dashboard_pages import text
from django.utils import timezone

from gpupool.accounting.actions import do_close_usage, do_open_usage, do_roll_up_usage
from gpupool.workloads.actions import PodSetSpec, do_submit_workload


@pytest.fixture
def rolled(pool: Any) -> str:
    """Two hours of nlp on 6 GPUs, rolled up, no activity recorded; the month they fall in."""
    t0: datetime = (timezone.now() + timedelta(days=2)).replace(
        hour=10, minute=0, second=0, microsecond=0
    )
    do_roll_up_usage(until=t0)
    workload = do_submit_workload(
        "nlp-job",
        queue=pool.nlp_queue,
        pod_sets=[PodSetSpec(count=1, gpus=6, flavor=pool.h100)],
        at=t0,
    )
    do_open_usage(workload, flavor=pool.h100, gpus=6, at=t0)
    do_close_usage(workload, at=t0 + timedelta(hours=2))
    do_roll_up_usage(until=t0 + timedelta(hours=2))
    return t0.strftime("%Y-%m")


@pytest.fixture
def held(pool: Any) -> None:
    """nlp held 4 GPUs for the last two hours (no activity recorded)."""
    now = timezone.now()
    workload = do_submit_workload(
        "nlp-notebook",
        queue=pool.nlp_queue,
        pod_sets=[PodSetSpec(count=1, gpus=4, flavor=pool.h100)],
        at=now - timedelta(hours=3),
    )
    do_open_usage(workload, flavor=pool.h100, gpus=4, at=now - timedelta(hours=2))
    do_close_usage(workload, at=now)


def idle_cell(page: str, row_start: str) -> str:
    """The "Of used: idle allocated" cell of the row that starts with ``row_start``."""
    row = page.split(row_start, 1)[1].split("</tr>", 1)[0]
    return re.findall(r"<td[^>]*>.*?</td>", row)[4]


def test_the_cost_page_without_a_source_says_idle_allocated_is_not_measured(
    rolled: str, page_as: Any, settings: Any
) -> None:
    settings.GPUPOOL_UTILIZATION_SOURCE = "none"

    page = text(page_as("fin").get(f"/cost/?month={rolled}"))

    for row in ("<tr><td>nlp</td>", '<tr id="team-totals">'):
        cell = idle_cell(page, row)
        assert "GPU-h" not in cell and "\u2013" in cell and 'href="#idle-not-measured"' in cell
    note = page.split('id="idle-not-measured"', 1)[1].split("</p>", 1)[0]
    assert "not measured" in note and "GPUPOOL_UTILIZATION_SOURCE" in note
    assert "12 GPU-h" in page.split("<tr><td>nlp</td>", 1)[1].split("</tr>", 1)[0]  # used


def test_the_cost_page_with_a_source_counts_unmeasured_use_as_idle_allocated(
    rolled: str, page_as: Any, settings: Any
) -> None:
    settings.GPUPOOL_UTILIZATION_SOURCE = "simulated"

    page = text(page_as("fin").get(f"/cost/?month={rolled}"))

    assert re.sub(r"<[^>]+>", "", idle_cell(page, "<tr><td>nlp</td>")) == "12 GPU-h"
    assert 'id="idle-not-measured"' not in page


def test_the_cost_page_cached_with_a_source_is_not_shown_without_one(
    rolled: str, page_as: Any, settings: Any
) -> None:
    settings.GPUPOOL_UTILIZATION_SOURCE = "simulated"
    page_as("fin").get(f"/cost/?month={rolled}")

    settings.GPUPOOL_UTILIZATION_SOURCE = "none"
    page = text(page_as("fin").get(f"/cost/?month={rolled}"))

    assert "GPU-h" not in idle_cell(page, "<tr><td>nlp</td>")


def test_the_utilisation_csv_link_without_a_source_names_allocation_only(
    held: None, page_as: Any, settings: Any
) -> None:
    settings.GPUPOOL_UTILIZATION_SOURCE = "none"

    page = text(page_as("ada").get("/utilization/"))

    link = page.split('id="csv-teams"', 1)[1].split("</a>", 1)[0]
    assert "allocated GPU-hours" in link and "not measured" in link
    assert "active and idle GPU-hours" not in link


def test_the_utilisation_csv_link_with_a_source_names_active_and_idle(
    held: None, page_as: Any, settings: Any
) -> None:
    settings.GPUPOOL_UTILIZATION_SOURCE = "simulated"

    page = text(page_as("ada").get("/utilization/"))

    link = page.split('id="csv-teams"', 1)[1].split("</a>", 1)[0]
    assert "allocated, active and idle GPU-hours" in link
