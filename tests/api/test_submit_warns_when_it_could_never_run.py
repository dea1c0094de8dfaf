"""Work that could never run as asked is submitted all the same (DESIGN: it waits, set aside,
until a quota or the pool changes so that it could fit), but the submit's answer warns, in the
dry-run's words: ``warning`` is the dry-run's ``never_fits`` for the same body."""

from __future__ import annotations

from typing import Any

import pytest
from resources_pool import pool

from gpupool.workloads.models import Workload

pytestmark = pytest.mark.django_db

URL = "/api/v1/workloads/"


def body(name: str, count: int) -> dict[str, Any]:
    """``count`` pods of 4 h100 GPUs to nlp-train (capability 16, two 8-GPU nodes)."""
    pod_set = {"count": count, "gpus": 4, "flavor": "h100", "cpu": "8", "memory_gb": "64",
               "image": "nvcr.io/nvidia/pytorch:24.05-py3"}  # fmt: skip
    return {"name": name, "queue": "nlp-train", "pod_sets": [pod_set]}


@pytest.fixture
def resources(world: Any) -> dict[str, Any]:
    return pool(world)


def test_a_submission_that_could_never_run_warns_as_the_dry_run_says(
    api_as: Any, resources: dict
) -> None:
    dry = api_as("member").post(URL + "dry-run/", body("huge", 100), format="json").json()
    assert "can never hold 400 h100 GPUs" in dry["never_fits"]
    response = api_as("member").post(URL, body("huge", 100), format="json")
    assert response.status_code == 201, response.content  # submitted all the same
    assert response.json()["warning"] == dry["never_fits"]
    assert Workload.objects.get(name="huge").state == "pending"


def test_a_submission_that_could_run_has_no_warning(api_as: Any, resources: dict) -> None:
    response = api_as("member").post(URL, body("small", 1), format="json")
    assert response.status_code == 201, response.content
    assert response.json()["warning"] == ""
