"""How ``do_record_cycle`` writes a cycle's decisions: explanations go to their own table
(``WorkloadExplanation``: a first one inserted), never to the workload's row; a nomination is
one write of the workload's row (stamped); an explanation alone leaves the row's nomination
and stamp as they were; an admission takes the workload's explanation away."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

import pytest
from control_builders import Pool
from django.db import IntegrityError, connection, transaction
from django.db.models import Model
from domain_builders import explained

from gpupool.accounting.models import UsageInterval
from gpupool.bulk import check_deferred_constraints, update_rows
from gpupool.control.actions import Stamps, do_record_cycle
from gpupool.control.models import SchedulingCycle
from gpupool.control.record import AdmissionRecord, CycleRecord, Explanation, PodPlace
from gpupool.workloads.choices import WorkloadState
from gpupool.workloads.models import (
    Placement,
    Workload,
    WorkloadExplanation,
    WorkloadTransition,
)
from gpupool.workloads.queries import ESTIMATE_LEARNED_FACT

AT = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)


def _writes(model: type[Model]) -> tuple[int, int]:
    """Rows inserted into and row versions updated in ``model``'s table by this transaction
    so far (PostgreSQL)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT n_tup_ins, n_tup_upd FROM pg_stat_xact_user_tables WHERE relname = %s",
            [model._meta.db_table],
        )
        inserted, updated = cursor.fetchone()
        return int(inserted), int(updated)


def _pending() -> list[Workload]:
    return list(
        Workload.objects.filter(state=WorkloadState.PENDING, nominated=False).order_by("pk")
    )


def _admission_and_explanation(
    node_id: int, flavor_id: int
) -> tuple[Workload, Workload, CycleRecord]:
    """A record admitting the first pending workload (one pod on ``node_id``) and explaining
    the second (``quota``, ranked first)."""
    admitted, explained = _pending()[:2]
    pod_set = admitted.pod_sets.order_by("pk").first()
    assert pod_set is not None
    record = CycleRecord(at=AT)
    record.admissions = [
        AdmissionRecord(
            workload_id=admitted.pk,
            name=admitted.name,
            pods=(PodPlace(pod_set.pk, 0, node_id, (0,), None),),
            usage=((flavor_id, Decimal(1)),),
        )
    ]
    record.explanations = {explained.pk: Explanation("quota", "waits for quota", {"asked": 9})}
    record.ranked = {explained.pk: 1.0}
    return admitted, explained, record


def test_explanations_go_to_their_own_table_and_nominations_are_one_write_each(
    pool: Pool,
) -> None:
    both, explained, nominated = _pending()[:3]
    was = {w.pk: w.updated_at for w in (both, explained, nominated)}
    record = CycleRecord(at=AT)
    record.explanations = {
        both.pk: Explanation("waiting-for-preemption", "waits for its victims", {"victims": 1}),
        explained.pk: Explanation("quota", "waits for quota", {"asked": 2, "available": 1}),
    }
    record.new_reasons = set(record.explanations)
    record.nominated = {both.pk: True, nominated.pk: True}
    record.ranked = {both.pk: 1.0, explained.pk: 2.0}
    record.ranks = dict(record.ranked)
    record.pending_by_reason = {"waiting-for-preemption": 1, "quota": 1}
    stamps: Stamps = {}
    quiet: Stamps = {}
    postgresql = connection.vendor == "postgresql"
    with transaction.atomic():
        before = [_writes(m) for m in (Workload, WorkloadExplanation)] if postgresql else []
        do_record_cycle(
            record, started_at=AT, nodes=0, workloads=3, stamps=stamps, quiet_stamps=quiet
        )
        if postgresql:
            after = [_writes(m) for m in (Workload, WorkloadExplanation)]
            # The two nominated rows once each; the two explanations inserted, apart.
            assert after[0][1] - before[0][1] == 2
            assert (after[1][0] - before[1][0], after[1][1] - before[1][1]) == (2, 0)
    rows = {w.pk: w for w in Workload.objects.filter(pk__in=was)}
    assert rows[both.pk].nominated and rows[nominated.pk].nominated
    assert not rows[explained.pk].nominated
    assert rows[both.pk].pending_reason == "waiting-for-preemption"
    assert rows[both.pk].pending_facts == {"victims": 1}
    assert rows[both.pk].queue_rank == 1.0
    assert rows[explained.pk].pending_facts == {"asked": 2, "available": 1}
    assert rows[explained.pk].queue_rank == 2.0
    assert rows[nominated.pk].pending_reason == nominated.pending_reason
    # The nominations are stamped, quietly; the explanation alone stamps nothing.
    assert stamps == {}
    assert set(quiet) == {both.pk, nominated.pk}
    for pk in (both.pk, nominated.pk):
        assert quiet[pk] == (was[pk], rows[pk].updated_at)
        assert rows[pk].updated_at > was[pk]
    assert rows[explained.pk].updated_at == was[explained.pk]


