"""The Utilisation page says what it knows: without a utilisation source its chart's title and
its introduction speak of allocation alone (no "active", no "idle" explained as measured), and
a ``GPUPOOL_UTILIZATION_SOURCE`` the table does not hold is said to be unknown, naming the
names it takes, never passed off as ``none``."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from dashboard_pages import text
from django.utils import timezone

from gpupool.accounting.actions import do_close_usage, do_open_usage
from gpupool.workloads.actions import PodSetSpec, do_submit_workload


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


def pool_title(page: str) -> str:
    return page.split('<h2 id="pool-title">', 1)[1].split("</h2>", 1)[0]


def lede(page: str) -> str:
    return page.split('<p class="lede">', 1)[1].split("</p>", 1)[0]


def test_without_a_source_the_title_and_introduction_speak_of_allocation_alone(
    held: None, page_as: Any, settings: Any
) -> None:
    settings.GPUPOOL_UTILIZATION_SOURCE = "none"

    page = text(page_as("ada").get("/utilization/"))

    assert "active" not in pool_title(page) and "allocated" in pool_title(page)
    assert "not measured" in pool_title(page)
    intro = lede(page)
    assert "only allocation is known" in intro
    assert "really did" not in intro and "<strong>idle</strong>" not in intro
    chart = page.split('id="pool-chart"', 1)[1].split(">", 1)[0]
    assert "idle allocated" not in chart and "not measured" in chart


def test_with_a_source_the_title_and_introduction_set_allocated_against_active(
    held: None, page_as: Any, settings: Any
) -> None:
    settings.GPUPOOL_UTILIZATION_SOURCE = "simulated"

    page = text(page_as("ada").get("/utilization/"))

    assert pool_title(page) == "The pool: allocated against active"
    assert "<strong>active</strong>" in lede(page)


def test_an_unknown_source_is_said_to_be_unknown_not_none(
    held: None, page_as: Any, settings: Any
) -> None:
    settings.GPUPOOL_UTILIZATION_SOURCE = "bogus"

    page = text(page_as("ada").get("/utilization/"))

    notice = page.split('id="utilization-unknown-source"', 1)[1].split("</div>", 1)[0]
    assert "unknown" in notice and "GPUPOOL_UTILIZATION_SOURCE" in notice
    assert "&#x27;bogus&#x27;" in notice or "'bogus'" in notice
    assert "kubernetes, none, prometheus, simulated" in notice
    assert "names none" not in page
