"""Migration workloads 0011: preempted work recorded before the loop stamped a preemption that
ends it (a bare pod; work reclaimed for sitting idle) kept ``finished_at`` null and read as
unfinished for ever. The migration stamps those with their preemption, and leaves preempted
work that is about to be requeued alone."""

from __future__ import annotations

import importlib
from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.apps import apps
from django.utils import timezone
from domain_builders import flavor, node, priority_class, queue, quota, tenant

from gpupool.accounting.models import PreemptionEvent
from gpupool.workloads.choices import unfinished
from gpupool.workloads.models import Workload, WorkloadTransition

pytestmark = pytest.mark.django_db

migration = importlib.import_module("gpupool.workloads.migrations.0011_ended_preemptions_finished")


def preempted(name: str, origin: str, reason: str, team: Any, at: Any) -> Workload:
    """A workload as the loop left it preempted before 0011: no finished_at."""
    workload = Workload.objects.create(
        name=name,
        namespace="nlp",
        queue=team,
        priority_class=priority_class("normal", default=True)
        if not Workload.objects.exists()
        else Workload.objects.first().priority_class,
        origin=origin,
        state="preempted",
        submitted_at=at - timedelta(hours=2),
    )
    WorkloadTransition.objects.create(
        workload=workload, from_state="running", to_state="preempted", at=at, reason="evicted"
    )
    PreemptionEvent.objects.create(
        at=at,
        reason=reason,
        victim=workload,
        victim_queue=team,
        gpus_freed=Decimal(1),
        lost_gpu_hours=Decimal(1),
    )
    return workload


def test_ended_preemptions_are_stamped_and_requeued_ones_left_alone() -> None:
    h100 = flavor("h100")
    node("n1", h100)
    team = queue("nlp", parent=queue("root"), tenant=tenant("nlp", namespaces=("nlp",)))
    quota(team, h100, 0, 8, 8)
    at = timezone.now().replace(microsecond=0)
    bare = preempted("bare", "bare", "node-failure", team, at)
    idle = preempted("idle", "gpupool", "idle", team, at + timedelta(minutes=1))
    requeued = preempted("requeued", "gpupool", "preempt", team, at + timedelta(minutes=2))
    migration.stamp(apps, None)
    stamped = dict(Workload.objects.values_list("name", "finished_at"))
    assert stamped == {"bare": at, "idle": at + timedelta(minutes=1), "requeued": None}
    assert list(Workload.objects.filter(unfinished()).values_list("name", flat=True)) == [
        "requeued"
    ]
    assert {bare.pk, idle.pk, requeued.pk} == set(Workload.objects.values_list("pk", flat=True))
