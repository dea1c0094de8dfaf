"""A submission wrong in several fields is refused naming all of them at once: GPUs per pod
that no node of the flavor holds (the size rule, ``workloads.actions.pod_set_spec_errors``)
are said together with a name that is no DNS label (the body's own check) or a name already
taken and a namespace the queue's tenant does not own (the action's), where the size rule was
said only once the others were mended. A pod set the body cannot read (an unknown flavor, no
flavor at all) is not judged by the size rule: its own refusal speaks. Same on the API, its
dry-run and the submission action; the submit page is tests/dashboard/
test_submit_page_names_every_wrong_field.py."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.cache import cache
from django.core.exceptions import ValidationError
from domain_builders import node
from rest_framework.test import APIClient
from two_teams import Pool, two_teams

from gpupool.inventory.models import Flavor
from gpupool.workloads.actions import PodSetSpec, do_submit_workload
from gpupool.workloads.api import NOT_A_DNS_LABEL
from gpupool.workloads.models import Workload

pytestmark = pytest.mark.django_db

ROUTES = ["/api/v1/workloads/", "/api/v1/workloads/dry-run/"]
TOO_BIG = "99 GPUs per pod, and a pod runs on one node: the largest h100 node has 8"
NOT_A_NAME = NOT_A_DNS_LABEL["invalid"]
TAKEN = "the namespace already has a workload of this name: nlp/big"
NOT_OWNED = "queue nlp belongs to tenant nlp, whose namespaces are nlp; 'vision' is not one of them"


@pytest.fixture
def pool(db: Any) -> Pool:
    """nlp's queue on h100, whose largest node (n1) has 8 GPUs."""
    cache.clear()  # the dry-run's snapshot is cached by cycle id, which repeats between tests
    return two_teams(lambda h100: node("n1", h100, gpus=8), ("max", "lena", "vera", "fin"))


def submit_small(pool: Pool) -> None:
    """nlp/big, a workload that fits."""
    h100 = Flavor.objects.get(name="h100")
    spec = PodSetSpec(1, gpus=1, flavor=h100, image="python:3.12")
    do_submit_workload("big", queue=pool.nlp_queue, pod_sets=[spec], submitter=pool.users["max"])


def post(pool: Pool, route: str, pod_set: dict[str, Any], **fields: Any) -> dict[str, Any]:
    """The API's 400 for a body of one pod set (1 pod of h100, python:3.12, changed)."""
    client = APIClient()
    client.force_authenticate(pool.users["max"])
    pod_set = {"count": 1, "flavor": "h100", "image": "python:3.12"} | pod_set
    body = {"name": "big", "queue": "nlp", "pod_sets": [pod_set]} | fields
    answer = client.post(route, body, "json")
    assert answer.status_code == 400, answer.content
    error: dict[str, Any] = answer.json()["error"]
    return error


@pytest.mark.parametrize("route", ROUTES)
def test_the_api_names_a_bad_name_and_too_many_gpus_at_once(pool: Pool, route: str) -> None:
    error = post(pool, route, {"gpus": 99}, name="Big!")
    assert error["fields"] == {"name": [NOT_A_NAME], "pod_sets.0.gpus": [TOO_BIG]}
    assert error["message"] == f"name: {NOT_A_NAME}; pod_sets.0.gpus: {TOO_BIG}"
    assert not Workload.objects.exists()


@pytest.mark.parametrize("route", ROUTES)
def test_the_api_names_a_taken_name_and_too_many_gpus_at_once(pool: Pool, route: str) -> None:
    submit_small(pool)
    error = post(pool, route, {"gpus": 99})
    assert error["fields"] == {"name": [TAKEN], "pod_sets.0.gpus": [TOO_BIG]}
    assert Workload.objects.count() == 1


@pytest.mark.parametrize("route", ROUTES)
def test_the_api_names_a_namespace_not_owned_and_too_many_gpus_at_once(
    pool: Pool, route: str
) -> None:
    error = post(pool, route, {"gpus": 99}, namespace="vision")
    assert error["fields"] == {"namespace": [NOT_OWNED], "pod_sets.0.gpus": [TOO_BIG]}
    assert not Workload.objects.exists()


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize(
    ("pod_set", "its_refusal"),
    [
        ({"gpus": 99, "flavor": "h999"}, {"pod_sets.0.flavor": ["No h999 exists."]}),
        ({"gpus": 99, "flavor": None}, {}),
        ({"gpus": 99, "count": 0}, {"pod_sets.0.count": ["at least 1"]}),
    ],
    ids=["an unknown flavor", "no flavor", "no pods"],
)
def test_the_api_does_not_judge_the_size_of_a_pod_set_it_cannot_read(
    pool: Pool, route: str, pod_set: dict[str, Any], its_refusal: dict[str, list[str]]
) -> None:
    error = post(pool, route, pod_set, name="Big!")
    assert set(error["fields"]) == {"name", *its_refusal}
    assert "pod_sets.0.gpus" not in error["fields"]
    assert not Workload.objects.exists()


def test_the_api_judges_each_readable_pod_set(pool: Pool) -> None:
    client = APIClient()
    client.force_authenticate(pool.users["max"])
    pod_sets = [
        {"name": "a", "count": 1, "gpus": 99, "flavor": "h100", "image": "python:3.12"},
        {"name": "b", "count": 1, "gpus": 99, "flavor": "h999", "image": "python:3.12"},
        {"name": "c", "count": 1, "gpus": 2, "flavor": "h100", "image": "python:3.12"},
    ]
    answer = client.post(
        "/api/v1/workloads/", {"name": "Big!", "queue": "nlp", "pod_sets": pod_sets}, "json"
    )
    assert answer.status_code == 400
    assert set(answer.json()["error"]["fields"]) == {
        "name",
        "pod_sets.0.gpus",
        "pod_sets.1.flavor",
    }


@pytest.mark.parametrize(
    ("fields", "other"),
    [({}, {"name": [TAKEN]}), ({"namespace": "vision"}, {"namespace": [NOT_OWNED]})],
    ids=["a taken name", "a namespace not owned"],
)
def test_the_submission_action_names_them_at_once(
    pool: Pool, fields: dict[str, Any], other: dict[str, list[str]]
) -> None:
    submit_small(pool)
    spec = PodSetSpec(1, gpus=99, flavor=Flavor.objects.get(name="h100"), image="python:3.12")
    with pytest.raises(ValidationError) as refusal:
        do_submit_workload(
            "big", queue=pool.nlp_queue, pod_sets=[spec], submitter=pool.users["max"], **fields
        )
    assert refusal.value.message_dict == {**other, "pod_sets.0.gpus": [TOO_BIG]}
    assert Workload.objects.count() == 1
