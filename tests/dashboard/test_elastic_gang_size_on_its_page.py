"""An elastic gang's page and API say its size: the pods it must run together, has and runs
now, and each time it grew into free capacity (``workloads.queries.growths``, the audit rows
the loop writes, ``control.grow_workload``)."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from gpupool.audit.models import AuditEvent
from gpupool.inventory.actions import do_save_flavor
from gpupool.inventory.models import Flavor
from gpupool.quotas.actions import do_save_priority_class, do_save_queue
from gpupool.quotas.models import PriorityClass, Queue
from gpupool.workloads.actions import PodSetSpec, do_submit_workload
from gpupool.workloads.choices import WorkloadState
from gpupool.workloads.models import Workload
from gpupool.workloads.queries import GROW_ACTION

pytestmark = pytest.mark.django_db


@pytest.fixture
def gang() -> Workload:
    flavor = do_save_flavor(
        Flavor(name="h100", gpu_memory_gb=80, hourly_price=Decimal("2"),
               node_labels={"nvidia.com/gpu.product": "NVIDIA-H100"}),
        acting_user=None,
    )  # fmt: skip
    queue = do_save_queue(Queue(name="nlp"), acting_user=None)
    do_save_priority_class(PriorityClass(name="normal", value=0, default=True), acting_user=None)
    workload = do_submit_workload(
        "elastic", queue=queue, pod_sets=[PodSetSpec(4, gpus=2, flavor=flavor)], min_member=2
    )
    Workload.objects.filter(pk=workload.pk).update(state=WorkloadState.RUNNING)
    AuditEvent.objects.create(
        action=GROW_ACTION,
        object_type="workloads.workload",
        object_id=str(workload.pk),
        object_repr="elastic",
        before={"pods": 2},
        after={"pods": 3},
        reason="grew from 2 to 3 of 4 pods: free capacity within queue nlp's deserved share",
        at=timezone.now() - timedelta(minutes=5),
    )
    workload.refresh_from_db()
    return workload


def admin() -> Any:
    return get_user_model().objects.create_superuser("root", "root@example.com", "x")


def test_the_page_says_an_elastic_gangs_size_and_when_it_grew(gang: Workload) -> None:
    page = Client()
    page.force_login(admin())
    html = page.get(f"/workloads/{gang.namespace}/{gang.name}/").content.decode()
    assert "elastic: runs with at least 2 of its 4 pods; runs 0 now" in html
    assert "grew from 2 to 3 of 4 pods: free capacity within queue nlp" in html


def test_the_api_gives_each_growth(gang: Workload) -> None:
    api = APIClient()
    api.force_authenticate(admin())
    detail = api.get(f"/api/v1/workloads/{gang.namespace}/{gang.name}/").json()
    assert [(g["from_pods"], g["to_pods"]) for g in detail["growths"]] == [(2, 3)]
    assert detail["growths"][0]["reason"].startswith("grew from 2 to 3 of 4 pods")


def test_other_work_says_nothing_of_growth(gang: Workload) -> None:
    Workload.objects.filter(pk=gang.pk).update(min_member=None)
    api = APIClient()
    api.force_authenticate(admin())
    assert api.get(f"/api/v1/workloads/{gang.namespace}/{gang.name}/").json()["growths"] == []
