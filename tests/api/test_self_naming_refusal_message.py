"""A refusal of a step in the state its target is in (cancelling work that has ended) says, in
the API error's ``message``, the action's sentence alone, as the pages and the CLI say it:
"nlp/train-1 has already ended: ...", not "state: nlp/train-1 has already ended: ...". The
field stays in ``fields``, as DRF names it; a refusal of an ordinary field still names it."""

from __future__ import annotations

from typing import Any

import pytest
from resources_pool import pool

from gpupool.workloads.models import Workload

pytestmark = pytest.mark.django_db

WORKLOADS = "/api/v1/workloads/"


def test_cancelling_ended_work_says_the_sentence_without_the_field_name(
    api_as: Any, world: Any
) -> None:
    pool(world)
    Workload.objects.filter(namespace="nlp", name="train-1").update(state="succeeded")
    response = api_as("lead").post(WORKLOADS + "nlp/train-1/cancel/")
    assert response.status_code == 400
    error = response.json()["error"]
    said = "nlp/train-1 has already ended: it is succeeded. Nothing was changed."
    assert error["message"] == said
    assert error["fields"] == {"state": [said]}


def test_a_refusal_of_an_ordinary_field_still_names_it(api_as: Any, world: Any) -> None:
    pool(world)
    response = api_as("lead").post(WORKLOADS, {"queue": "nlp"}, format="json")
    assert response.status_code == 400
    error = response.json()["error"]
    assert "pod_sets: This field is required." in error["message"]


def test_a_filter_named_state_is_named_as_any_other_field(api_as: Any, world: Any) -> None:
    pool(world)
    response = api_as("lead").get(WORKLOADS + "?state=asleep")
    assert response.status_code == 400
    assert response.json()["error"]["message"].startswith("state: 'asleep' is not a state")
