"""The nodes list filters by ``state`` (``?state=``, repeatable), the word ``Node.state``
decides and the list shows: ready, cordoned, draining, drained, excluded, gone. A value
that is no state is a 400 naming ``state``, not a list that looks filtered."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from domain_builders import flavor, node

from gpupool.inventory.models import Flavor, Node

pytestmark = pytest.mark.django_db

AT = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)


@pytest.fixture
def nodes(world: Any) -> None:
    """One node in each state but gone, and a gone one."""
    h100 = Flavor.objects.get(name="h100")
    fields: dict[str, dict[str, Any]] = {
        "ready": {},
        "cordoned": {"cordoned": True},
        "draining": {"cordoned": True, "drain_requested_at": AT},
        "drained": {"cordoned": True, "drain_requested_at": AT, "drained_at": AT},
        "excluded": {"cluster_exclusion": "not Ready"},
        "gone": {"gone_at": AT},
    }
    for name, changes in fields.items():
        node(f"n-{name}", h100, gpus=2)
        Node.objects.filter(name=f"n-{name}").update(**changes)


def names(api_as: Any, query: str) -> list[str]:
    response = api_as("member").get(f"/api/v1/nodes/?{query}")
    assert response.status_code == 200, response.content[:300]
    return [row["name"] for row in response.json()["results"]]


@pytest.mark.parametrize("state", ["ready", "cordoned", "draining", "drained", "excluded", "gone"])
def test_the_nodes_list_filters_by_the_state_it_shows(api_as: Any, nodes: None, state: str) -> None:
    response = api_as("member").get(f"/api/v1/nodes/?state={state}")
    rows = response.json()["results"]
    assert [row["name"] for row in rows] == [f"n-{state}"]
    assert rows[0]["state"] == state


def test_several_states_and_other_filters_combine(api_as: Any, nodes: None) -> None:
    assert names(api_as, "state=draining&state=drained") == ["n-drained", "n-draining"]
    assert names(api_as, "state=ready&flavor=h100") == ["n-ready"]
    flavor("a100")  # a flavor no node has (one that is no flavor is a 400)
    assert names(api_as, "state=ready&flavor=a100") == []
    assert len(names(api_as, "")) == 6


def test_a_state_that_is_none_is_a_400_naming_state(api_as: Any, nodes: None) -> None:
    response = api_as("member").get("/api/v1/nodes/?state=broken")
    assert response.status_code == 400
    assert set(response.json()["error"]["fields"]) == {"state"}


def test_the_state_filter_costs_one_query_however_many_nodes(
    api_as: Any, nodes: None, django_assert_max_num_queries: Any
) -> None:
    h100 = Flavor.objects.get(name="h100")
    for index in range(10):
        node(f"x{index}", h100, gpus=2)
    with django_assert_max_num_queries(6):
        assert len(names(api_as, "state=ready")) == 11
