"""Fixtures for the dashboard's page tests: a small pool two teams share, one user per role.

``pool`` has two 8-GPU h100 nodes (``n1``'s GPU 3 broken: "XID 79") under root queue ``pool``:
queue ``nlp`` (tenant nlp, 4 / 8 / 16) and queue ``vision`` (tenant vision, 4 / 8 / 16);
classes ``normal`` (default) and ``high`` (budget rate 1). Users: ``ada`` is an admin (no
staff flag: the dashboard needs none), ``fin`` finance, ``lena`` leads nlp, ``max`` is a
member of nlp, ``vera`` leads vision, ``vic`` is a member of vision, ``nobody`` holds no role.
Each user's password is their name twice. ``page_as(name)`` is a client logged in as one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import pytest
from django.core.cache import cache
from django.test import Client, TestCase
from domain_builders import flavor, node, priority_class, queue, quota, tenant, user

from gpupool.quotas.models import PriorityClass, Queue
from gpupool.tenancy.actions import do_grant_site_role
from gpupool.tenancy.models import Tenant

PEOPLE = ("ada", "fin", "lena", "max", "vera", "vic", "nobody")


@pytest.fixture(autouse=True)
def fast_passwords(settings: Any) -> None:
    """Passwords hashed with a fast hasher: the tests log many users in."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture(autouse=True)
def empty_cache() -> Any:
    """Each test starts with an empty cache (cycle ids repeat between tests)."""
    cache.clear()
    yield
    cache.clear()


@dataclass
class Pool:
    """The page tests' pool, teams, queues, classes and users."""

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
    """A user whose password is their name twice, with an address."""
    made = user(name, admin=admin)
    made.set_password(name * 2)
    made.email = f"{name}@example.org"
    made.save()
    return made


@pytest.fixture
def pool(db: Any) -> Pool:
    """16 h100 GPUs (one broken) shared by nlp and vision, and one user per role."""
    h100 = flavor("h100")
    node("n1", h100, gpus=8, unhealthy_gpus={3: "XID 79"})
    node("n2", h100, gpus=8)
    users = {name: person(name, admin=name == "ada") for name in PEOPLE}
    do_grant_site_role(users["fin"], role="finance", acting_user=None)
    nlp = tenant("nlp", lead=users["lena"], members=(users["max"],), namespaces=("nlp",))
    vision = tenant("vision", lead=users["vera"], members=(users["vic"],), namespaces=("vision",))
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


class CommittingClient(Client):
    """A client whose every request ends as a committed one would: what the request left
    for the commit (mails, the what-if's dispatch) runs when it returns."""

    def request(self, **request: Any) -> Any:
        """Make the request, then run what it left for the commit."""
        with TestCase.captureOnCommitCallbacks(execute=True):
            return super().request(**request)


@pytest.fixture
def page_as(pool: Pool) -> Callable[[str], Client]:
    """A client logged in as one of the pool's users, by name."""

    def make(name: str) -> Client:
        client = CommittingClient()
        client.force_login(pool.users[name])
        return client

    return make
