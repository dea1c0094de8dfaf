"""The Overview's last cycles and ``scheduling-cycles/`` name one clock per name: the page's
column is the pool's clock, the API's ``cluster_at``, and says so; the API's ``started_at``
is the wall clock's (walk finding 13: "Started" on the page was the pool's clock, 08:01,
while the API's ``started_at`` of the same cycle read 02:35Z)."""

from __future__ import annotations

from typing import Any

from dashboard_pages import text
from rest_framework.test import APIClient
from test_pool_clock_times import AHEAD, cycle, cycles_table, minute


def test_the_overview_labels_its_cycle_times_with_the_pools_clock_as_the_api_names_it(
    pool: Any, page_as: Any
) -> None:
    # given a cycle of a simulated cluster two days ahead of the wall clock
    last = cycle(0, 0, AHEAD)
    # when an admin reads the Overview and the API
    listed = cycles_table(text(page_as("ada").get("/overview/")))
    api = APIClient()
    api.force_authenticate(pool.users["ada"])
    row = api.get("/api/v1/scheduling-cycles/latest/").json()
    # then the page's column is headed as the pool's clock and shows the API's cluster_at
    head = listed.split("<thead>", 1)[1].split("</thead>", 1)[0]
    assert ">Started<" not in head
    assert "At (pool's clock)" in head.replace("&#x27;", "'")
    assert minute(last.cluster_at) in listed
    assert row["cluster_at"].startswith(last.cluster_at.strftime("%Y-%m-%dT%H:%M"))
    # and it says the API's started_at is another clock
    note = listed.split('id="cycle-clocks"', 1)[1].split("</p>", 1)[0]
    assert "cluster_at" in note and "started_at" in note and "wall clock" in note


def test_a_cycle_that_read_no_cluster_time_says_its_time_is_the_wall_clocks(
    pool: Any, page_as: Any
) -> None:
    skipped = cycle(0, None, AHEAD)
    skipped.cluster_at = None
    skipped.save(update_fields=["cluster_at"])
    listed = cycles_table(text(page_as("ada").get("/overview/")))
    cell = listed.split("data-wall-clock", 1)[1].split("</td>", 1)[0]
    assert minute(skipped.started_at) in cell and "wall clock" in cell
