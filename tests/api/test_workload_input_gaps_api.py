"""Small gaps of workload input and output: an expected runtime past 366 days (the longest a
pod's annotation declares) is refused naming the field, by the API, the action and the
submit form; and work that is no longer pending lists no pending reason, in the list's JSON
and CSV and in its ``?reason=`` filter, as its detail's explanation says none."""

from __future__ import annotations

import csv
import io
from typing import Any

import pytest
from django.core.exceptions import ValidationError
from domain_builders import explained
from resources_pool import pool

from gpupool.dashboard.forms import WorkloadForm
from gpupool.inventory.models import Flavor
from gpupool.quotas.models import Queue
from gpupool.workloads.actions import PodSetSpec, do_cancel_workload, do_submit_workload
from gpupool.workloads.models import Workload

pytestmark = pytest.mark.django_db

WORKLOADS = "/api/v1/workloads/"
ELEVEN_YEARS_S = 100_000 * 3600
DAYS_366_S = 366 * 24 * 3600  # the longest duration a pod's annotation declares


def body(**fields: Any) -> dict[str, Any]:
    return {
        "name": "long-1",
        "queue": "nlp-train",
        "pod_sets": [{"count": 1, "gpus": 1, "flavor": "h100", "image": "pytorch"}],
    } | fields


def test_an_expected_runtime_of_eleven_years_is_refused_naming_the_field(
    api_as: Any, world: Any
) -> None:
    pool(world)
    count = Workload.objects.count()
    response = api_as("lead").post(
        WORKLOADS, body(expected_runtime_s=ELEVEN_YEARS_S), format="json"
    )
    assert response.status_code == 400
    (said,) = response.json()["error"]["fields"]["expected_runtime_s"]
    assert said.startswith(f"at most {DAYS_366_S} seconds (8784 hours, 366 days)")
    assert Workload.objects.count() == count
    at_most = api_as("lead").post(WORKLOADS, body(expected_runtime_s=DAYS_366_S), format="json")
    assert at_most.status_code == 201, at_most.json()


def test_the_action_and_the_submit_form_refuse_it_too(world: Any) -> None:
    pool(world)
    with pytest.raises(ValidationError) as refused:
        do_submit_workload(
            "long-2",
            queue=Queue.objects.get(name="nlp-train"),
            pod_sets=[PodSetSpec(1, gpus=1, flavor=Flavor.objects.get(name="h100"))],
            submitter=world.users["lead"],
            expected_runtime_s=ELEVEN_YEARS_S,
        )
    assert list(refused.value.message_dict) == ["expected_runtime_s"]
    assert not Workload.objects.filter(name="long-2").exists()
    form = WorkloadForm(
        {"expected_hours": "100000", "pods": "1", "gpus_per_pod": "1"}, queues=["nlp-train"]
    )
    assert not form.is_valid()
    assert form.errors["expected_hours"] == [
        "at most 8784 hours (366 days): the longest runtime gpupool reads from a pod's annotation"
    ]


def test_a_cancelled_workload_lists_no_pending_reason(api_as: Any, world: Any) -> None:
    pool(world)
    workload = Workload.objects.get(namespace="nlp", name="train-1")
    explained(workload, reason="capacity", detail="no room")  # as the last cycle left it
    do_cancel_workload(workload, acting_user=None)
    client = api_as("lead")
    (row,) = [r for r in client.get(WORKLOADS).json()["results"] if r["name"] == "train-1"]
    assert (row["state"], row["pending_reason"]) == ("cancelled", "")
    exported = client.get(WORKLOADS + "?format=csv")
    rows = list(csv.DictReader(io.StringIO(b"".join(exported.streaming_content).decode())))
    (line,) = [r for r in rows if r["name"] == "train-1"]
    assert (line["state"], line["pending_reason"]) == ("cancelled", "")
    assert client.get(WORKLOADS + "?reason=capacity").json()["results"] == []
    detail = client.get(WORKLOADS + "nlp/train-1/").json()
    assert detail["pending_reason"] == "" and detail["explanation"]["reason"] == ""
