"""A pool with nodes but no queue yet (the decision core plans no pool without a queue
tree): every page and the pool's figures in the API answer, and say what is missing."""

from __future__ import annotations

from typing import Any

import pytest
from domain_builders import flavor, node, priority_class, user

PAGES = ("/overview/", "/queues/", "/fragmentation/", "/preemptions/", "/workloads/", "/cluster/")


@pytest.fixture
def admin_client(db: Any, client: Any) -> Any:
    """An admin on a pool with two nodes and a default class, but no queue."""
    h100 = flavor("h100")
    node("n1", h100, gpus=8)
    node("n2", h100, gpus=8)
    priority_class("normal", value=100, default=True)
    client.force_login(user("root", admin=True))
    return client


@pytest.mark.parametrize("url", PAGES)
def test_every_page_answers_on_a_pool_without_queues(admin_client: Any, url: str) -> None:
    assert admin_client.get(url).status_code == 200


@pytest.mark.parametrize("url", ["/api/v1/fragmentation/", "/api/v1/queues/"])
def test_the_pools_figures_answer_without_queues(admin_client: Any, url: str) -> None:
    assert admin_client.get(url).status_code == 200
