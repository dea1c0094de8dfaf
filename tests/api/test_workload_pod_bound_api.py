"""A submission asks at most ``clusters.grouping.MAX_PODS`` (10,000) pods in all, the most the
control loop takes from the cluster as one workload; before, a pod set alone could ask
100,000 (a literal of the API's), 50 cycles of pod creation before the gang could run."""

from __future__ import annotations

from typing import Any

import pytest
from resources_pool import pool

from gpupool.clusters.grouping import MAX_PODS
from gpupool.workloads.models import Workload

pytestmark = pytest.mark.django_db

URL = "/api/v1/workloads/"
WHY = f"at most {MAX_PODS} pods a workload: the most gpupool reads from the cluster as one workload"


@pytest.fixture
def resources(world: Any) -> dict[str, Any]:
    return pool(world)


def pod_set(name: str, count: int) -> dict[str, Any]:
    """A pod set of ``count`` CPU-only pods (no GPU: the bound is on pods, not capacity)."""
    return {"name": name, "count": count, "gpus": 0, "cpu": "1", "image": "busybox"}


def submission(*pod_sets: dict[str, Any]) -> dict[str, Any]:
    return {"name": "many", "queue": "nlp-train", "pod_sets": list(pod_sets)}


@pytest.mark.parametrize("path", ["", "dry-run/"])
def test_a_pod_set_of_more_pods_is_refused_naming_its_count_and_why(
    api_as: Any, resources: dict, path: str
) -> None:
    before = Workload.objects.count()
    answer = api_as("member").post(
        URL + path, submission(pod_set("main", MAX_PODS + 1)), format="json"
    )
    assert answer.status_code == 400
    assert answer.json()["error"]["fields"] == {"pod_sets.0.count": [WHY]}
    assert Workload.objects.count() == before


def test_pod_sets_of_more_pods_in_all_are_refused_naming_pod_sets(
    api_as: Any, resources: dict
) -> None:
    half = MAX_PODS // 2 + 1
    answer = api_as("member").post(
        URL, submission(pod_set("a", half), pod_set("b", half)), format="json"
    )
    assert answer.status_code == 400
    assert answer.json()["error"]["fields"] == {"pod_sets": [f"{2 * half} pods in all; {WHY}"]}
    assert not Workload.objects.filter(name="many").exists()


def test_the_bound_itself_is_taken(api_as: Any, resources: dict) -> None:
    half = MAX_PODS // 2
    answer = api_as("member").post(
        URL, submission(pod_set("a", half), pod_set("b", half)), format="json"
    )
    assert answer.status_code == 201, answer.content
    assert Workload.objects.get(name="many").total_pods() == MAX_PODS


def test_the_schema_says_the_bound(api_as: Any, resources: dict) -> None:
    schema = api_as("member").get("/api/v1/schema/?format=json").json()
    count = schema["components"]["schemas"]["PodSetInputRequest"]["properties"]["count"]
    assert count["maximum"] == MAX_PODS
