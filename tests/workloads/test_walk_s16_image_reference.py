"""Walk-through s16: a pod set's image must be a container image reference, checked in one
place (``workloads.actions.image_reference_error``, asked by ``do_submit_workload``): the
submit form, the API's submission and its dry-run all refuse "not an image" naming ``image``
and write nothing. The grammar is the one of distribution/reference's reference.go:
[host[:port]/]path[:tag][@sha256:digest]."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.cache import cache
from django.core.exceptions import ValidationError
from django.test import Client
from domain_builders import node
from rest_framework.test import APIClient
from two_teams import Pool, two_teams

from gpupool.workloads.actions import PodSetSpec, do_submit_workload, image_reference_error
from gpupool.workloads.models import Workload

pytestmark = pytest.mark.django_db

REFUSED = "'not an image' is not a container image reference (e.g. ghcr.io/team/train:1.4)"
DIGEST = "sha256:" + "0123456789abcdef" * 4


@pytest.fixture
def pool(db: Any) -> Pool:
    cache.clear()  # the dry-run's snapshot is cached by cycle id, which repeats between tests
    return two_teams(lambda h100: node("n1", h100, gpus=8), ("max", "lena", "vera", "fin"))


@pytest.mark.parametrize(
    "image",
    [
        "python:3.12",
        "busybox",
        "nvcr.io/nvidia/pytorch:24.05-py3",
        "ghcr.io/team/train:1.4",
        "localhost:5000/team/train",
        "registry.k8s.io/pause:3.10",
        f"ghcr.io/team/train@{DIGEST}",
        f"ghcr.io/team/train:1.4@{DIGEST}",
        "team/my_model__v2/train-job.x",
        "train:" + "a" * 128,
        "[::1]:5000/train",
    ],
)
def test_image_references_are_taken(image: str) -> None:
    assert image_reference_error(image) is None


@pytest.mark.parametrize(
    "image",
    [
        "not an image",
        "not an image !!",
        "Team/Train",
        "train:.hidden",
        "train:-dash",
        "train:" + "a" * 129,
        "train@sha256:abc",
        "/train",
        "train/",
        "-train",
        "team//train",
        "team/train:1.4:latest",
        "a" * 256,
    ],
)
def test_what_is_no_image_reference_is_refused_in_words(image: str) -> None:
    why = image_reference_error(image)
    assert why is not None
    assert why.startswith(f"{image!r} is not a container image reference (e.g. ")


def test_the_submission_action_refuses_it_naming_the_pod_sets_image(pool: Pool) -> None:
    with pytest.raises(ValidationError) as error:
        do_submit_workload(
            "train",
            queue=pool.nlp_queue,
            pod_sets=[PodSetSpec(1, gpus=1, flavor=pool.h100, image="not an image")],
            submitter=pool.users["max"],
        )
    assert error.value.message_dict == {"pod_sets.0.image": [REFUSED]}
    assert not Workload.objects.exists()


def body(image: str) -> dict[str, Any]:
    return {
        "name": "train",
        "queue": "nlp",
        "pod_sets": [{"count": 1, "gpus": 1, "flavor": "h100", "image": image}],
    }


@pytest.mark.parametrize("route", ["/api/v1/workloads/", "/api/v1/workloads/dry-run/"])
def test_the_api_and_its_dry_run_refuse_it(pool: Pool, route: str) -> None:
    client = APIClient()
    client.force_authenticate(pool.users["max"])
    answer = client.post(route, body("not an image"), format="json")
    assert answer.status_code == 400, answer.content
    assert answer.json()["error"]["fields"] == {"pod_sets.0.image": [REFUSED]}
    assert not Workload.objects.exists()
    assert client.post(route, body("ghcr.io/team/train:1.4"), format="json").status_code in (
        200,
        201,
    )


FORM = {
    "name": "train",
    "queue": "nlp",
    "priority_class": "",
    "flavor": "h100",
    "pods": "1",
    "gpus_per_pod": "1",
    "topology": "",
    "expected_hours": "2",
}


def test_the_submit_form_and_its_live_dry_run_say_it_beside_the_image(pool: Pool) -> None:
    client = Client()
    client.force_login(pool.users["max"])
    page = client.post("/workloads/submit/", FORM | {"image": "not an image"}).content.decode()
    assert REFUSED.replace("'", "&#x27;") in page
    assert not Workload.objects.exists()
    answer = client.post(
        "/workloads/dry-run/", FORM | {"image": "not an image"}, HTTP_HX_REQUEST="true"
    ).content.decode()
    assert "Container image: " + REFUSED.replace("'", "&#x27;") in answer
    assert not Workload.objects.exists()
