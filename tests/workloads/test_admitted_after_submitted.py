"""No workload is admitted, nor moved on, before it was submitted: a transition given a moment
before the stamps a workload holds is stamped at the latest of them; the database refuses an
admission before the submission (``workload_admitted_after_submitted``); and migration
workloads 0013 mends the transitions recorded before the submission they follow."""

from __future__ import annotations

import importlib
from datetime import datetime, timedelta

import pytest
from django.apps import apps
from django.db import IntegrityError, transaction
from domain_builders import flavor, node, priority_class, queue

from gpupool.inventory.models import Node
from gpupool.workloads.actions import (
    PlacementSpec,
    PodSetSpec,
    do_submit_workload,
    do_transition_workload,
)
from gpupool.workloads.models import Workload, WorkloadTransition

pytestmark = pytest.mark.django_db

T0 = datetime.fromisoformat("2026-11-29T09:00:00+00:00")


@pytest.fixture
def workload() -> Workload:
    h100 = flavor("h100")
    node("n1", h100, gpus=8)
    priority_class("normal", default=True)
    return do_submit_workload(
        "train",
        queue=queue("team", parent=queue("root")),
        pod_sets=[PodSetSpec(1, gpus=8, flavor=h100)],
        at=T0,
    )


def test_a_transition_given_a_moment_before_the_submission_is_stamped_at_it(
    workload: Workload,
) -> None:
    placements = [PlacementSpec("main", 0, Node.objects.get(name="n1"), list(range(8)))]
    admitted = do_transition_workload(
        workload,
        "admitted",
        reason="fits",
        at=T0 - timedelta(seconds=46),  # a cycle's moment read before the submission landed
        placements=placements,
    )
    workload.refresh_from_db()
    assert admitted.at == workload.admitted_at == T0
    # A bind failure recorded at that cycle's moment comes after the admission, not before.
    back = do_transition_workload(
        workload, "pending", reason="binding failed", at=T0 - timedelta(seconds=46)
    )
    assert back.at == T0
    moments = list(workload.transitions.order_by("id").values_list("at", flat=True))
    assert moments == sorted(moments)


def test_the_database_refuses_an_admission_before_the_submission(workload: Workload) -> None:
    with pytest.raises(IntegrityError), transaction.atomic():
        Workload.objects.filter(pk=workload.pk).update(
            state="admitted", admitted_at=T0 - timedelta(seconds=1)
        )


def test_the_migration_moves_transitions_before_the_submission_to_it(
    workload: Workload,
) -> None:
    WorkloadTransition.objects.create(
        workload=workload,
        from_state="pending",
        to_state="admitted",
        at=T0 - timedelta(seconds=46),
        reason="admitted: quota and capacity allow it",
    )
    later = WorkloadTransition.objects.create(
        workload=workload,
        from_state="admitted",
        to_state="running",
        at=T0 + timedelta(minutes=1),
        reason="pods started",
    )
    migration = importlib.import_module(
        "gpupool.workloads.migrations.0013_admitted_after_submitted"
    )
    migration.mend(apps, None)
    moments = list(workload.transitions.order_by("id").values_list("at", flat=True))
    assert moments == [T0, T0, later.at]
