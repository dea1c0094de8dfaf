"""The pages' snapshot takes its time and its rows from one state of the database
(``control.queries.read_pool_snapshot``). Its time is the pool's clock, never before the
latest admission; read apart from the rows, an admission committed between the two "started
after the snapshot's time" and the dry-run, Queues and Fragmentation said "The pool cannot be
planned now" until the next cycle (2 of 40 dry-runs in a demo walk-through)."""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from loop_builders import build_world

from gpupool.control import queries
from gpupool.workloads.models import Workload


@pytest.mark.django_db(transaction=True)
def test_the_time_and_the_rows_are_read_in_one_transaction(monkeypatch: Any) -> None:
    world = build_world()
    world.cycle()
    seen: list[bool] = []
    real = queries.snapshot_time

    def timed() -> Any:
        seen.append(connection.in_atomic_block)
        return real()

    monkeypatch.setattr(queries, "snapshot_time", timed)
    queries.read_pool_snapshot()
    assert seen == [True]


@pytest.mark.django_db(transaction=True)
@pytest.mark.skipif(
    connection.vendor != "postgresql", reason="a second connection sees the commit (PostgreSQL)"
)
def test_an_admission_committed_meanwhile_does_not_break_the_snapshot(monkeypatch: Any) -> None:
    world = build_world()
    world.submit("late", gpus=1)
    world.cycle()
    world.cycle()
    late = world.workload("late")
    assert late.admitted_at is not None
    real = queries.snapshot_time

    def then_admitted() -> Any:
        at = real()

        def admit() -> None:  # another process records an admission after that time
            Workload.objects.filter(pk=late.pk).update(admitted_at=at + timedelta(seconds=30))
            connection.close()

        other = threading.Thread(target=admit)
        other.start()
        other.join()
        return at

    monkeypatch.setattr(queries, "snapshot_time", then_admitted)
    database = queries.read_pool_snapshot()
    assert "team-a/late" in database.by_name
