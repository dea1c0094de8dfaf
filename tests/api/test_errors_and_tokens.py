"""Errors have one shape that names the field; tokens come for a username and password."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model
from rest_framework.test import APIClient

from gpupool.audit.models import AuditEvent

pytestmark = pytest.mark.django_db


def test_a_bad_request_names_the_field_in_the_one_error_shape(api_as: Any) -> None:
    response = api_as("admin").post(
        "/api/v1/flavors/", {"name": "a100", "sharing": "nope"}, format="json"
    )
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["status"] == 400 and error["code"] == "invalid"
    assert set(error["fields"]) == {"sharing", "gpu_memory_gb", "hourly_price"}
    assert "sharing" in error["message"]


def test_an_action_s_refusal_is_a_400_naming_the_field(api_as: Any) -> None:
    response = api_as("admin").post(
        "/api/v1/flavors/",
        {
            "name": "a100-3g.20gb",
            "sharing": "mig",
            "gpu_model": "A100-40GB",
            "mig_profile": "9g.99gb",
            "gpu_memory_gb": 20,
            "hourly_price": "1.0",
        },
        format="json",
    )
    assert response.status_code == 400
    assert "mig_profile" in response.json()["error"]["fields"]


def test_a_format_a_resource_does_not_offer_is_a_406_naming_those_it_does(api_as: Any) -> None:
    """Not DRF's 404 "Not found.": the address is right, the format is not."""
    response = api_as("admin").get("/api/v1/flavors/?format=csv")
    assert response.status_code == 406
    error = response.json()["error"]
    assert error["code"] == "not_acceptable"
    assert error["message"] == "format: 'csv' is not offered here; it answers json, api"
    assert api_as("admin").get("/api/v1/preemptions/?format=csv").status_code == 200


def test_anonymous_callers_are_asked_to_authenticate(api_as: Any) -> None:
    response = api_as("anonymous").get("/api/v1/flavors/")
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "not_authenticated"
    assert response["WWW-Authenticate"] == "Bearer"


def test_a_forbidden_call_says_so_in_the_one_shape(api_as: Any) -> None:
    response = api_as("member").delete("/api/v1/flavors/h100/")
    assert response.status_code == 403
    assert response.json()["error"] == {
        "status": 403,
        "code": "permission_denied",
        "message": "Your role does not allow this.",
    }


def test_a_user_gets_a_token_for_their_password_and_uses_it_as_bearer(world: Any) -> None:
    member = get_user_model().objects.get(username="max")
    member.set_password("pw-max-123")
    member.save()
    client = APIClient()
    answer = client.post(
        "/api/v1/tokens/", {"username": "max", "password": "pw-max-123"}, format="json"
    )
    assert answer.status_code == 200
    token = answer.json()["token"]
    assert answer.json()["username"] == "max"
    assert AuditEvent.objects.filter(action="api.issue_token", object_id=str(member.pk)).exists()
    for keyword in ("Bearer", "Token"):
        client.credentials(HTTP_AUTHORIZATION=f"{keyword} {token}")
        assert client.get("/api/v1/flavors/").status_code == 200
    again = APIClient().post(
        "/api/v1/tokens/", {"username": "max", "password": "pw-max-123"}, format="json"
    )
    assert again.json()["token"] == token


def test_a_wrong_password_gets_no_token(world: Any) -> None:
    answer = APIClient().post(
        "/api/v1/tokens/", {"username": "max", "password": "guess"}, format="json"
    )
    assert answer.status_code == 401
    assert answer.json()["error"]["message"] == "The username or password is wrong."


def test_rotating_a_token_retires_the_old_one(world: Any) -> None:
    member = get_user_model().objects.get(username="max")
    member.set_password("pw-max-123")
    member.save()
    first = APIClient().post(
        "/api/v1/tokens/", {"username": "max", "password": "pw-max-123"}, format="json"
    )
    second = APIClient().post(
        "/api/v1/tokens/",
        {"username": "max", "password": "pw-max-123", "rotate": True},
        format="json",
    )
    assert first.json()["token"] != second.json()["token"]
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {first.json()['token']}")
    assert client.get("/api/v1/flavors/").status_code == 401


@pytest.mark.parametrize("role", ["admin", "anonymous"])
@pytest.mark.parametrize("address", ["/api/v1/nope/", "/api/v1/workloads/nlp/"])
def test_an_address_that_names_no_resource_is_a_404_in_the_one_shape(
    api_as: Any, role: str, address: str
) -> None:
    """Not the site's HTML page: a client's typo reads like every other refusal."""
    for method in ("get", "post", "delete"):
        response = getattr(api_as(role), method)(address)
        assert response.status_code == 404, (method, response.content[:200])
        error = response.json()["error"]
        assert error["code"] == "not_found"
        assert address in error["message"] and "/api/v1/" in error["message"]


def test_an_address_without_its_slash_is_still_sent_to_the_slashed_one(api_as: Any) -> None:
    response = api_as("admin").get("/api/v1/flavors")
    assert response.status_code == 301
    assert response["Location"].endswith("/api/v1/flavors/")


@pytest.mark.parametrize(
    ("address", "parameter"),
    [
        ("/api/v1/queues/?leaf=maybe", "leaf"),
        ("/api/v1/nodes/?cordoned=maybe", "cordoned"),
        ("/api/v1/nodes/?unhealthy=yes%20please", "unhealthy"),
        ("/api/v1/flavors/?ordering=bogus", "ordering"),
        ("/api/v1/workloads/?ordering=-submitted_at,bogus", "ordering"),
        ("/api/v1/flavors/?page_size=-5", "page_size"),
        ("/api/v1/flavors/?page_size=abc", "page_size"),
        ("/api/v1/flavors/?page_size=5000", "page_size"),
    ],
)
def test_a_query_value_a_list_cannot_read_is_a_400_naming_it(
    api_as: Any, address: str, parameter: str
) -> None:
    """Not a list that looks filtered, sorted or sized as asked and is not."""
    response = api_as("admin").get(address)
    assert response.status_code == 400, response.content[:300]
    assert set(response.json()["error"]["fields"]) == {parameter}


def test_an_unknown_ordering_names_the_fields_the_list_sorts_by(api_as: Any) -> None:
    message = api_as("admin").get("/api/v1/workloads/?ordering=bogus").json()["error"]["message"]
    assert message.startswith("ordering: cannot sort by bogus; it sorts by ")
    assert "queue_position" in message and "submitted_at" in message


@pytest.mark.parametrize(
    "address",
    [
        "/api/v1/queues/?leaf=TRUE",
        "/api/v1/nodes/?cordoned=0",
        "/api/v1/workloads/?ordering=-submitted_at,name",
        "/api/v1/flavors/?ordering=-name&page_size=1000",
        "/api/v1/queues/?leaf=",
    ],
)
def test_what_a_list_reads_still_reads(api_as: Any, address: str) -> None:
    assert api_as("admin").get(address).status_code == 200


def test_an_error_of_no_one_field_is_under_non_field_errors_as_documented(api_as: Any) -> None:
    """A model's rule across fields answered Django's ``__all__``."""
    response = api_as("admin").post(
        "/api/v1/flavors/",
        {
            "name": "f2",
            "sharing": "mig",
            "gpu_model": "A100",
            "gpu_memory_gb": 20,
            "hourly_price": "1.0",
        },
        format="json",
    )
    assert response.status_code == 400, response.content
    fields = response.json()["error"]["fields"]
    assert "__all__" not in fields
    assert "non_field_errors" in fields, fields
