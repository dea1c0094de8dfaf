"""PATCH /queues/<name>/ {"tenant": ...}: refused, naming tenant, once the queue has held work
(its members would lose sight of it and the other tenant's would see it all)."""

from __future__ import annotations

from typing import Any

import pytest
from resources_pool import pool

from gpupool.quotas.models import Queue

pytestmark = pytest.mark.django_db


@pytest.fixture
def resources(world: Any) -> dict[str, Any]:
    return pool(world)


def test_a_queue_holding_work_is_not_moved_to_another_tenant(api_as: Any, resources: dict) -> None:
    answer = api_as("admin").patch("/api/v1/queues/nlp-train/", {"tenant": "vision"}, format="json")
    assert answer.status_code == 400, answer.content
    assert list(answer.json()["error"]["fields"]) == ["tenant"]
    assert Queue.objects.get(name="nlp-train").tenant.name == "nlp"
    # nlp's member still sees nlp's workload; vision's lead does not
    assert [w["name"] for w in api_as("member").get("/api/v1/workloads/").json()["results"]] == [
        "train-1"
    ]


def test_a_queue_without_work_may_move(api_as: Any, resources: dict, world: Any) -> None:
    api_as("admin").post(
        "/api/v1/queues/", {"name": "spare", "parent": "root", "tenant": "nlp"}, format="json"
    )
    answer = api_as("admin").patch("/api/v1/queues/spare/", {"tenant": "vision"}, format="json")
    assert answer.status_code == 200, answer.content
    assert answer.json()["tenant"] == "vision"
