"""The API refuses to cancel preempted work that ended there (reclaimed for sitting idle: the
loop stamped its ``finished_at``), naming the state, as it refuses any ended work."""

from __future__ import annotations

from typing import Any

import pytest
from django.utils import timezone
from resources_pool import pool

from gpupool.workloads.models import Workload, WorkloadTransition

pytestmark = pytest.mark.django_db

WORKLOADS = "/api/v1/workloads/"


def test_cancelling_preempted_work_that_ended_answers_400_and_changes_nothing(
    api_as: Any, world: Any
) -> None:
    pool(world)
    ended = timezone.now()
    Workload.objects.filter(namespace="nlp", name="train-1").update(
        state="preempted", finished_at=ended
    )
    moves = WorkloadTransition.objects.count()
    response = api_as("lead").post(WORKLOADS + "nlp/train-1/cancel/")
    assert response.status_code == 400
    assert response.json()["error"]["fields"] == {
        "state": [
            "nlp/train-1 has already ended: it is preempted, and not requeued. Nothing was changed."
        ]
    }
    workload = Workload.objects.get(namespace="nlp", name="train-1")
    assert (workload.state, workload.finished_at) == ("preempted", ended)
    assert WorkloadTransition.objects.count() == moves
