"""Fixtures for the governance tests: a small pool two teams share, with one user per role.

``pool`` has 32 healthy h100 GPUs (four 8-GPU nodes) under root queue ``pool``: queue ``nlp``
(tenant nlp; guarantee 4, deserved 8, capability 16) and queue ``vision`` (tenant vision; 4 /
8 / 16); priority classes ``normal`` (default, free) and ``high`` (budget rate 1). Users:
``lena`` leads nlp, ``max`` is a member of nlp, ``vera`` leads vision, ``ada`` and ``alan`` are
admins, ``fin`` is finance; each has an address ``<name>@example.org``. ``api_as(name)`` is
an API client logged in as that user.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.core.cache import cache
from domain_builders import node
from rest_framework.test import APIClient
from two_teams import CommitsEachRequest, Pool, two_teams


@pytest.fixture(autouse=True)
def empty_cache() -> Any:
    """Each test starts with an empty cache (ids of cycles repeat between tests)."""
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def pool(db: Any) -> Pool:
    """32 h100 GPUs shared by nlp and vision (4 / 8 / 16 each), and the users."""

    def nodes(h100: Any) -> None:
        for index in range(4):
            node(f"n{index}", h100, gpus=8)

    return two_teams(nodes, ("lena", "max", "vera", "fin"), admins=("ada", "alan"))


class CommittingClient(CommitsEachRequest, APIClient):
    """An API client whose calls commit (``two_teams.CommitsEachRequest``)."""


@pytest.fixture
def api_as(pool: Pool) -> Callable[[str], APIClient]:
    """An API client logged in as one of the pool's users, by name (calls commit)."""

    def make(name: str) -> APIClient:
        client = CommittingClient()
        client.force_authenticate(pool.users[name])
        return client

    return make


QUOTA_ASK = {
    "kind": "queue-quota",
    "queue": "nlp",
    "flavor": "h100",
    "payload": {"guarantee": 8, "deserved": 12, "capability": 24},
    "justification": "the new model needs 8 GPUs for a month",
}


@pytest.fixture
def file_request(api_as: Callable[[str], APIClient]) -> Callable[..., dict[str, Any]]:
    """File a request through the API as ``by`` (``lena`` unless told), answering its JSON;
    ``submit=True`` submits it at once."""

    def file(by: str = "lena", **fields: Any) -> dict[str, Any]:
        body = QUOTA_ASK | fields
        response = api_as(by).post("/api/v1/quota-requests/", body, format="json")
        assert response.status_code == 201, response.json()
        data: dict[str, Any] = response.json()
        return data

    return file