def test_a_nomination_of_a_row_no_longer_pending_is_not_written(pool: Pool) -> None:
    gone, waiting = _pending()[:2]
    Workload.objects.filter(pk=gone.pk).update(state=WorkloadState.CANCELLED)
    record = CycleRecord(at=AT)
    record.explanations = {
        pk: Explanation("waiting-for-preemption", "waits for its victims", {})
        for pk in (gone.pk, waiting.pk)
    }
    record.nominated = {gone.pk: True, waiting.pk: True}
    quiet: Stamps = {}
    do_record_cycle(record, started_at=AT, nodes=0, workloads=2, stamps={}, quiet_stamps=quiet)
    assert set(quiet) == {waiting.pk}
    assert not Workload.objects.get(pk=gone.pk).nominated
    assert Workload.objects.get(pk=waiting.pk).nominated


def test_rows_updated_twice_in_one_transaction_and_after_a_roll_back_take_their_own_values(
    pool: Pool,
) -> None:
    """``bulk.update_rows`` stages rows in a temporary table kept for the session: a second
    call in the same transaction sees none of the first call's rows, a call after a
    transaction that was rolled back (and took a newly made table with it) works, and so
    does one in the next transaction."""
    first, second = _pending()[:2]
    for workload in (first, second):
        explained(workload, "gang")
    rows = WorkloadExplanation.objects.filter(pk__in=[first.pk, second.pk])
    columns = ["reason", "detail"]
    with transaction.atomic():
        update_rows(WorkloadExplanation, columns, {first.pk: ("quota", "first")})
        update_rows(WorkloadExplanation, columns, {second.pk: ("capacity", "second")})
    details = dict(rows.values_list("pk", "detail"))
    assert details == {first.pk: "first", second.pk: "second"}

    class Undone(Exception):
        pass

    try:
        with transaction.atomic():
            update_rows(WorkloadExplanation, ["reason", "queue_rank"], {first.pk: ("quota", 7.0)})
            raise Undone
    except Undone:
        pass
    assert Workload.objects.get(pk=first.pk).queue_rank != 7.0
    with transaction.atomic():
        update_rows(WorkloadExplanation, ["reason", "queue_rank"], {second.pk: ("quota", 8.0)})
    with transaction.atomic():
        update_rows(WorkloadExplanation, ["reason", "queue_rank"], {first.pk: ("behind", 9.0)})
    assert dict(rows.values_list("pk", "queue_rank")) == {first.pk: 9.0, second.pk: 8.0}


@pytest.mark.skipif(connection.vendor != "postgresql", reason="SQLite checks foreign keys at once")
def test_deferred_foreign_keys_are_checked_where_a_nested_action_ends(pool: Pool) -> None:
    """A record nested in an outer transaction (a benchmark's rolled-back run, a test) pays
    for its foreign-key checks where it ends, as a commit would make it, and the keys stay
    deferred after the check."""
    workload = _pending()[0]
    missing_queue = 987_654_321
    with transaction.atomic():
        Workload.objects.filter(pk=workload.pk).update(queue_id=missing_queue)  # deferred
        Workload.objects.filter(pk=workload.pk).update(queue_id=workload.queue_id)
        check_deferred_constraints()  # nothing left dangling: no error
    with pytest.raises(IntegrityError), transaction.atomic():
        Workload.objects.filter(pk=workload.pk).update(queue_id=missing_queue)  # still deferred
        check_deferred_constraints()
    workload.refresh_from_db()
    assert workload.queue_id != missing_queue


