"""A filter that names a thing of the pool answers a 400 naming the filter for a name that
matches nothing, on every list alike (docs/api.md, "Errors"): ``nodes/?flavor=nope`` as
``workloads/?queue=nope`` (an empty list would read as "nothing there";
``test_list_filters_name_known_things.py`` has every such filter). A filter over a fixed
vocabulary (``nodes/?state=``) answers 400 naming it too, listing the words it takes."""

from __future__ import annotations

from typing import Any

import pytest
from resources_pool import pool

pytestmark = pytest.mark.django_db


@pytest.fixture
def resources(world: Any) -> dict[str, Any]:
    return pool(world)


@pytest.mark.parametrize(
    "url",
    [
        "/api/v1/nodes/?flavor=nope",
        "/api/v1/workloads/?queue=nope",
        "/api/v1/workloads/?tenant=nope",
        "/api/v1/queues/?tenant=nope",
        "/api/v1/preemptions/?tenant=nope",
        "/api/v1/usage/?flavor=nope",
    ],
)
def test_a_name_that_matches_nothing_is_a_400_naming_the_filter(
    api_as: Any, resources: dict, url: str
) -> None:
    answer = api_as("admin").get(url)
    assert answer.status_code == 400
    [(field, [said])] = answer.json()["error"]["fields"].items()
    assert url.endswith(f"?{field}=nope") and said.endswith(" named nope.")


def test_the_same_filter_with_a_name_that_exists_filters(api_as: Any, resources: dict) -> None:
    names = [
        n["name"] for n in api_as("member").get("/api/v1/nodes/?flavor=h100").json()["results"]
    ]
    assert names == ["n1", "n2"]


def test_a_value_outside_a_fixed_vocabulary_is_a_400_naming_it(
    api_as: Any, resources: dict
) -> None:
    answer = api_as("member").get("/api/v1/nodes/?state=nope")
    assert answer.status_code == 400 and list(answer.json()["error"]["fields"]) == ["state"]
