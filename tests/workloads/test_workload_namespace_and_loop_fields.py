"""A workload is addressed by namespace and name; the loop's fields hold only what they mean."""

from __future__ import annotations

from typing import get_args

import pytest
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from domain_builders import flavor, priority_class, queue

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
