"""Cost tests run on the database; ``pool`` is the small pool of cost_builders."""

from collections.abc import Callable
from typing import Any

import pytest
from cost_builders import Pool, build_period, build_pool
from django.core.cache import cache
from domain_builders import user
from rest_framework.test import APIClient

from gpupool.tenancy.actions import do_grant_site_role, do_set_membership
from gpupool.tenancy.models import Tenant


@pytest.fixture
def pool(db: Any) -> Pool:
    """Two 8-GPU h100 nodes and teams a (guarantee 6), b (guarantee 4) and c (none)."""
    return build_pool()


@pytest.fixture
def period(pool: Pool) -> Pool:
    """The pool after the four hours of test_cost_lines' table, rolled up."""
    return build_period(pool)


@pytest.fixture
def client_as(pool: Pool) -> Callable[[str], APIClient]:
    """An API client for ``admin``, ``finance``, ``lead`` (of tenant a) or ``member`` (of b)."""
    users = {"admin": user("ada", admin=True), "finance": user("fin")}
    do_grant_site_role(users["finance"], role="finance", acting_user=None)
    users["lead"], users["member"] = user("lena"), user("max")
    do_set_membership(users["lead"], Tenant.objects.get(name="a"), role="lead", acting_user=None)
    do_set_membership(
        users["member"], Tenant.objects.get(name="b"), role="member", acting_user=None
    )

    def make(role: str) -> APIClient:
        client = APIClient()
        client.force_authenticate(users[role])
        return client

    return make


@pytest.fixture(autouse=True)
def empty_cache() -> None:
    """Report pages cached by another test's roll-up version never leak into this one."""
    cache.clear()
