"""A budget's ledger (``/api/v1/budgets/<id>/ledger/``) filters and sorts by what its schema
offers: ``kind``, a time window (``since`` inclusive, ``until`` exclusive) and ``ordering`` by
``at``, ``gpu_hours`` or ``id``; anything else asked is a 400 naming the parameter, as every
list answers. (It used to document the budgets list's filters and ordering, and apply none.)"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from drf_spectacular.generators import SchemaGenerator
from resources_pool import pool

from gpupool.quotas.actions import do_reserve_budget, do_settle_reservation, do_spend_budget

pytestmark = pytest.mark.django_db

LEDGER = "/api/v1/budgets/{id}/ledger/"


@pytest.fixture
def ledger(world: Any) -> str:
    """nlp's budget: granted 100, then an hour later a reservation of 10, two hours later 5
    spent and the reservation settled; the ledger's address."""
    made = pool(world)
    budget, workload = made["budgets"]["nlp"], made["own_workload"]
    start = timezone.now()
    do_reserve_budget(budget, gpu_hours=10, workload=workload, at=start + timedelta(hours=1))
    do_spend_budget(budget, gpu_hours=5, workload=workload, at=start + timedelta(hours=2))
    do_settle_reservation(budget, gpu_hours=10, workload=workload, at=start + timedelta(hours=2))
    return LEDGER.format(id=budget.pk)


def kinds(client: Any, url: str, **query: Any) -> list[str]:
    response = client.get(url, query)
    assert response.status_code == 200, response.content
    return [entry["kind"] for entry in response.json()["results"]]


def test_the_ledger_filters_by_kind_and_time_window(api_as: Any, ledger: str) -> None:
    lead = api_as("lead")
    assert kinds(lead, ledger) == ["grant", "reserve", "spend", "settle"]
    assert kinds(lead, ledger, kind="spend") == ["spend"]
    assert kinds(lead, f"{ledger}?kind=grant&kind=settle") == ["grant", "settle"]
    half_past = (timezone.now() + timedelta(minutes=30)).isoformat()
    assert kinds(lead, ledger, since=half_past) == ["reserve", "spend", "settle"]
    assert kinds(lead, ledger, until=half_past) == ["grant"]


def test_the_ledger_sorts_by_what_it_offers(api_as: Any, ledger: str) -> None:
    lead = api_as("lead")
    assert kinds(lead, ledger, ordering="-at") == ["settle", "spend", "reserve", "grant"]
    assert kinds(lead, ledger, ordering="gpu_hours") == ["reserve", "spend", "settle", "grant"]


@pytest.mark.parametrize(
    ("query", "parameter"),
    [
        ({"ordering": "period_start"}, "ordering"),  # the budgets list's, not the ledger's
        ({"ordering": "bogus"}, "ordering"),
        ({"kind": "refund"}, "kind"),
        ({"since": "yesterday"}, "since"),
    ],
)
def test_what_the_ledger_cannot_read_is_a_400_naming_it(
    api_as: Any, ledger: str, query: dict[str, str], parameter: str
) -> None:
    response = api_as("lead").get(ledger, query)
    assert response.status_code == 400
    assert list(response.json()["error"]["fields"]) == [parameter]


def test_another_tenants_ledger_is_still_not_found(api_as: Any, world: Any) -> None:
    other = pool(world)["budgets"]["vision"]
    assert api_as("lead").get(LEDGER.format(id=other.pk)).status_code == 404
    assert api_as("finance").get(LEDGER.format(id=other.pk)).status_code == 200
    assert api_as("lead").get(LEDGER.format(id="nine")).status_code == 404


def test_the_ledgers_schema_offers_the_filters_it_applies(db: Any) -> None:
    schema = SchemaGenerator().get_schema(request=None, public=True)
    parameters = schema["paths"][LEDGER]["get"]["parameters"]
    query = {p["name"]: p for p in parameters if p["in"] == "query"}
    assert set(query) == {"kind", "since", "until", "ordering", "page", "page_size", "format"}
    assert "at, gpu_hours, id" in query["ordering"]["description"]
    (path,) = [p for p in parameters if p["in"] == "path"]
    assert "budget" in path["description"]
