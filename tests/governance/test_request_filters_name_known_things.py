"""The requests list filtered by a name that names nothing (``?tenant=nosuch``) is a 400
naming the filter, in the words a request's body gets for the same name ("No tenant named
nosuch."), not an empty list that reads as "no requests". A known name with no request is
still an empty list."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from rest_framework.test import APIClient

pytestmark = pytest.mark.django_db

LIST = "/api/v1/quota-requests/"


@pytest.mark.parametrize(
    ("field", "said"),
    [
        ("tenant", "No tenant named nosuch."),
        ("queue", "No queue named nosuch."),
        ("flavor", "No flavor named nosuch."),
        ("priority_class", "No priority class named nosuch."),
        ("requested_by", "No user named nosuch."),
    ],
)
@pytest.mark.parametrize("name", ["lena", "ada", "fin"])
def test_an_unknown_name_is_a_400_naming_the_filter(
    api_as: Callable[[str], APIClient],
    file_request: Callable[..., dict[str, Any]],
    name: str,
    field: str,
    said: str,
) -> None:
    file_request(submit=True)
    response = api_as(name).get(LIST, {field: "nosuch"})
    assert response.status_code == 400, response.json()
    assert response.json()["error"]["fields"] == {field: [said]}


def test_each_unknown_name_is_named_at_once(api_as: Callable[[str], APIClient]) -> None:
    response = api_as("ada").get(LIST, {"tenant": "nosuch", "flavor": "a100", "queue": "nlp"})
    assert response.status_code == 400
    assert response.json()["error"]["fields"] == {
        "tenant": ["No tenant named nosuch."],
        "flavor": ["No flavor named a100."],
    }


def test_a_known_name_with_no_request_is_an_empty_list(
    api_as: Callable[[str], APIClient], file_request: Callable[..., dict[str, Any]]
) -> None:
    file_request(submit=True)
    client = api_as("ada")
    assert client.get(LIST, {"tenant": "vision"}).json()["results"] == []
    [found] = client.get(LIST, {"tenant": "nlp", "requested_by": "lena"}).json()["results"]
    assert (found["tenant"], found["requested_by"]) == ("nlp", "lena")
