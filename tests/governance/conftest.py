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
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import pytest
from django.core.cache import cache
from django.test import TestCase
from domain_builders import flavor, node, priority_class, queue, quota, tenant, user
from rest_framework.test import APIClient

from gpupool.quotas.models import PriorityClass, Queue
from gpupool.tenancy.actions import do_grant_site_role
from gpupool.tenancy.models import Tenant


@pytest.fixture(autouse=True)
def empty_cache() -> Any:
    """Each test starts with an empty cache (ids of cycles repeat between tests)."""
    cache.clear()
    yield
    cache.clear()


@dataclass
class Pool:
    """The governance tests' pool, teams, queues, classes and users."""

    h100: Any
    nlp: Tenant
    vision: Tenant
    root: Queue
    nlp_queue: Queue
    vision_queue: Queue
    normal: PriorityClass
    high: PriorityClass
    users: dict[str, Any]


def person(name: str, *, admin: bool = False) -> Any:
    """A user with the address ``<name>@example.org``."""
    made = user(name, admin=admin)
    made.email = f"{name}@example.org"
    made.save()
    return made


@pytest.fixture
def pool(db: Any) -> Pool:
    """32 h100 GPUs shared by nlp and vision (4 / 8 / 16 each), and the users."""
    h100 = flavor("h100")
    for index in range(4):
        node(f"n{index}", h100, gpus=8)
    users = {name: person(name) for name in ("lena", "max", "vera", "fin")}
    users |= {name: person(name, admin=True) for name in ("ada", "alan")}
    do_grant_site_role(users["fin"], role="finance", acting_user=None)
    nlp = tenant("nlp", lead=users["lena"], members=(users["max"],), namespaces=("nlp",))
    vision = tenant("vision", lead=users["vera"], namespaces=("vision",))
    root = queue("pool")
    nlp_queue = queue("nlp", parent=root, tenant=nlp)
    vision_queue = queue("vision", parent=root, tenant=vision)
    quota(nlp_queue, h100, 4, 8, 16)
    quota(vision_queue, h100, 4, 8, 16)
    return Pool(
        h100=h100,
        nlp=nlp,
        vision=vision,
        root=root,
        nlp_queue=nlp_queue,
        vision_queue=vision_queue,
        normal=priority_class("normal", default=True),
        high=priority_class("high", value=100, budget_rate=Decimal(1)),
        users=users,
    )


class CommittingClient(APIClient):
    """An API client whose every call ends as a committed request would: the work deferred to
    the commit (mails) is done when the call returns (the test's transaction never commits)."""

    def request(self, *args: Any, **kwargs: Any) -> Any:
        """Make the call, then run what it left for the commit."""
        with TestCase.captureOnCommitCallbacks(execute=True):
            return super().request(*args, **kwargs)


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
