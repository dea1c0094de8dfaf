"""Workloads go to leaf queues: a leaf still holding unfinished work cannot be given a child
(it would stop being a leaf, and its work could no longer be submitted or scheduled), neither
by creating a queue under it nor by moving one there; once its work has finished it may."""

from typing import Any

import pytest
from django.core.exceptions import ValidationError
from domain_builders import flavor, priority_class, queue, tenant, user
from rest_framework.test import APIClient

from gpupool.quotas.actions import do_save_queue
from gpupool.quotas.models import Queue
from gpupool.workloads.actions import PodSetSpec, do_cancel_workload, do_submit_workload

pytestmark = pytest.mark.django_db


@pytest.fixture
def busy_leaf() -> dict[str, Any]:
    """Leaf nlp (tenant nlp) under the root, holding one pending workload."""
    priority_class("normal", default=True)
    h100 = flavor("h100")
    root = queue("root")
    nlp = queue("nlp", parent=root, tenant=tenant("nlp", namespaces=("nlp",)))
    work = do_submit_workload("train", queue=nlp, pod_sets=[PodSetSpec(1, gpus=1, flavor=h100)])
    client = APIClient()
    client.force_authenticate(user("ada", admin=True))
    return {"root": root, "nlp": nlp, "work": work, "api": client}


def test_a_queue_under_a_leaf_holding_work_is_refused_naming_parent(busy_leaf: dict) -> None:
    response = busy_leaf["api"].post(
        "/api/v1/queues/", {"name": "tmpq2", "parent": "nlp"}, format="json"
    )
    assert response.status_code == 400, response.content
    assert "unfinished workload" in response.json()["error"]["fields"]["parent"][0]
    assert not Queue.objects.filter(name="tmpq2").exists()
    assert busy_leaf["nlp"].is_leaf()


def test_moving_a_queue_under_a_leaf_holding_work_is_refused(busy_leaf: dict) -> None:
    other = queue("vision", parent=busy_leaf["root"])
    other.parent = busy_leaf["nlp"]
    with pytest.raises(ValidationError) as error:
        do_save_queue(other, acting_user=None)
    assert "parent" in error.value.message_dict
    assert Queue.objects.get(name="vision").parent == busy_leaf["root"]


def test_a_leaf_whose_work_has_finished_may_take_a_child(busy_leaf: dict) -> None:
    do_cancel_workload(busy_leaf["work"], acting_user=None, reason="done with it")
    response = busy_leaf["api"].post(
        "/api/v1/queues/", {"name": "tmpq2", "parent": "nlp"}, format="json"
    )
    assert response.status_code == 201, response.content
    assert not Queue.objects.get(name="nlp").is_leaf()
