"""The Workloads page lists every workload a page at a time, newest first, keeping its state
filter across pages (it listed the newest 100 and told a viewer who had filtered already to
"filter by state to see others"); its live part polls the page shown; each page reads the
same number of queries."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import pytest
from dashboard_pages import text
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from two_teams import submit

from gpupool.dashboard import views
from gpupool.workloads.models import Workload


@pytest.fixture
def five_succeeded(pool: Any, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Five succeeded workloads, s0 the oldest, and a running one, in pages of two."""
    monkeypatch.setattr(views, "WORKLOADS_PAGE_SIZE", 2, raising=False)
    now = timezone.now()
    for index in range(5):
        done = submit(pool, f"s{index}", pool.nlp_queue, "max")
        Workload.objects.filter(pk=done.pk).update(
            state="succeeded", submitted_at=now - timedelta(minutes=10 - index)
        )
    submit(pool, "running-one", pool.nlp_queue, "max")
    return ["nlp/s4", "nlp/s3", "nlp/s2", "nlp/s1", "nlp/s0"]  # newest first


def listed(page: str) -> list[str]:
    return re.findall(r'<a href="/workloads/nlp/[^"]+/"><code>([^<]+)</code>', page)


def pager_links(page: str) -> dict[str, str]:
    nav = page.split('<nav class="pager" aria-label="Pages of workloads">')[1].split("</nav>")[0]
    return {
        word: href.replace("&amp;", "&") for href, word in re.findall(r'href="([^"]+)">(\w+)<', nav)
    }


def test_every_workload_in_a_state_is_a_page_away_with_the_filter_kept(
    page_as: Any, five_succeeded: list[str]
) -> None:
    client = page_as("ada")
    first = text(client.get("/workloads/?state=succeeded"))
    assert listed(first) == five_succeeded[:2]
    assert "page 1 of 3 (5 workloads in this state)" in first
    assert "filter by state to see others" not in first
    assert pager_links(first) == {"Older": "/workloads/?state=succeeded&page=2"}
    second = text(client.get(pager_links(first)["Older"]))
    assert listed(second) == five_succeeded[2:4]
    assert '<option value="succeeded" selected>' in second  # the filter is still picked
    assert 'hx-get="/workloads/?state=succeeded&amp;page=2"' in second  # the live part polls it
    assert pager_links(second) == {
        "Newer": "/workloads/?state=succeeded&page=1",
        "Older": "/workloads/?state=succeeded&page=3",
    }
    last = text(client.get(pager_links(second)["Older"]))
    assert listed(last) == five_succeeded[4:] and "page 3 of 3" in last
    # Unfiltered, the pages hold every state; the live part of a page answers that page.
    every = [listed(text(client.get(f"/workloads/?page={n}"))) for n in (1, 2, 3)]
    assert [name for page in every for name in page] == ["nlp/running-one", *five_succeeded]
    live = client.get("/workloads/?page=2", headers={"HX-Request": "true", "HX-Target": "live"})
    assert listed(text(live)) == every[1] and "<html" not in text(live)


def test_a_list_that_fits_one_page_has_no_pager_nor_note(pool: Any, page_as: Any) -> None:
    submit(pool, "only", pool.nlp_queue, "max")
    page = text(page_as("max").get("/workloads/?state=pending"))
    assert listed(page) == ["nlp/only"]
    assert 'class="pager"' not in page and "to see others" not in page


def test_each_page_reads_the_same_number_of_queries(
    page_as: Any, five_succeeded: list[str]
) -> None:
    client = page_as("ada")
    with CaptureQueriesContext(connection) as first:
        client.get("/workloads/")
    with CaptureQueriesContext(connection) as last:
        client.get("/workloads/?page=3")
    assert len(first) == len(last)
