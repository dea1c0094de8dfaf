"""The Submit form takes a protected runtime, as the workloads API (``protected_runtime_s``)
and ``gpupool submit --protected-runtime`` do: read by the API's own field, so that what the
API refuses is refused in its words, beside the field, with the form's other problems; and
past the queue's free maximum at a class with no budget, the submission's rule refuses it
beside the field, on the submit and in the live dry-run alike. A user whose teams have one
queue to submit to finds it chosen already."""

from __future__ import annotations

import re
from typing import Any

import pytest
from dashboard_pages import SUBMIT_FORM, field_errors, form_errors, text
from django.utils.html import escape

from gpupool.dashboard.forms import WorkloadForm
from gpupool.quotas.models import Queue
from gpupool.workloads.api import WorkloadInputSerializer
from gpupool.workloads.models import Workload

FORM = SUBMIT_FORM


def api_refusal(value: str) -> list[str]:
    """What the workloads API's serializer says of ``protected_runtime_s`` = ``value``."""
    body = {"name": "x", "queue": "nlp", "protected_runtime_s": value, "pod_sets": []}
    serializer = WorkloadInputSerializer(data=body)
    assert not serializer.is_valid()
    return [str(message) for message in serializer.errors["protected_runtime_s"]]


def protected_input(page: str) -> str:
    """The form's protected-runtime input, as the page writes it."""
    found = re.search(r'<input[^>]*name="protected_runtime_s"[^>]*>', page)
    assert found is not None, page
    return found[0]


def test_the_workload_keeps_the_protected_runtime_the_form_gives(pool: Any, page_as: Any) -> None:
    page = text(page_as("max").get("/workloads/"))
    assert "Protected runtime (seconds)" in page
    page_as("max").post("/workloads/submit/", FORM | {"protected_runtime_s": "1800"})
    assert Workload.objects.get(name="train").protected_runtime_s == 1800


@pytest.mark.parametrize(("typed", "kept"), [("", 600), ("0", 0)])
def test_a_protected_runtime_left_empty_is_the_queues_default_and_0_is_none(
    pool: Any, page_as: Any, typed: str, kept: int
) -> None:
    Queue.objects.filter(name="nlp").update(default_protected_runtime_s=600)
    page_as("max").post("/workloads/submit/", FORM | {"protected_runtime_s": typed})
    assert Workload.objects.get(name="train").protected_runtime_s == kept


@pytest.mark.parametrize("typed", ["half an hour", "-1", "1.5", str(2**31)])
def test_a_protected_runtime_the_api_refuses_is_refused_beside_it_in_the_apis_words(
    pool: Any, page_as: Any, typed: str
) -> None:
    body = FORM | {"protected_runtime_s": typed, "pods": "0"}
    response = page_as("max").post("/workloads/submit/", body)
    page = text(response)
    assert response.status_code == 400
    said = field_errors(page, "protected_runtime_s")
    assert all(escape(message) in said for message in api_refusal(typed))
    assert field_errors(page, "pods")  # in the same pass as the form's other problems
    assert f'value="{typed}"' in protected_input(page)  # what was typed is kept
    assert form_errors(page) == ""
    assert not Workload.objects.exists()


def test_protection_past_the_free_maximum_is_refused_beside_its_field_as_the_api_says(
    pool: Any, page_as: Any
) -> None:
    Queue.objects.filter(name="nlp").update(max_protected_runtime_s=3600)
    why = (
        "7200s exceeds queue nlp's free maximum of 3600s; longer protection needs a budgeted "
        "priority class"
    )
    api = page_as("max").post(
        "/api/v1/workloads/",
        {
            "name": "train",
            "queue": "nlp",
            "protected_runtime_s": 7200,
            "pod_sets": [{"count": 1, "gpus": 4, "flavor": "h100", "image": "python:3.12"}],
        },
        content_type="application/json",
    )
    assert api.status_code == 400
    assert api.json()["error"]["fields"]["protected_runtime_s"] == [why]

    body = FORM | {"protected_runtime_s": "7200"}
    page = text(page_as("max").post("/workloads/submit/", body))
    assert escape(why) in field_errors(page, "protected_runtime_s")
    assert form_errors(page) == ""
    answer = text(page_as("max").post("/workloads/dry-run/", body, HTTP_HX_REQUEST="true"))
    assert "Refused:" in answer and escape(f"Protected runtime (seconds): {why}") in answer
    assert "protected_runtime_s" not in answer
    assert not Workload.objects.exists()

    # A budgeted class may protect it longer (DESIGN 2): the same form at "high" is queued.
    page_as("max").post("/workloads/submit/", body | {"priority_class": "high"})
    assert Workload.objects.get(name="train").protected_runtime_s == 7200


def queue_options(page: str) -> str:
    """The options of the submit form's queue select."""
    found = re.search(r'<select name="queue"[^>]*>(.*?)</select>', page, re.S)
    assert found is not None, page
    return found[1]


def test_the_only_queue_a_member_may_submit_to_is_chosen_already(pool: Any, page_as: Any) -> None:
    options = queue_options(text(page_as("max").get("/workloads/")))
    assert '<option value="nlp" selected>' in options
    # An admin may submit to both teams' queues: none is chosen for them.
    options = queue_options(text(page_as("ada").get("/workloads/")))
    assert '<option value="nlp">' in options and '<option value="vision">' in options


def test_a_form_sent_back_keeps_the_queue_chosen_not_the_only_one(pool: Any) -> None:
    form = WorkloadForm(FORM | {"queue": ""}, queues=["nlp"])
    assert not form.is_valid() and "queue" in form.errors
    assert 'value="nlp" selected' not in str(form["queue"])
