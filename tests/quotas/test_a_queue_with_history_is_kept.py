"""A queue that held work keeps its history (workloads, usage: accounting), so it is not
deleted: the API and the admin's delete page say so, with how much history and since when,
and how to retire it (remove its quotas); while its work has not ended they say that. A queue
that never held work is still deleted."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from domain_builders import flavor, priority_class, queue, tenant, user
from rest_framework.test import APIClient

from gpupool.accounting.models import UsageInterval
from gpupool.inventory.models import Flavor
from gpupool.quotas.models import Queue
from gpupool.workloads.actions import PodSetSpec, do_submit_workload, do_transition_workload

pytestmark = pytest.mark.django_db


@pytest.fixture
def eval_queue() -> Queue:
    """nlp_x.eval under the root, with one workload submitted to it (pending)."""
    flavor("h100")
    priority_class("normal", default=True)
    submitter = user("max")
    nlp = tenant("nlp", members=(submitter,), namespaces=("nlp",))
    made = queue("nlp_x.eval", parent=queue("root"), tenant=nlp)
    spec = PodSetSpec(1, gpus=1, flavor=Flavor.objects.get(name="h100"), image="pytorch", cpu=1)
    do_submit_workload("eval-1", queue=made, pod_sets=[spec], submitter=submitter)
    return made


def end_its_work(on: Queue) -> None:
    """The queue's workload ran an hour from 2026-03-02 and was cancelled."""
    workload = on.workloads.get()
    UsageInterval.objects.create(
        workload=workload,
        tenant=on.tenant,
        queue=on,
        flavor=Flavor.objects.get(name="h100"),
        priority_class=workload.priority_class,
        gpus=1,
        started_at=datetime(2026, 3, 2, 10, tzinfo=UTC),
        ended_at=datetime(2026, 3, 2, 11, tzinfo=UTC),
    )
    do_transition_workload(workload, "cancelled", reason="done", at=timezone.now())


@pytest.fixture
def admin_api() -> APIClient:
    client = APIClient()
    client.force_authenticate(user("ada", admin=True))
    return client


def refusal(response: Any) -> str:
    assert response.status_code == 400, response.content
    return " ".join(response.json()["error"]["fields"]["queue"])


def test_deleting_a_queue_whose_work_ended_says_it_keeps_its_history(
    admin_api: APIClient, eval_queue: Queue
) -> None:
    end_its_work(eval_queue)
    said = refusal(admin_api.delete("/api/v1/queues/nlp_x.eval/"))
    assert said == (
        "queue nlp_x.eval has history (1 workload, usage since 2026-03-02), which accounting "
        "keeps: it cannot be deleted; remove its quotas to retire it (a queue with no quota "
        "gets no GPUs)"
    )
    assert Queue.objects.filter(name="nlp_x.eval").exists()


def test_deleting_a_queue_with_work_not_ended_says_so(
    admin_api: APIClient, eval_queue: Queue
) -> None:
    said = refusal(admin_api.delete("/api/v1/queues/nlp_x.eval/"))
    assert said.startswith("queue nlp_x.eval still has 1 workload that has not ended")
    assert Queue.objects.filter(name="nlp_x.eval").exists()


def test_the_admin_delete_page_says_the_history_is_kept(
    admin_client: Client, eval_queue: Queue
) -> None:
    end_its_work(eval_queue)
    url = reverse("admin:quotas_queue_delete", args=[eval_queue.pk])
    for response in (admin_client.get(url), admin_client.post(url, {"post": "yes"})):
        assert response.status_code == 200
        text = response.content.decode()
        assert "queue nlp_x.eval has history (1 workload, usage since 2026-03-02)" in text
        assert "permission to delete" not in text
    assert Queue.objects.filter(name="nlp_x.eval").exists()


def test_a_queue_that_never_held_work_is_deleted(admin_api: APIClient, eval_queue: Queue) -> None:
    queue("spare", parent=Queue.objects.get(name="root"))
    assert admin_api.delete("/api/v1/queues/spare/").status_code == 204
    assert not Queue.objects.filter(name="spare").exists()
