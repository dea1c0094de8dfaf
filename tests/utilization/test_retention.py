"""Activity windows past their retention go in bounded batches (the loop's and beat's runs
are in tests/control/test_loop_roll_up.py)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from domain_builders import flavor, priority_class, queue, tenant

from gpupool.utilization.actions import do_prune_activity
from gpupool.utilization.models import ActivityWindow
from gpupool.workloads.actions import PodSetSpec, do_submit_workload

pytestmark = pytest.mark.django_db


def test_a_prune_deletes_what_ended_before_the_cutoff_a_bounded_batch_at_a_time() -> None:
    now = timezone.now()
    priority_class("normal", default=True)
    team = queue("team-a", parent=queue("root"), tenant=tenant("a", namespaces=("team-a",)))
    one_gpu = [PodSetSpec(1, gpus=1, flavor=flavor("h100"))]
    job = do_submit_workload("job", queue=team, pod_sets=one_gpu, at=now - timedelta(days=60))
    for days in (50, 45, 40, 30):
        end = now - timedelta(days=days)
        ActivityWindow.objects.create(
            workload=job, tenant=team.tenant, queue=team, started_at=end - timedelta(minutes=1),
            ended_at=end, gpus=1, observed_gpu_seconds=60, active_gpu_seconds=0,
            mean_utilization=0,
        )  # fmt: skip
    cutoff = now - timedelta(days=35)

    with CaptureQueriesContext(connection) as first:
        assert do_prune_activity(before=cutoff, batch=2, batches=1) == 2
    assert do_prune_activity(before=cutoff, batch=2, batches=1) == 1
    assert do_prune_activity(before=cutoff, batch=2, batches=1) == 0

    assert [now - w.ended_at for w in ActivityWindow.objects.all()] == [timedelta(days=30)]
    assert len(first) <= 6  # a select of ids and one delete, in a savepoint
