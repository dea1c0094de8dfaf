"""The submit page names every wrong field of a submission at once, beside each field: GPUs
per pod that no node of the flavor holds together with a name already taken (the submission
action's refusal), in the submit and in the live dry-run, as with a name that is no DNS label
(the form's own); the API's side is tests/workloads/test_submission_names_every_wrong_field.py."""

from __future__ import annotations

from typing import Any

from dashboard_pages import SUBMIT_FORM, field_errors, text

from gpupool.workloads.models import Workload

TOO_BIG = "99 GPUs per pod, and a pod runs on one node: the largest h100 node has 8"
TAKEN = "the namespace already has a workload of this name: nlp/train"


def test_a_taken_name_and_too_many_gpus_are_said_beside_their_fields(
    pool: Any, page_as: Any
) -> None:
    client = page_as("max")
    assert client.post("/workloads/submit/", SUBMIT_FORM).status_code == 302  # nlp/train
    response = client.post("/workloads/submit/", SUBMIT_FORM | {"gpus_per_pod": "99"})
    page = text(response)
    assert response.status_code == 400
    assert TAKEN in field_errors(page, "name")
    assert TOO_BIG in field_errors(page, "gpus_per_pod")
    assert Workload.objects.count() == 1


def test_the_dry_run_says_both_too(pool: Any, page_as: Any) -> None:
    client = page_as("max")
    assert client.post("/workloads/submit/", SUBMIT_FORM).status_code == 302
    answer = text(client.post("/workloads/dry-run/", SUBMIT_FORM | {"gpus_per_pod": "99"}))
    assert TAKEN in answer and TOO_BIG in answer
    assert Workload.objects.count() == 1


def test_a_name_that_is_no_dns_label_and_too_many_gpus_are_said_beside_their_fields(
    pool: Any, page_as: Any
) -> None:
    response = page_as("max").post(
        "/workloads/submit/", SUBMIT_FORM | {"name": "Train!", "gpus_per_pod": "99"}
    )
    page = text(response)
    assert response.status_code == 400
    assert "Enter a DNS label" in field_errors(page, "name")
    assert TOO_BIG in field_errors(page, "gpus_per_pod")
    assert not Workload.objects.exists()
