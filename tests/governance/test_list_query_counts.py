"""The lists cost the same number of queries however long they are (no N+1)."""

from __future__ import annotations

from typing import Any

import pytest
from domain_builders import queue
from two_teams import quota_request

from gpupool.notifications.actions import do_set_notification_preference
from gpupool.notifications.choices import NotificationKind

pytestmark = pytest.mark.django_db

# authentication is forced; the caller's roles (2), the page's count and rows (2), and the
# filter's choices need none
MAX_QUERIES = 4


def file_many(pool: Any, count: int) -> None:
    """``count`` requests of nlp, each for a queue of its own (one open request a queue and
    flavor: ``quotas.actions.open_request_refusal``)."""
    for index in range(count):
        quota_request(
            pool,
            queue=queue(f"nlp-{index}", parent=pool.nlp_queue.parent, tenant=pool.nlp),
            justification=f"ask {index}",
            submit=index % 2 == 0,
            guarantee=1,
            deserved=2,
            capability=4,
        )


@pytest.mark.parametrize("count", [2, 30], ids=["a few requests", "many requests"])
@pytest.mark.parametrize("who", ["ada", "lena"], ids=["admin", "lead"])
def test_listing_requests_takes_a_bounded_number_of_queries(
    pool: Any, api_as: Any, django_assert_max_num_queries: Any, count: int, who: str
) -> None:
    file_many(pool, count)
    client = api_as(who)
    with django_assert_max_num_queries(MAX_QUERIES):
        response = client.get("/api/v1/quota-requests/", {"state": "submitted"})
    assert response.status_code == 200
    assert response.json()["count"] == (count + 1) // 2


@pytest.mark.parametrize("turned_off", [0, 6], ids=["no choices made", "every kind off"])
def test_listing_notification_preferences_takes_a_bounded_number_of_queries(
    pool: Any, api_as: Any, django_assert_max_num_queries: Any, turned_off: int
) -> None:
    max_ = pool.users["max"]
    for kind in list(NotificationKind)[:turned_off]:
        do_set_notification_preference(max_, kind, enabled=False, acting_user=max_)
    client = api_as("max")
    with django_assert_max_num_queries(3):  # the caller's roles (2) and their choices (1)
        response = client.get("/api/v1/notification-preferences/")
    assert [row["enabled"] for row in response.json()].count(False) == turned_off
