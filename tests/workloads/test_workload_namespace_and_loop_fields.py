"""A workload is addressed by namespace and name; the loop's fields hold only what they mean."""

from __future__ import annotations

from typing import get_args

import pytest
from django.core.exceptions import ValidationError
from django.db import IntegrityError, connection, transaction
from django.db.models import Model
from domain_builders import explained, flavor, priority_class, queue

from gpupool.bulk import upsert_rows
from gpupool.scheduler.types import PendingReason
from gpupool.workloads.actions import PodSetSpec, do_submit_workload
from gpupool.workloads.models import Workload, WorkloadExplanation

pytestmark = pytest.mark.django_db


@pytest.fixture
def train() -> Workload:
    """A pending workload in the default namespace."""
    priority_class("normal", default=True)
    return do_submit_workload(
        "train",
        queue=queue("team", parent=queue("root")),
        pod_sets=[PodSetSpec(1, gpus=1, flavor=flavor("h100"))],
    )


def test_a_workload_lives_in_the_default_namespace_unless_told(train: Workload) -> None:
    assert train.namespace == "default"
    assert train.qualified_name() == "default/train"


def test_one_name_may_be_used_once_in_each_namespace(train: Workload) -> None:
    Workload.objects.filter(pk=train.pk).update(namespace="ml")
    again = do_submit_workload("train", queue=train.queue, pod_sets=[PodSetSpec(1)])
    assert {w.qualified_name() for w in Workload.objects.all()} == {"ml/train", "default/train"}
    with pytest.raises(ValidationError, match="namespace already has a workload of this name"):
        do_submit_workload("train", queue=again.queue, pod_sets=[PodSetSpec(1)])


def test_a_namespace_must_be_a_kubernetes_name(train: Workload) -> None:
    train.namespace = "Not_A_Namespace"
    with pytest.raises(ValidationError) as refused:
        train.full_clean()
    assert "namespace" in refused.value.message_dict


def test_a_pending_reason_is_one_of_the_decision_cores(train: Workload) -> None:
    for reason in get_args(PendingReason):
        WorkloadExplanation(workload=train, reason=reason).full_clean(validate_unique=False)
    with pytest.raises(ValidationError) as refused:
        WorkloadExplanation(workload=train, reason="bored").full_clean(validate_unique=False)
    assert "reason" in refused.value.message_dict
    explained(train, "quota")
    with transaction.atomic(), pytest.raises(IntegrityError):
        WorkloadExplanation.objects.filter(pk=train.pk).update(reason="bored")


def test_the_workload_reads_its_explanation_and_has_none_before_a_cycle(train: Workload) -> None:
    fresh = Workload.objects.get(pk=train.pk)
    assert (fresh.pending_reason, fresh.pending_detail, fresh.pending_facts) == ("", "", {})
    assert fresh.queue_rank is None and fresh.explanation_row() is None
    explained(train, "capacity", "Needs 8 GPUs; 7 are free.", {"asked": 8}, queue_rank=3.0)
    fresh = Workload.objects.get(pk=train.pk)
    assert (fresh.pending_reason, fresh.pending_detail) == ("capacity", "Needs 8 GPUs; 7 are free.")
    assert (fresh.pending_facts, fresh.queue_rank) == ({"asked": 8}, 3.0)
    Workload.objects.filter(pk=train.pk).delete()  # the workload's explanation goes with it
    assert not WorkloadExplanation.objects.filter(pk=train.pk).exists()


def test_queue_positions_count_from_one_among_the_queues_ranked_pending_work(
    train: Workload,
) -> None:
    assert Workload.objects.get(pk=train.pk).queue_position is None  # no cycle ranked it
    explained(train, queue_rank=-4.5)  # a key, not a position
    assert Workload.objects.get(pk=train.pk).queue_position == 1
    Workload.objects.filter(pk=train.pk).update(state="cancelled")
    assert Workload.objects.get(pk=train.pk).queue_position is None  # not pending


# What a cycle's explanation or rank writes lives apart from the workload's row, in a table
# whose only index is its key: a first explanation is an insert, a rewrite a heap-only (HOT)
# update on PostgreSQL where the page has room.
EXPLANATION_COLUMNS = {"pending_reason", "pending_detail", "pending_facts", "queue_rank"}


def _indexed(model: type[Model]) -> set[str]:
    with connection.cursor() as cursor:
        constraints = connection.introspection.get_constraints(cursor, model._meta.db_table)
    return {
        column
        for constraint in constraints.values()
        if constraint["index"] or constraint["unique"] or constraint["primary_key"]
        for column in constraint["columns"] or ()
    }


def test_explanations_are_no_column_of_the_workload_and_only_their_key_is_indexed() -> None:
    with connection.cursor() as cursor:
        columns = {
            c.name
            for c in connection.introspection.get_table_description(cursor, Workload._meta.db_table)
        }
    assert columns and not columns & EXPLANATION_COLUMNS
    assert _indexed(WorkloadExplanation) == {"workload_id"}


@pytest.mark.skipif("connection.vendor != 'postgresql'")
def test_explanation_rewrites_and_rank_writes_are_hot_updates_on_postgresql(
    train: Workload,
) -> None:
    table = WorkloadExplanation._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute("SELECT reloptions FROM pg_class WHERE relname = %s", [table])
        assert "fillfactor=70" in cursor.fetchone()[0]

        def versions() -> tuple[int, int, int]:
            cursor.execute(
                "SELECT n_tup_ins, n_tup_upd, n_tup_hot_upd FROM pg_stat_xact_user_tables "
                "WHERE relname = %s",
                [table],
            )
            ins, upd, hot = cursor.fetchone()
            return ins, upd, hot

        columns = ["reason", "detail", "facts", "queue_rank"]
        before = versions()
        upsert_rows(
            WorkloadExplanation,
            columns,
            {train.pk: ("behind", "Work ahead holds it.", {"position": 1}, 1.5)},
        )
        upsert_rows(
            WorkloadExplanation,
            columns,
            {train.pk: ("quota", "Queue team has no quota left for it.", {"free": 0}, 1.5)},
        )
        WorkloadExplanation.objects.filter(pk=train.pk).update(queue_rank=2.5)
        after = versions()
    # One insert, then two versions, both HOT.
    assert tuple(a - b for a, b in zip(after, before, strict=True)) == (1, 2, 2)
    assert Workload.objects.get(pk=train.pk).queue_position == 1


def test_a_workload_is_never_evicted_for_itself(train: Workload) -> None:
    with transaction.atomic(), pytest.raises(IntegrityError):
        Workload.objects.filter(pk=train.pk).update(evicting_for=train)


def test_a_preemptor_that_is_deleted_leaves_its_victims_no_longer_leaving_for_it(
    train: Workload,
) -> None:
    victim = do_submit_workload("victim", queue=train.queue, pod_sets=[PodSetSpec(1)])
    Workload.objects.filter(pk=victim.pk).update(evicting_for=train)
    train.delete()
    victim.refresh_from_db()
    assert victim.evicting_for is None
