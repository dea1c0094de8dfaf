"""The submit page refuses, on its GPUs-per-pod field, a pod no node of its flavor could hold
(the submission action's own rule: said by the form with its other problems, else by the
action with its own), so neither the dry-run nor the submit takes it; a pod of no GPUs is a
CPU-only one, as the API and the model take it."""

from __future__ import annotations

from typing import Any

import pytest
from dashboard_pages import SUBMIT_FORM, text
from domain_builders import flavor

from gpupool.dashboard.forms import WorkloadForm
from gpupool.workloads.models import Workload

FORM = SUBMIT_FORM | {"name": "big-1"}


@pytest.mark.parametrize(
    ("flavor_name", "gpus", "why"),
    [
        ("h100", "16", "the largest h100 node has 8"),
        # past the core's bound too: the flavor's rule all the same, as the API says it
        ("h100", "1000", "1000 GPUs per pod, and a pod runs on one node: the largest h100"),
        ("gb300", "1000", "1000 GPUs per pod: at most 64 (MIG: instances), the most"),
    ],
    ids=["more than the largest node", "past the core's bound", "no node of the flavor yet"],
)
def test_gpus_no_node_holds_are_refused_on_the_field(
    pool: Any, page_as: Any, flavor_name: str, gpus: str, why: str
) -> None:
    flavor("gb300")  # no node of it yet: no flavor's rule applies
    body = FORM | {"flavor": flavor_name, "gpus_per_pod": gpus}
    response = page_as("max").post("/workloads/submit/", body)
    assert response.status_code == 400
    errors = response.context["form"].errors
    assert list(errors) == ["gpus_per_pod"] and why in errors["gpus_per_pod"][0]
    assert not Workload.objects.exists()


def test_the_page_neither_tries_nor_submits_such_a_pod(pool: Any, page_as: Any) -> None:
    client = page_as("max")
    answer = text(client.post("/workloads/dry-run/", FORM | {"gpus_per_pod": "16"}))
    assert "Refused:" in answer and "the largest h100 node has 8" in answer
    assert "It would" not in answer  # no answer of the core's
    page = client.post("/workloads/submit/", FORM | {"gpus_per_pod": "16"})
    assert page.status_code == 400 and "the largest h100 node has 8" in text(page)
    assert not Workload.objects.exists()


def test_a_pod_of_no_gpus_is_taken_as_the_api_takes_it(pool: Any, page_as: Any) -> None:
    assert WorkloadForm(FORM | {"gpus_per_pod": "0"}, queues=["nlp"]).is_valid()
    response = page_as("max").post("/workloads/submit/", FORM | {"gpus_per_pod": "0"})
    assert response.status_code == 302
    assert Workload.objects.get(name="big-1").pod_sets.get().gpus == 0
