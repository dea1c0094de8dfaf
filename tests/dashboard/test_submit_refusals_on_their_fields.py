"""A submission the form lets through but the API's serializer or the submission action
refuses comes back beside the field the refusal names (``pod_sets.0.gpus`` on "GPUs per
pod", ``name`` on the name, ``expected_runtime_s`` on the expected hours); a refusal that
names no field of the form stays on the form, with its name."""

from __future__ import annotations

from typing import Any

from dashboard_pages import SUBMIT_FORM, field_errors, form_errors, text
from domain_builders import flavor

from gpupool.dashboard.forms import WorkloadForm, refusal_fields
from gpupool.workloads.models import Workload

FORM = SUBMIT_FORM


def test_the_actions_pod_set_refusal_shows_beside_gpus_per_pod(pool: Any, page_as: Any) -> None:
    # given a shared flavor, whose pods ask for one GPU each (the form does not know it)
    flavor("l40s-shared", sharing="shared", gpu_memory_gb=48)
    body = FORM | {"flavor": "l40s-shared", "gpus_per_pod": "4"}
    assert WorkloadForm(body, queues=["nlp"]).is_valid()
    # when it is submitted
    response = page_as("max").post("/workloads/submit/", body)
    page = text(response)
    # then the action's pod_sets.0.gpus is on the GPUs-per-pod field, not on the form
    assert response.status_code == 400
    assert "asks for 1 GPU, not 4" in field_errors(page, "gpus_per_pod")
    assert "asks for 1 GPU, not 4" not in form_errors(page)
    # and its pod_sets.0.gpu_milli is on the GPU share's field
    assert "l40s-shared is shared" in field_errors(page, "gpu_milli")
    assert "gpu_milli" not in form_errors(page)
    assert not Workload.objects.exists()


def test_a_name_that_is_no_dns_label_is_refused_with_the_forms_other_problems(
    pool: Any, page_as: Any
) -> None:
    """In one pass: the name was the API's to refuse, so it came back only once the form's
    own problems were fixed (the form now holds the API's rule, ``NAME_PATTERN``)."""
    body = FORM | {"name": "X X", "pods": "0", "image": ""}
    page = text(page_as("max").post("/workloads/submit/", body))
    assert "Enter a DNS label (RFC 1123)" in field_errors(page, "name")
    assert field_errors(page, "pods") and field_errors(page, "image")
    assert not Workload.objects.exists()


def test_a_runtime_past_the_bound_is_refused_beside_its_field_by_the_form(
    pool: Any, page_as: Any
) -> None:
    """The bound the API and the action keep (``MAX_EXPECTED_RUNTIME_S``, 366 days) is the
    form's too: refused beside the field, before anything is sent."""
    body = FORM | {"expected_hours": "999999.99"}
    assert not WorkloadForm(body, queues=["nlp"]).is_valid()
    page = text(page_as("max").post("/workloads/submit/", body))
    assert "at most 8784 hours (366 days)" in field_errors(page, "expected_hours")
    assert form_errors(page) == ""
    assert not Workload.objects.exists()


def test_a_name_taken_shows_beside_the_name(pool: Any, page_as: Any) -> None:
    client = page_as("max")
    client.post("/workloads/submit/", FORM)
    page = text(client.post("/workloads/submit/", FORM))
    assert "already has a workload of this name: nlp/train" in field_errors(page, "name")
    assert form_errors(page) == ""
    assert Workload.objects.filter(name="train").count() == 1


def test_refusals_are_read_by_the_field_they_name() -> None:
    serializer_errors = {
        "name": ["bad name"],
        "pod_sets": [{}, {"gpus": ["too many"], "non_field_errors": ["whole pod set"]}],
        "non_field_errors": ["the whole body"],
    }
    assert refusal_fields(serializer_errors) == {
        "name": ["bad name"],
        "pod_sets.1.gpus": ["too many"],
        "pod_sets.1": ["whole pod set"],
        "": ["the whole body"],
    }
    action_errors = {"pod_sets.0.gpus": ["one"], "__all__": ["general"]}
    assert refusal_fields(action_errors) == {"pod_sets.0.gpus": ["one"], "": ["general"]}
    assert refusal_fields(["no field named"]) == {"": ["no field named"]}
