"""A request that names something the caller cannot use says what: a lead naming a queue of
a team they do not lead is told they lead no team owning it (the same words whether another
team has such a queue or none has), and an unknown priority class or flavor is named as such,
not as Django's "Object with name=... does not exist"."""

from __future__ import annotations

from typing import Any

import pytest

pytestmark = pytest.mark.django_db

URL = "/api/v1/quota-requests/"
QUOTA_ASK = {
    "kind": "queue-quota",
    "flavor": "h100",
    "payload": {"guarantee": 1, "deserved": 1, "capability": 1},
    "justification": "the new model needs a GPU",
}


def refusal(response: Any, field: str) -> str:
    assert response.status_code == 400, response.json()
    messages: list[str] = response.json()["error"]["fields"][field]
    return " ".join(messages)


@pytest.mark.parametrize("name", ["vision", "nowhere"], ids=["another team's", "no such"])
def test_a_lead_asking_for_a_queue_they_do_not_lead_is_told_so(api_as: Any, name: str) -> None:
    response = api_as("lena").post(URL, QUOTA_ASK | {"queue": name}, format="json")
    assert refusal(response, "queue") == f"You lead no team that owns a queue named {name}."


def test_an_admin_naming_no_queue_is_told_there_is_none(api_as: Any) -> None:
    response = api_as("ada").post(URL, QUOTA_ASK | {"queue": "nowhere"}, format="json")
    assert refusal(response, "queue") == "No queue named nowhere."


def test_an_unknown_priority_class_is_named_as_one(api_as: Any) -> None:
    body = {
        "kind": "budget",
        "priority_class": "nope",
        "payload": {"gpu_hours": 10},
        "justification": "more high-priority hours",
    }
    response = api_as("lena").post(URL, body, format="json")
    assert refusal(response, "priority_class") == "No priority class named nope."


def test_an_unknown_flavor_is_named_as_one(api_as: Any) -> None:
    response = api_as("lena").post(
        URL, QUOTA_ASK | {"queue": "nlp", "flavor": "a100"}, format="json"
    )
    assert refusal(response, "flavor") == "No flavor named a100."
