"""Fixtures for the API tests: a pool with two tenants and one user per role.

``world`` builds tenant ``nlp`` (lead ``lena``, member ``max``) and tenant ``vision`` (lead
``vera``, member ``otto``), an ``admin`` and a ``finance`` user; ``api_as(role)`` is an
``APIClient`` authenticated as that role's user, where the roles are the permission matrix's:
``admin``, ``finance``, ``lead`` (of nlp), ``member`` (of nlp), ``anonymous``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from domain_builders import flavor, tenant, user
from rest_framework.test import APIClient

from gpupool.tenancy.actions import do_grant_site_role


@dataclass
class World:
    """The users and objects of the API tests; ``own`` is nlp, ``other`` is vision."""

    users: dict[str, Any]
    own: Any
    other: Any
    objects: dict[str, Any] = field(default_factory=dict)


@pytest.fixture
def world(db: Any) -> World:
    """Two tenants, one user per role, and a flavor."""
    lead, member = user("lena"), user("max")
    other_lead, other_member = user("vera"), user("otto")
    admin = user("ada", admin=True)
    finance = user("fin")
    do_grant_site_role(finance, role="finance", acting_user=None)
    own = tenant("nlp", lead=lead, members=(member,), namespaces=("nlp",))
    other = tenant("vision", lead=other_lead, members=(other_member,), namespaces=("vision",))
    flavor("h100")
    users = {"admin": admin, "finance": finance, "lead": lead, "member": member}
    return World(users=users, own=own, other=other)


@pytest.fixture
def api_as(world: World) -> Callable[[str], APIClient]:
    """An API client for a role of the matrix (``anonymous`` is not logged in)."""

    def make(role: str) -> APIClient:
        client = APIClient()
        if role != "anonymous":
            client.force_authenticate(world.users[role])
        return client

    return make
