"""A cycle's row carries the cluster's clock it read (``cluster_at``, indexed), beside the
wall clock of its start and end: the pages name the cycle and draw their last day by it
(``SchedulingCycle.pool_time``, ``queries.sampled_cycles``), and the pool's clock reads it
(``clock.pool_clock``). A simulated cluster runs ahead of the wall clock."""

from __future__ import annotations

import importlib
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.apps import apps
from django.utils import timezone
from loop_builders import build_world

from gpupool.control.clock import pool_clock
from gpupool.control.models import SchedulingCycle

pytestmark = pytest.mark.django_db

AHEAD_S = 3 * 3600.0


def test_the_loops_cycle_row_carries_the_clusters_clock() -> None:
    world = build_world()
    world.cluster.tick(AHEAD_S)  # the simulated cluster runs three hours ahead
    result = world.cycle()
    row = SchedulingCycle.objects.get(pk=result.cycle_id)
    wall = timezone.now()
    assert row.cluster_at is not None
    assert abs(row.cluster_at - (wall + timedelta(seconds=AHEAD_S))) < timedelta(minutes=1)
    assert abs(row.started_at - wall) < timedelta(minutes=1)  # the row's own times: the wall's
    assert "cluster_at" not in row.outcome  # one place for it: the column
    assert pool_clock() == row.cluster_at == row.pool_time()


def test_a_skipped_cycle_does_not_set_the_pools_clock_back_to_the_wall_clock() -> None:
    """Another worker's turn skipped after the loop's cycle: the pool's clock is still the
    cluster's (a simulated one three hours ahead), not the skipped row's wall-clock end."""
    world = build_world()
    world.cluster.tick(AHEAD_S)
    clocked = SchedulingCycle.objects.get(pk=world.cycle().cycle_id).cluster_at
    wall = timezone.now()
    SchedulingCycle.objects.create(
        started_at=wall, finished_at=wall, status="skipped", error="another cycle holds the lock"
    )
    assert clocked is not None and pool_clock() == clocked > wall


def test_a_cycle_that_recorded_nothing_is_named_by_its_start() -> None:
    started = datetime(2026, 12, 6, 3, 0, tzinfo=UTC)
    skipped = SchedulingCycle.objects.create(started_at=started, status="skipped")
    assert skipped.pool_time() == started


def test_the_migration_copies_the_clock_the_loop_wrote_in_the_outcome(db: Any) -> None:
    at = datetime(2026, 12, 8, 1, 2, 3, 456789, tzinfo=UTC)
    wall = datetime(2026, 12, 6, 1, 0, tzinfo=UTC)
    old = SchedulingCycle.objects.create(
        started_at=wall,
        finished_at=wall,
        status="succeeded",
        outcome={"cluster_at": at.isoformat()},
    )
    bad = SchedulingCycle.objects.create(
        started_at=wall, status="failed", outcome={"cluster_at": "not a time"}
    )
    none = SchedulingCycle.objects.create(started_at=wall, status="failed")
    migration = importlib.import_module(
        "gpupool.control.migrations.0003_schedulingcycle_cluster_at"
    )
    migration.copy_cluster_clock(apps, None)
    stamps = dict(SchedulingCycle.objects.values_list("pk", "cluster_at"))
    assert stamps == {old.pk: at, bad.pk: None, none.pk: None}
