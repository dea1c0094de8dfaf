"""The budgets and the requests lists filter by several teams, the parameter repeated as the
lists' other multi-value filters take theirs (``state=a&state=b``): ``tenant=nlp&tenant=vision``
keeps the rows of either, in JSON and as CSV, within the caller's scope; each name that names
no team is refused at once, naming the filter; and the schema says so (an array, exploded, as
it says of ``state``). The Requests page's links for a lead of several teams are built on
it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from csv_exports import downloaded
from domain_builders import tenant, this_month
from drf_spectacular.generators import SchemaGenerator
from rest_framework.test import APIClient

from gpupool.quotas.actions import do_grant_budget

pytestmark = pytest.mark.django_db

BUDGETS = "/api/v1/budgets/"
REQUESTS = "/api/v1/quota-requests/"


@pytest.fixture
def three_teams(pool: Any) -> None:
    """nlp, vision and speech each have a budget of this month at high."""
    start, end = this_month()
    speech = tenant("speech")
    for team in (pool.nlp, pool.vision, speech):
        do_grant_budget(
            team, pool.high, period_start=start, period_end=end, gpu_hours="10", acting_user=None
        )


def teams(client: APIClient, url: str, query: dict[str, Any]) -> list[str]:
    answer = client.get(url, query)
    assert answer.status_code == 200, answer.json()
    return sorted(row["tenant"] for row in answer.json()["results"])


def test_budgets_of_several_teams(api_as: Callable[[str], APIClient], three_teams: None) -> None:
    finance = api_as("fin")
    assert teams(finance, BUDGETS, {"tenant": ["nlp", "vision"]}) == ["nlp", "vision"]
    assert teams(finance, BUDGETS, {"tenant": ["vision"]}) == ["vision"]
    assert teams(finance, BUDGETS, {}) == ["nlp", "speech", "vision"]
    rows = downloaded(finance, f"{BUDGETS}?tenant=speech&tenant=nlp&ordering=tenant__name")
    assert [row["tenant"] for row in rows] == ["nlp", "speech"]
    # Within the caller's scope: lena reads nlp's only, whatever she names.
    assert teams(api_as("lena"), BUDGETS, {"tenant": ["nlp", "vision"]}) == ["nlp"]


def test_requests_of_several_teams(
    api_as: Callable[[str], APIClient], file_request: Callable[..., dict[str, Any]]
) -> None:
    file_request("lena", submit=True)
    file_request("vera", queue="vision", submit=True)
    admin = api_as("ada")
    assert teams(admin, REQUESTS, {"tenant": ["nlp", "vision"]}) == ["nlp", "vision"]
    assert teams(admin, REQUESTS, {"tenant": ["vision"]}) == ["vision"]
    rows = downloaded(admin, f"{REQUESTS}?tenant=vision&tenant=nlp&ordering=id")
    assert [row["tenant"] for row in rows] == ["nlp", "vision"]


@pytest.mark.parametrize("url", [BUDGETS, REQUESTS])
def test_each_unknown_team_among_several_is_named(
    api_as: Callable[[str], APIClient], url: str
) -> None:
    answer = api_as("ada").get(url, {"tenant": ["nlp", "nosuch", "nope"]})
    assert answer.status_code == 400
    assert answer.json()["error"]["fields"] == {
        "tenant": ["No tenant named nosuch.", "No tenant named nope."]
    }


@pytest.mark.parametrize("url", [BUDGETS, REQUESTS])
def test_a_name_holding_a_nul_is_the_forms_400(
    api_as: Callable[[str], APIClient], url: str
) -> None:
    answer = api_as("ada").get(url, {"tenant": ["nlp", "no\x00such"]})
    assert answer.status_code == 400
    assert list(answer.json()["error"]["fields"]) == ["tenant"]


def test_the_schema_says_tenant_takes_several_as_state_does(db: Any) -> None:
    schema = SchemaGenerator().get_schema(request=None, public=True)
    for path in (BUDGETS, REQUESTS):
        parameters = {p["name"]: p for p in schema["paths"][path]["get"]["parameters"]}
        team = parameters["tenant"]
        assert team["schema"] == {"type": "array", "items": {"type": "string"}}
        assert (team["style"], team["explode"]) == ("form", True)
        assert "repeated for several" in team["description"]
    state = {p["name"]: p for p in schema["paths"][REQUESTS]["get"]["parameters"]}["state"]
    assert (state["style"], state["explode"]) == ("form", True)
