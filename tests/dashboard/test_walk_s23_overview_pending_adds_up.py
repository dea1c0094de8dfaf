"""The Overview's "Pending work by reason" adds up to "Workloads now"'s pending count: the
reasons are the last cycle's, so work submitted since has none yet, and work whose pods'
labels cannot be used has none of the core's; each gets a line of its own, with the panel's
total under them. (The walk-through saw 129 pending beside reasons adding up to 114, and
nothing on the page said why.)"""

from __future__ import annotations

import re
from typing import Any

from dashboard_pages import live, text
from domain_builders import explained
from two_teams import submit

from gpupool.workloads.models import Workload


def counted(page: str, marker: str) -> int:
    """The number in the row that opens with ``marker`` (a row's first cell, or attribute)."""
    found = re.search(re.escape(marker) + r'.*?<td class="number"[^>]*>(\d+)</td>', page, re.S)
    assert found is not None, marker
    return int(found[1])


def test_the_reasons_add_up_to_the_pending_count_naming_the_work_not_looked_at_yet(
    pool: Any, page_as: Any
) -> None:
    waiting = [submit(pool, f"w{i}", pool.nlp_queue, "max") for i in range(6)]
    explained(waiting[0], "quota", "Its queue is at its quota.")
    explained(waiting[1], "quota", "Its queue is at its quota.")
    explained(waiting[2], "capacity", "Not enough free GPUs.")
    # Pods a cycle could not read: an explanation with no reason of the core's.
    explained(waiting[3], "", "gpupool does not schedule it: its pods' labels cannot be used.")
    # waiting[4] and waiting[5]: submitted since the last cycle, no explanation yet.

    page = text(live(page_as("ada"), "/overview/"))

    pending = Workload.objects.filter(state="pending").count()
    states = page.split('id="states-title"', 1)[1].split("</section>", 1)[0]
    assert counted(states, "<td>pending</td>") == pending
    panel = page.split('id="pending-title"', 1)[1].split("</section>", 1)[0]
    assert counted(panel, "<td>quota</td>") == 2 and counted(panel, "<td>capacity</td>") == 1
    assert "not looked at by a cycle yet (submitted since the last cycle)" in panel
    assert counted(panel, "data-not-looked-at") == 2
    assert counted(panel, "data-unreadable") == 1
    assert counted(panel, "All pending") == pending  # the two panels agree, visibly
    assert "work submitted since has none until the next cycle looks at it" in panel


def test_work_no_cycle_has_looked_at_yet_is_counted_though_no_reason_is_drawn(
    pool: Any, page_as: Any
) -> None:
    submit(pool, "fresh", pool.nlp_queue, "max")
    panel = text(live(page_as("ada"), "/overview/")).split('id="pending-title"', 1)[1]
    panel = panel.split("</section>", 1)[0]
    assert 'id="pending-chart-figure"' not in panel  # no reason to draw
    assert counted(panel, "data-not-looked-at") == 1 and counted(panel, "All pending") == 1
    assert "Nothing waits now" not in panel


def test_every_pending_workload_explained_adds_no_line_for_work_not_looked_at(
    pool: Any, page_as: Any
) -> None:
    explained(submit(pool, "seen", pool.nlp_queue, "max"), "quota", "At its quota.")
    panel = text(live(page_as("ada"), "/overview/")).split('id="pending-title"', 1)[1]
    assert "data-not-looked-at" not in panel.split("</section>", 1)[0]
    assert counted(panel, "All pending") == 1
