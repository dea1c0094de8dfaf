"""The pool's clock: what "now" is for the records people and pages make beside the loop.

The loop stamps what it records with its cluster's clock. A simulated cluster runs ahead of
the wall clock (the demo: an hour a minute), so a cancel or a submission stamped with the wall
clock would land hours before the pool's own records of the same workload (a cancel before
its start, refused; a submission sorted below work submitted "later"). Actions taken beside
the loop stamp with ``pool_now`` instead; on a real cluster it is the wall clock.
"""

from __future__ import annotations

from datetime import datetime

from django.utils import timezone

from gpupool.control.models import SchedulingCycle


def pool_clock() -> datetime:
    """The cluster's clock at the last finished cycle that read it (the cycle row's
    ``cluster_at``: a simulated cluster runs ahead of the wall clock that stamps its start
    and end), else the wall clock. A cycle skipped beside a running one (or failed before
    its sync) read no cluster clock: its end is the wall clock's, hours behind a simulated
    pool's, and stamped what people did in the wrong hours. One indexed read, not the pool's
    snapshot: the pages, the utilisation API and the CLI count back from it."""
    last = (
        SchedulingCycle.objects.filter(finished_at__isnull=False, cluster_at__isnull=False)
        .order_by("-started_at", "-id")
        .values_list("cluster_at", flat=True)
        .first()
    )
    return last or timezone.now()


def pool_now() -> datetime:
    """What "now" is for the pool's own records: its clock, or the wall clock when that is
    later (no cycle yet, or the loop stopped). A simulated cluster runs ahead of the wall
    clock and stamps its usage in its own time, so "today" and "this month" of the cost
    page and reports count from here."""
    return max(pool_clock(), timezone.now())


def pool_now_after(*moments: datetime | None) -> datetime:
    """``pool_now``, or the latest of ``moments`` when that is later: a stamp that follows
    the ones a record already holds (a workload's start, written by a cycle still finishing
    while the pool's clock reads the last finished one)."""
    return max((pool_now(), *(m for m in moments if m is not None)))
