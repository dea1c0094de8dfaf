"""Bad input a tester found: each is a 400 (or 413) in the API's one error shape, naming what
is wrong, never a server error or Django's HTML page (DESIGN section 5)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import override_settings
from domain_builders import priority_class
from rest_framework.test import APIClient

from gpupool.api.parsers import MAX_DEPTH
from gpupool.quotas.models import PriorityClass

pytestmark = pytest.mark.django_db

DEEP = "[" * 3000 + "]" * 3000


def error_of(response: Any, status: int) -> dict[str, Any]:
    assert response.status_code == status, (response.status_code, response.content[:300])
    assert response["Content-Type"].startswith("application/json")
    body: dict[str, Any] = response.json()["error"]
    assert body["status"] == status
    return body


# ----------------------------------------------------------------------------- bodies


@pytest.mark.parametrize("nesting", [DEEP, "[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1)])
def test_a_body_nested_too_deep_is_a_400_even_unauthenticated(world: Any, nesting: str) -> None:
    client = APIClient(raise_request_exception=False)
    body = error_of(client.post("/api/v1/tokens/", nesting, content_type="application/json"), 400)
    assert f"more than {MAX_DEPTH} levels" in body["fields"]["non_field_errors"][0]


def test_a_workload_body_nested_too_deep_is_a_400_and_nothing_is_written(api_as: Any) -> None:
    client = api_as("member")
    client.raise_request_exception = False
    deep_env = {"name": "w", "queue": "q", "pod_sets": [{"count": 1, "env": {}}]}
    inner: Any = "x"
    for _ in range(200):
        inner = [inner]
    deep_env["pod_sets"][0]["env"]["A"] = inner
    answer = client.post(
        "/api/v1/workloads/", json.dumps(deep_env), content_type="application/json"
    )
    assert "levels" in error_of(answer, 400)["message"]
    answer = client.post("/api/v1/workloads/", DEEP, content_type="application/json")
    assert "levels" in error_of(answer, 400)["message"]


def test_a_body_nested_as_deep_as_the_bound_still_reads(world: Any) -> None:
    """At the bound the body parses and is judged by its serializer (here: not an object)."""
    nesting = "[" * MAX_DEPTH + "]" * MAX_DEPTH
    client = APIClient(raise_request_exception=False)
    body = error_of(client.post("/api/v1/tokens/", nesting, content_type="application/json"), 400)
    assert "levels" not in body["message"]


@override_settings(DATA_UPLOAD_MAX_MEMORY_SIZE=1000)
@pytest.mark.parametrize("role", ["anonymous", "member"])
def test_a_body_over_the_upload_size_is_a_413_in_the_one_shape(api_as: Any, role: str) -> None:
    client = api_as(role)
    client.raise_request_exception = False
    big = json.dumps({"username": "x" * 2000, "password": "y"})
    path = "/api/v1/tokens/" if role == "anonymous" else "/api/v1/workloads/"
    body = error_of(client.post(path, big, content_type="application/json"), 413)
    assert body["code"] == "too_large"
    assert "1,000 bytes" in body["message"]


# ----------------------------------------------------------------------------- priority


@pytest.mark.parametrize("value", [99999999999, 1_000_000_001, -1_000_000_001])
def test_a_priority_value_outside_kubernetes_bounds_is_a_400_naming_value(
    api_as: Any, value: int
) -> None:
    answer = api_as("admin").post(
        "/api/v1/priority-classes/", {"name": "w17pc", "value": value}, format="json"
    )
    assert list(error_of(answer, 400)["fields"]) == ["value"]
    assert not PriorityClass.objects.filter(name="w17pc").exists()


def test_a_priority_value_at_the_bound_is_taken(api_as: Any) -> None:
    answer = api_as("admin").post(
        "/api/v1/priority-classes/", {"name": "w17pc", "value": 1_000_000_000}, format="json"
    )
    assert answer.status_code == 201, answer.content[:300]


# ----------------------------------------------------------------------------- filters


@pytest.mark.parametrize(
    ("address", "parameter", "a_word_it_takes"),
    [
        ("/api/v1/workloads/?state=bogus", "state", "pending"),
        ("/api/v1/workloads/?reason=bogus", "reason", "quota"),
        ("/api/v1/nodes/?state=ready&state=bogus", "state", "drained"),
        ("/api/v1/quota-requests/?state=bogus", "state", "submitted"),
        ("/api/v1/quota-requests/?kind=bogus", "kind", "queue-quota"),
        ("/api/v1/scheduling-cycles/?status=bogus", "status", None),
        ("/api/v1/flavors/?sharing=bogus", "sharing", None),
        ("/api/v1/priority-classes/?preemption_policy=bogus", "preemption_policy", None),
        ("/api/v1/preemptions/?reason=bogus", "reason", "idle"),
    ],
)
def test_a_choice_filter_s_refusal_lists_the_values_it_takes(
    api_as: Any, address: str, parameter: str, a_word_it_takes: str | None
) -> None:
    body = error_of(api_as("admin").get(address), 400)
    assert list(body["fields"]) == [parameter]
    message = body["fields"][parameter][0]
    assert "'bogus'" in message and "one of " in message
    assert "Select a valid choice" not in message
    if a_word_it_takes:
        assert a_word_it_takes in message.split("one of ", 1)[1]


def test_choice_filters_still_filter(api_as: Any) -> None:
    priority_class("low", 1, preemption_policy="Never")
    rows = api_as("admin").get("/api/v1/priority-classes/?preemption_policy=Never").json()
    assert [row["name"] for row in rows["results"]] == ["low"]


@pytest.mark.parametrize(
    ("address", "parameter"),
    [
        ("/api/v1/usage/?started_after=2026-12-01T00:00:00", "started_after"),
        ("/api/v1/scheduling-cycles/?since=2026-12-01T00:00:00", "since"),
        ("/api/v1/preemptions/?until=2026-12-01", "until"),
    ],
)
def test_a_time_without_a_zone_is_a_400_naming_the_parameter(
    api_as: Any, address: str, parameter: str
) -> None:
    body = error_of(api_as("admin").get(address), 400)
    assert list(body["fields"]) == [parameter]
    assert "needs a time zone" in body["fields"][parameter][0]


def test_a_time_with_a_zone_still_filters(api_as: Any) -> None:
    for query in ("since=2026-12-01T00:00:00Z", "since=2026-12-01T00:00:00%2B02:00"):
        answer = api_as("admin").get(f"/api/v1/scheduling-cycles/?{query}")
        assert answer.status_code == 200, answer.content[:300]


@pytest.mark.parametrize(
    ("day", "why"),
    [("2026-02-30", "February 2026 has 28 days"), ("2026-13-01", "month"), ("2026-04-31", "30")],
)
def test_a_report_day_that_is_not_in_the_calendar_says_so(api_as: Any, day: str, why: str) -> None:
    body = error_of(api_as("admin").get(f"/api/v1/reports/usage/?start={day}"), 400)
    message = body["fields"]["start"][0]
    assert "not a real date" in message and why in message
    assert "wrong format" not in message


# ----------------------------------------------------------------------------- schema


def test_every_read_documents_the_format_it_takes(api_as: Any) -> None:
    schema = api_as("admin").get("/api/v1/schema/?format=json").json()
    missing = [
        path
        for path, operations in schema["paths"].items()
        if "get" in operations
        and not any(
            p["in"] == "query" and p["name"] == "format"
            for p in operations["get"].get("parameters", [])
        )
    ]
    assert missing == []
    nodes = next(
        p for p in schema["paths"]["/api/v1/nodes/"]["get"]["parameters"] if p["name"] == "format"
    )
    assert nodes["schema"]["enum"] == ["json"]


@pytest.mark.django_db
def test_a_priority_value_past_kubernetes_bound_is_refused_by_the_action_too() -> None:
    # the admin site and the pages save through the action, which checks the model's fields
    from django.core.exceptions import ValidationError

    from gpupool.quotas.actions import do_save_priority_class
    from gpupool.quotas.models import PriorityClass

    with pytest.raises(ValidationError) as refused:
        do_save_priority_class(PriorityClass(name="huge", value=2_000_000_000), acting_user=None)
    assert "value" in refused.value.message_dict
    assert not PriorityClass.objects.filter(name="huge").exists()