@pytest.mark.skipif(connection.vendor != "postgresql", reason="SQLite checks foreign keys at once")
def test_an_admission_whose_keys_fail_in_the_overlapped_check_leaves_the_data_as_it_was(
    pool: Pool,
) -> None:
    """The admissions' inserts are checked, and the rows updated, in a pipeline while the
    explanations' rows are built (``bulk.overlapped``): a key that fails there fails the
    record with Django's ``IntegrityError``, where the window ends, and nothing of the record
    is left -- no cycle row, placement, transition or usage, the workload still pending, the
    explanation not written."""
    flavor = next(iter(pool.flavors.values()))
    admitted, explained, record = _admission_and_explanation(987_654_321, flavor.pk)  # no node
    counts = [
        (model, model.objects.count())
        for model in (SchedulingCycle, Placement, WorkloadTransition, UsageInterval)
    ]
    with pytest.raises(IntegrityError), transaction.atomic():
        do_record_cycle(record, started_at=AT, nodes=0, workloads=2)
    for model, count in counts:
        assert model.objects.count() == count, model
    admitted.refresh_from_db()
    assert admitted.state == WorkloadState.PENDING
    assert Workload.objects.get(pk=explained.pk).pending_facts == explained.pending_facts


def test_an_admission_and_an_explanation_in_one_record_are_both_written(pool: Pool) -> None:
    """The explanations' rows built while the server admits (``_record_admissions``'s
    ``meanwhile``) are written as before, and the admission's row, placement, transition and
    usage with them (PostgreSQL's pipeline, SQLite's plain path)."""
    node = next(iter(pool.nodes.values()))
    admitted, explained, record = _admission_and_explanation(node.pk, node.flavor_id)
    stamps: Stamps = {}
    do_record_cycle(record, started_at=AT, nodes=1, workloads=2, stamps=stamps)
    admitted.refresh_from_db()
    assert admitted.state == WorkloadState.ADMITTED and admitted.admitted_at == AT
    assert set(stamps) == {admitted.pk} and stamps[admitted.pk][1] == admitted.updated_at
    assert list(Placement.objects.filter(workload=admitted).values_list("node_id", flat=True)) == [
        node.pk
    ]
    assert WorkloadTransition.objects.filter(workload=admitted, to_state="admitted").exists()
    assert UsageInterval.objects.filter(workload=admitted, ended_at=None).count() == 1
    row = Workload.objects.get(pk=explained.pk)
    assert (row.pending_reason, row.pending_facts, row.queue_rank) == ("quota", {"asked": 9}, 1.0)


def test_an_admission_takes_the_workload_s_explanation_away(pool: Pool) -> None:
    node = next(iter(pool.nodes.values()))
    admitted, explained_too, record = _admission_and_explanation(node.pk, node.flavor_id)
    explained(admitted, "capacity", "waited for a node", {"asked": 1}, queue_rank=0.5)
    do_record_cycle(record, started_at=AT, nodes=1, workloads=2)
    assert not WorkloadExplanation.objects.filter(pk=admitted.pk).exists()
    row = Workload.objects.get(pk=admitted.pk)
    assert (row.state, row.pending_reason, row.queue_rank) == (WorkloadState.ADMITTED, "", None)
    assert Workload.objects.get(pk=explained_too.pk).pending_reason == "quota"


def test_an_explanation_written_again_keeps_the_estimate_s_facts(pool: Pool) -> None:
    waiting = _pending()[0]
    explained(waiting, "quota", "old words", {"asked": 1, ESTIMATE_LEARNED_FACT: True}, 2.0)
    record = CycleRecord(at=AT)
    record.explanations = {waiting.pk: Explanation("capacity", "new words", {"asked": 2})}
    record.ranked = {waiting.pk: 3.0}
    do_record_cycle(record, started_at=AT, nodes=0, workloads=1)
    row = WorkloadExplanation.objects.get(pk=waiting.pk)
    assert (row.reason, row.detail, row.queue_rank) == ("capacity", "new words", 3.0)
    assert row.facts == {"asked": 2, ESTIMATE_LEARNED_FACT: True}
