"""A list past its bound is refused in the product's words, naming the field, as a text past
its length is: "at most 15 entries, not 16" (``text_limits.TOO_MANY``), not DRF's "Ensure this
field has no more than 15 elements."; where the entries have a name of their own, the name:
"at most 8 pod sets, not 9", "at most 256 variables, not 257". Numbers from 1,000 up are
written with separators, in these refusals and in a text's: "at most 10,000 characters, not
10,001"."""

from __future__ import annotations

from typing import Any

import pytest
from resources_pool import pool

from gpupool.scheduler.scenario import MAX_POD_SETS
from gpupool.text_limits import too_long, too_many
from gpupool.workloads.models import MAX_COMMAND_ITEMS, MAX_ENV_VARS, Workload

pytestmark = pytest.mark.django_db

POD_SET = {"count": 1, "gpus": 1, "flavor": "h100", "image": "pytorch"}


def workload(**pod_set: Any) -> dict[str, Any]:
    """A workload's body of one pod set, changed."""
    return {"name": "bert", "queue": "nlp-train", "pod_sets": [{**POD_SET, **pod_set}]}


# (a body with one list one entry too long, the field named, what is said)
CASES = {
    "a pod set's further flavors": (
        workload(flavor_choices=["h100"] * 16),
        "pod_sets.0.flavor_choices",
        "at most 15 entries, not 16",
    ),
    "a command": (
        workload(command=["x"] * (MAX_COMMAND_ITEMS + 1)),
        "pod_sets.0.command",
        too_many(MAX_COMMAND_ITEMS, MAX_COMMAND_ITEMS + 1),
    ),
    "an environment": (
        workload(env={f"V{n}": "1" for n in range(MAX_ENV_VARS + 1)}),
        "pod_sets.0.env",
        f"at most {MAX_ENV_VARS} variables, not {MAX_ENV_VARS + 1}",
    ),
    "a workload's pod sets": (
        {**workload(), "pod_sets": [{**POD_SET, "name": f"p{n}"} for n in range(MAX_POD_SETS + 1)]},
        "pod_sets",
        f"at most {MAX_POD_SETS} pod sets, not {MAX_POD_SETS + 1}",
    ),
}


@pytest.mark.parametrize("route", ["/api/v1/workloads/", "/api/v1/workloads/dry-run/"])
@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_a_list_too_long_is_refused_in_the_products_words(
    api_as: Any, world: Any, route: str, case: tuple[dict[str, Any], str, str]
) -> None:
    pool(world)
    body, field, said = case
    response = api_as("member").post(route, body, format="json")
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert error["fields"][field] == [said]
    assert f"{field}: {said}" in error["message"]
    assert "Ensure" not in response.content.decode()
    assert not Workload.objects.filter(name="bert").exists()


def test_the_lists_words_are_the_ones_the_client_says() -> None:
    assert too_many(15, 16) == "at most 15 entries, not 16"
    assert too_many(8, 9, "pod sets") == "at most 8 pod sets, not 9"
    assert too_many(1000, 12_345) == "at most 1,000 entries, not 12,345"


def test_numbers_from_a_thousand_up_are_written_with_separators(api_as: Any, world: Any) -> None:
    pool(world)
    body = workload(command=["x"] * 1_001)
    response = api_as("member").post("/api/v1/workloads/", body, format="json")
    assert response.status_code == 400
    assert response.json()["error"]["fields"]["pod_sets.0.command"] == [
        f"at most {MAX_COMMAND_ITEMS} entries, not 1,001"
    ]
    assert too_long(10_000, 12_345) == "at most 10,000 characters, not 12,345"
