"""A workload is addressed by namespace and name; the loop's fields hold only what they mean."""

from __future__ import annotations

from typing import get_args

import pytest
from django.core.exceptions import ValidationError
from django.db import IntegrityError, connection, transaction
from domain_builders import flavor, priority_class, queue

from gpupool.bulk import update_rows
from gpupool.scheduler.types import PendingReason
from gpupool.workloads.actions import PodSetSpec, do_submit_workload
from gpupool.workloads.models import Workload

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
        train.pending_reason = reason
        train.full_clean()
    train.pending_reason = "bored"
    with pytest.raises(ValidationError) as refused:
        train.full_clean()
    assert "pending_reason" in refused.value.message_dict
    with transaction.atomic(), pytest.raises(IntegrityError):
        Workload.objects.filter(pk=train.pk).update(pending_reason="bored")


def test_queue_positions_count_from_one_among_the_queues_ranked_pending_work(
    train: Workload,
) -> None:
    assert Workload.objects.get(pk=train.pk).queue_position is None  # no cycle ranked it
    Workload.objects.filter(pk=train.pk).update(queue_rank=-4.5)  # a key, not a position
    assert Workload.objects.get(pk=train.pk).queue_position == 1
    Workload.objects.filter(pk=train.pk).update(state="cancelled")
    assert Workload.objects.get(pk=train.pk).queue_position is None  # not pending


# What a cycle's explanation or rank writes; no index may hold any of them, so that on
# PostgreSQL those writes are heap-only (HOT) updates where the page has room.
EXPLANATION_COLUMNS = {"pending_reason", "pending_detail", "pending_facts", "queue_rank"}


def test_no_index_holds_a_column_only_explanations_and_ranks_write() -> None:
    with connection.cursor() as cursor:
        constraints = connection.introspection.get_constraints(cursor, Workload._meta.db_table)
    indexed = {
        column
        for constraint in constraints.values()
        if constraint["index"] or constraint["unique"] or constraint["primary_key"]
        for column in constraint["columns"] or ()
    }
    assert indexed  # the table has indexes, and none of these columns is in one
    assert not indexed & EXPLANATION_COLUMNS


@pytest.mark.skipif("connection.vendor != 'postgresql'")
def test_explanation_and_rank_writes_are_hot_updates_on_postgresql(train: Workload) -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT reloptions FROM pg_class WHERE relname = %s", [Workload._meta.db_table]
        )
        assert "fillfactor=85" in cursor.fetchone()[0]

        def versions() -> tuple[int, int]:
            cursor.execute(
                "SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_xact_user_tables WHERE relname = %s",
                [Workload._meta.db_table],
            )
            upd, hot = cursor.fetchone()
            return upd, hot

        before = versions()
        update_rows(
            Workload,
            ["pending_reason", "pending_detail", "pending_facts", "queue_rank"],
            {train.pk: ("behind", "Work ahead holds it.", {"position": 1}, 1.5)},
        )
        Workload.objects.filter(pk=train.pk).update(queue_rank=2.5)
        after = versions()
    assert (after[0] - before[0], after[1] - before[1]) == (2, 2)  # two versions, both HOT
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
