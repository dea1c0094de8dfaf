"""The impact an admin sees before deciding: whether the change fits the pool and its
guarantees, and how it moves the deserved shares, against numbers worked out by hand."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from domain_builders import period_fields

from gpupool.control.actions import do_finish_cycle, do_start_cycle
from gpupool.inventory.actions import do_set_node_cordoned
from gpupool.inventory.models import Node
from gpupool.quotas.actions import do_set_queue_quota
from gpupool.quotas.impact import current_pool_shape

pytestmark = pytest.mark.django_db

URL = "/api/v1/quota-requests/"


def impact_of(api_as: Any, request_id: int) -> dict[str, Any]:
    response = api_as("ada").get(f"{URL}{request_id}/impact/")
    assert response.status_code == 200, response.json()
    data: dict[str, Any] = response.json()
    return data


def test_the_impact_shows_the_fit_and_the_shares_it_moves(api_as: Any, file_request: Any) -> None:
    # given 32 h100 GPUs, nlp and vision at 4 / 8 / 16 each: today both get their
    # capability, 16 each. nlp asks for 8 / 20 / 24: floors 20 + 8 = 28, and by weight
    # clamp(L, 20, 24) + clamp(L, 8, 16) = 32 at L = 12: nlp 20, vision 12.
    request = file_request(payload={"guarantee": 8, "deserved": 20, "capability": 24}, submit=True)
    impact = impact_of(api_as, request["id"])
    assert impact["fits"] is True and impact["problems"] == []
    assert impact["current"] == {"guarantee": "4", "deserved": "8", "capability": "16"}
    assert impact["requested"] == {"guarantee": "8", "deserved": "20", "capability": "24"}
    assert impact["pool"] == {
        "flavor": "h100",
        "healthy_gpus": "32",
        "pool_guarantees_now": "8",
        "pool_guarantees_after": "12",
    }
    assert impact["deserved_shares"] == [
        {"queue": "nlp", "tenant": "nlp", "flavor": "h100", "before": 16, "after": 20, "change": 4},
        {
            "queue": "vision",
            "tenant": "vision",
            "flavor": "h100",
            "before": 16,
            "after": 12,
            "change": -4,
        },
    ]
    assert impact["deserved_shares_error"] is None


def test_the_impact_of_a_change_beyond_the_healthy_pool_says_why_it_does_not_fit(
    pool: Any, api_as: Any, file_request: Any
) -> None:
    # given a node cordoned: 24 healthy GPUs, vision guaranteed 4 of them
    do_set_node_cordoned(Node.objects.get(name="n0"), cordoned=True, acting_user=None)
    request = file_request(payload={"guarantee": 22, "deserved": 22, "capability": 24}, submit=True)
    impact = impact_of(api_as, request["id"])
    assert impact["fits"] is False
    assert impact["pool"]["healthy_gpus"] == "24"
    assert impact["pool"]["pool_guarantees_after"] == "26"
    assert "more than the pool's 24 healthy h100 GPUs" in impact["problems"][0]


def test_the_impact_of_a_budget_request_shows_the_grant_before_and_after(
    pool: Any, api_as: Any
) -> None:
    body = {
        "kind": "budget",
        "tenant": "nlp",
        "priority_class": "high",
        **period_fields(),
        "payload": {"gpu_hours": 40},
        "justification": "deadline",
        "submit": True,
    }
    created = api_as("lena").post(URL, body, format="json").json()
    impact = impact_of(api_as, created["id"])
    assert impact["fits"] is True
    assert (impact["current"], impact["after"]) == (None, {"gpu_hours": "40"})
    assert impact["deserved_shares"] == []


def test_the_pool_is_read_once_per_finished_cycle(
    pool: Any, django_assert_num_queries: Any
) -> None:
    # given a finished cycle, whose snapshot gave nlp 8 deserved h100 GPUs
    cycle = do_start_cycle(at=datetime(2026, 5, 1, tzinfo=UTC))
    do_finish_cycle(cycle, at=datetime(2026, 5, 1, 0, 0, 1, tzinfo=UTC), status="succeeded")
    first = current_pool_shape()
    # when quota changes before the next cycle
    do_set_queue_quota(
        pool.nlp_queue, pool.h100, guarantee=4, deserved=10, capability=16, acting_user=None
    )
    # then the shape is still the cycle's, read from the cache with one query
    with django_assert_num_queries(1):
        assert current_pool_shape() == first
    # and the next cycle reads the change
    cycle = do_start_cycle(at=datetime(2026, 5, 1, 0, 0, 5, tzinfo=UTC))
    do_finish_cycle(cycle, at=datetime(2026, 5, 1, 0, 0, 6, tzinfo=UTC), status="succeeded")
    nlp = next(q for q in current_pool_shape().queues if q.name == "nlp")
    assert nlp.quota["h100"] == (4, 10, 16)
