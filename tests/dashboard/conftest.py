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
from typing import Any

import pytest
from django.core.cache import cache
from django.test import Client
from domain_builders import node
from two_teams import CommitsEachRequest, Pool, two_teams


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


@pytest.fixture
def pool(db: Any) -> Pool:
    """16 h100 GPUs (one broken) shared by nlp and vision, and one user per role."""

    def nodes(h100: Any) -> None:
        node("n1", h100, gpus=8, unhealthy_gpus={3: "XID 79"})
        node("n2", h100, gpus=8)

    return two_teams(
        nodes,
        ("fin", "lena", "max", "vera", "vic", "nobody"),
        admins=("ada",),
        vision_members=("vic",),
        passwords=lambda name: name * 2,
    )


class CommittingClient(CommitsEachRequest, Client):
    """A page client whose requests commit (``two_teams.CommitsEachRequest``)."""


@pytest.fixture
def page_as(pool: Pool) -> Callable[[str], Client]:
    """A client logged in as one of the pool's users, by name."""

    def make(name: str) -> Client:
        client = CommittingClient()
        client.force_login(pool.users[name])
        return client

    return make
