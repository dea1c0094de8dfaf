"""The submit form asks a shared (fractional-GPU) flavor's pods for their GPU share, in
milli-GPU as the API's ``pod_sets[].gpu_milli``: the share goes into the body of the submit
and of the live dry-run, and the submission action's rule (``PodSet.clean``: needed on a
shared flavor, refused on a whole-GPU one) comes back beside the share's field, with or
without scripts."""

from __future__ import annotations

from typing import Any

import pytest
from dashboard_pages import SUBMIT_FORM, field_errors, form_errors, text
from domain_builders import flavor, node, quota

from gpupool.dashboard.forms import WorkloadForm
from gpupool.workloads.models import Workload

FORM = SUBMIT_FORM | {
    "name": "infer",
    "flavor": "l40s-shared",
    "pods": "2",
    "gpus_per_pod": "1",
    "gpu_milli": "250",
    "expected_hours": "1",
}


@pytest.fixture
def shared(pool: Any) -> Any:
    """A shared flavor of one 4-GPU node; nlp may use 1 GPU of it (guarantee 0.5)."""
    l40s = flavor("l40s-shared", sharing="shared", gpu_memory_gb=48)
    node("s1", l40s, gpus=4)
    quota(pool.nlp_queue, l40s, "0.5", 1, 1)
    return pool


def test_a_shared_flavor_submission_from_the_form_asks_its_share(shared: Any, page_as: Any) -> None:
    response = page_as("max").post("/workloads/submit/", FORM)
    assert response.status_code == 302, form_errors(text(response))
    pod_set = Workload.objects.get(name="infer").pod_sets.get()
    assert (pod_set.flavor.name, pod_set.gpus, pod_set.gpu_milli, pod_set.count) == (
        "l40s-shared",
        1,
        250,
        2,
    )


@pytest.mark.parametrize(
    ("changes", "why"),
    [
        ({"gpu_milli": ""}, "l40s-shared is shared: say the fraction per pod"),
        ({"flavor": "h100"}, "only pods on a shared flavor ask for a milli-GPU fraction"),
    ],
    ids=["no share for a shared flavor", "a share for a whole-GPU flavor"],
)
def test_the_share_rule_is_refused_beside_the_share(
    shared: Any, page_as: Any, changes: dict[str, str], why: str
) -> None:
    response = page_as("max").post("/workloads/submit/", FORM | changes)
    page = text(response)
    assert response.status_code == 400
    assert why in field_errors(page, "gpu_milli")
    assert form_errors(page) == ""
    assert not Workload.objects.exists()


@pytest.mark.parametrize("share", ["0", "1001", "half"])
def test_a_share_out_of_range_is_refused_on_the_field(shared: Any, share: str) -> None:
    form = WorkloadForm(FORM | {"gpu_milli": share}, queues=["nlp"])
    assert not form.is_valid()
    assert list(form.errors) == ["gpu_milli"]


def test_the_dry_run_answers_for_a_shared_flavor(shared: Any, page_as: Any) -> None:
    client = page_as("max")
    answer = text(client.post("/workloads/dry-run/", FORM, HTTP_HX_REQUEST="true"))
    assert "It would start now" in answer, answer
    # the share is what is tried: 2 pods of 600 milli ask 1.2 GPUs, past nlp's capability of 1
    answer = text(
        client.post("/workloads/dry-run/", FORM | {"gpu_milli": "600"}, HTTP_HX_REQUEST="true")
    )
    assert "It would never run" in answer, answer  # past its capability: never, not "wait"
    assert "Queue nlp can never hold 1.2 l40s-shared GPUs" in answer, answer
    assert not Workload.objects.exists()


def test_the_page_offers_the_share_for_the_shared_flavors(shared: Any, page_as: Any) -> None:
    page = text(page_as("max").get("/workloads/"))
    assert 'data-shared-flavors="l40s-shared"' in page
    assert 'name="gpu_milli"' in page and 'min="1"' in page and 'max="1000"' in page
