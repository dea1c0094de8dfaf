"""The record's nominations: on PostgreSQL the rows still pending are locked, written and
their ``updated_at`` before the write returned by one statement (``_record_nominations``),
where a ``SELECT ... FOR UPDATE`` and then an ``UPDATE`` per value went before."""

from __future__ import annotations

from datetime import UTC, datetime

from control_builders import Pool
from django.db import connection
from django.test.utils import CaptureQueriesContext

from gpupool.control.actions import Stamps, do_record_cycle
from gpupool.control.record import CycleRecord
from gpupool.workloads.choices import WorkloadState
from gpupool.workloads.models import Workload

AT = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)


def test_nominations_are_locked_written_and_stamped_in_one_statement(pool: Pool) -> None:
    pending = list(Workload.objects.filter(state=WorkloadState.PENDING).order_by("pk"))
    nominated, withdrawn, gone = pending[:3]
    Workload.objects.filter(pk=withdrawn.pk).update(nominated=True)
    Workload.objects.filter(pk=gone.pk).update(state=WorkloadState.CANCELLED)
    was = {w.pk: w.updated_at for w in Workload.objects.filter(pk__in=[p.pk for p in pending])}
    record = CycleRecord(at=AT)
    record.nominated = {nominated.pk: True, withdrawn.pk: False, gone.pk: True}
    quiet: Stamps = {}
    with CaptureQueriesContext(connection) as queries:
        do_record_cycle(record, started_at=AT, nodes=0, workloads=3, stamps={}, quiet_stamps=quiet)
    rows = {w.pk: w for w in Workload.objects.filter(pk__in=was)}
    assert rows[nominated.pk].nominated and not rows[withdrawn.pk].nominated
    assert not rows[gone.pk].nominated and rows[gone.pk].updated_at == was[gone.pk]
    assert set(quiet) == {nominated.pk, withdrawn.pk}
    for pk in quiet:
        assert quiet[pk] == (was[pk], rows[pk].updated_at)
        assert rows[pk].updated_at > was[pk]
    if connection.vendor == "postgresql":
        touching = [q["sql"] for q in queries if "nominated" in q["sql"]]
        locks = [q["sql"] for q in queries if "FOR UPDATE" in q["sql"]]
        assert len(touching) == 1, touching
        assert len(locks) == 1 and locks[0] == touching[0]
