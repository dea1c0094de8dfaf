"""The pages' and the loop's reads take no write lock on SQLite (``one_state_of_the_database``).

The settings begin SQLite's transactions ``IMMEDIATE`` (a writer takes the write lock at once),
and the read transaction that gives a snapshot one state of the database began so too: a page
building the pool's snapshot held up the loop's record while it read, and waited behind it.
"""

from __future__ import annotations

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from gpupool.control.snapshot import one_state_of_the_database
from gpupool.workloads.models import Workload

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(connection.vendor != "sqlite", reason="SQLite's locking"),
]


def test_a_snapshots_reads_begin_deferred_and_later_writers_still_begin_immediate() -> None:
    with CaptureQueriesContext(connection) as queries, one_state_of_the_database():
        assert connection.in_atomic_block
        list(Workload.objects.all())
    begins = [q["sql"] for q in queries.captured_queries if q["sql"].startswith("BEGIN")]
    assert begins == ["BEGIN DEFERRED"]
    assert connection.transaction_mode == "IMMEDIATE"  # the writers' mode is back
    with CaptureQueriesContext(connection) as queries, transaction.atomic():
        list(Workload.objects.all())
    assert [q["sql"] for q in queries.captured_queries if q["sql"].startswith("BEGIN")] == [
        "BEGIN IMMEDIATE"
    ]
