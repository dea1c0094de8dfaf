"""The admin site's list of scheduling cycles gave only the wall clock's start and finish
("Dec. 7, 2026, 3:48 p.m." for cycles the Overview dates 18:19 on the pool's clock, which a
simulated cluster runs ahead): it now leads with the pool's clock, as the Overview's table of
cycles, names the wall clock as such, and says how long each cycle took."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from dashboard_pages import text

from gpupool.control.models import SchedulingCycle


def test_the_admin_sites_cycles_list_leads_with_the_pools_clock_and_says_how_long(
    pool: Any, page_as: Any
) -> None:
    ada = pool.users["ada"]
    ada.is_staff = ada.is_superuser = True
    ada.save()
    started = datetime(2026, 12, 7, 15, 48, tzinfo=UTC)
    SchedulingCycle.objects.create(
        started_at=started,
        finished_at=started + timedelta(milliseconds=719),
        cluster_at=datetime(2026, 12, 7, 18, 19, tzinfo=UTC),
        status="succeeded",
    )
    page = text(page_as("ada").get("/admin/control/schedulingcycle/"))
    table = page.split('id="result_list"', 1)[1]
    head = table.split("<thead>", 1)[1].split("</thead>", 1)[0]
    assert head.index("At (pool&#x27;s clock)") < head.index("Started (wall clock)")
    assert "Took" in head
    row = table.split("<tbody>", 1)[1].split("</tr>", 1)[0]
    assert "2026-12-07 18:19:00 UTC" in row.split('class="field-at', 1)[1].split("</td>", 1)[0]
    assert '<td class="field-took">719 ms</td>' in row
