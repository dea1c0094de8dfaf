"""The admin site's page of a scheduling cycle showed its phase timings as bare numbers and
its outcome and totals as raw JSON, its title by the wall clock's start without a zone, and
the list's date filter went by the wall clock while the list leads with the pool's clock (a
demo's runs 60 times as fast: a cycle of December 9 sat under December 7). Now the page reads
as an operator asks: each moment with its clock and zone, a failed cycle's error first, the
counts labelled, the phases as a table with their shares of the cycle, and the date filter by
the pool's clock."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

from dashboard_pages import text

from gpupool.control.models import SchedulingCycle

STARTED = datetime(2026, 12, 7, 15, 48, tzinfo=UTC)


def as_admin(pool: Any, page_as: Any) -> Any:
    """A client logged in as ada, made staff and superuser."""
    ada = pool.users["ada"]
    ada.is_staff = ada.is_superuser = True
    ada.save()
    return page_as("ada")


def cycle(**fields: Any) -> SchedulingCycle:
    """A cycle that started at ``STARTED`` on the wall clock and took two seconds."""
    values: dict[str, Any] = {
        "started_at": STARTED,
        "finished_at": STARTED + timedelta(seconds=2),
        "cluster_at": datetime(2026, 12, 9, 6, 30, tzinfo=UTC),
        "status": "succeeded",
    } | fields
    return SchedulingCycle.objects.create(**values)


def test_the_cycle_page_shows_phases_counts_and_moments_readably(pool: Any, page_as: Any) -> None:
    row = cycle(
        nodes=64,
        workloads=42,
        admitted=2,
        pending=19,
        sync_s=0.5,
        snapshot_s=0.0004,
        plan_s=1.0,
        record_s=0.25,
        apply_s=0.25,
        outcome={
            "counts": {"admitted": 2, "bound": 7, "created": 19},
            "pending_by_reason": {"gang": 19},
            "apply_wait_s": 0.013,
        },
        totals={"cycles": {"succeeded": 5}},
    )
    page = text(as_admin(pool, page_as).get(f"/admin/control/schedulingcycle/{row.pk}/change/"))
    # Named by the pool's clock, with its zone, as every moment on the page.
    assert f"cycle {row.pk} at 2026-12-09 06:30:00 UTC (succeeded)" in page
    assert "2026-12-07 15:48:00 UTC" in page  # started, on the wall clock
    assert "2026-12-07 15:48:02 UTC" in page  # finished
    assert "Started (wall clock)" in page and "At (pool&#x27;s clock)" in page
    # The phases: a row each, in order, with its time and share of the cycle's 2 s.
    phases = re.findall(r"<tr><td>(\w+)</td><td[^>]*>([^<]+)</td><td[^>]*>([^<]+)</td></tr>", page)
    assert phases == [
        ("sync", "500 ms", "25%"),
        ("snapshot", "0.4 ms", "0%"),
        ("plan", "1 s", "50%"),
        ("record", "250 ms", "12.5%"),
        ("apply", "250 ms", "12.5%"),
    ]
    # The counts in words, the loop's own after the row's (not repeated).
    assert '<th scope="row">nodes in the snapshot</th><td>64</td>' in page
    assert '<th scope="row">bound</th><td>7</td>' in page
    assert page.count('<th scope="row">admitted</th>') == 1
    # The rest of what it recorded in words, not JSON.
    assert '<th scope="row">pending by reason</th><td>gang 19</td>' in page
    assert '<th scope="row">apply wait</th><td>13 ms</td>' in page
    assert "&quot;pending_by_reason&quot;" not in page and '{"' not in page


def test_a_failed_cycles_error_leads_its_page(pool: Any, page_as: Any) -> None:
    row = cycle(
        status="failed",
        cluster_at=None,
        error="sync: the cluster is unavailable: connection refused\nTraceback ...",
    )
    page = text(as_admin(pool, page_as).get(f"/admin/control/schedulingcycle/{row.pk}/change/"))
    error = page.index('<pre class="errornote"')
    assert error < page.index("Started (wall clock)") < page.index("Time by phase")
    assert "sync: the cluster is unavailable: connection refused\nTraceback ..." in page
    # Recorded nothing: named by its start (``pool_time``), its pool's clock a dash.
    assert f"cycle {row.pk} at 2026-12-07 15:48:00 UTC (failed)" in page


def test_a_skipped_cycles_word_is_no_error_box(pool: Any, page_as: Any) -> None:
    row = cycle(status="skipped", cluster_at=None, error="another scheduling cycle holds the lock")
    page = text(as_admin(pool, page_as).get(f"/admin/control/schedulingcycle/{row.pk}/change/"))
    assert "another scheduling cycle holds the lock" in page
    assert 'class="errornote"' not in page
    assert page.index("Started (wall clock)") < page.index("another scheduling cycle holds")


def test_the_lists_date_filter_goes_by_the_pools_clock_as_its_first_column(
    pool: Any, page_as: Any
) -> None:
    cycle()  # December 7 on the wall clock, December 9 on the pool's
    client = as_admin(pool, page_as)
    page = text(client.get("/admin/control/schedulingcycle/"))
    hierarchy = page.split('<nav class="toplinks">', 1)[1].split("</nav>", 1)[0]
    assert "cluster_at__" in hierarchy and "started_at__" not in hierarchy
    assert "December 9" in hierarchy and "December 7" not in hierarchy

    def listed(day: int) -> bool:
        """Whether the cycle is listed on ``day`` of December 2026."""
        query = f"cluster_at__year=2026&cluster_at__month=12&cluster_at__day={day}"
        answer = text(client.get(f"/admin/control/schedulingcycle/?{query}"))
        return "2026-12-09 06:30:00 UTC" in answer

    assert listed(9) and not listed(7)
