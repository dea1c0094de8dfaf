"""A sentence the readers say again counts a MIG flavor's quantities in MIG instances.

The core says a MIG flavor's quantities in MIG instances (``scheduler.explain.flavor_amount``,
with the snapshot's units). A "behind" sentence says the position, which moves without a new
write, so the pages and the API say it again from its facts (``workloads.queries.sentence``):
they did so without the flavors' units, and nlp's MIG work waiting for quota read "2
a100-3g.40gb GPUs of quota left" on its page, in My workloads and in the API (so in
``gpupool why``) where the core had said "2 a100-3g.40gb MIG instances". The readers now pass
the flavors' units, read once a request (``inventory.units.FlavorUnits``): a list of many such
rows costs the queries of a list of one."""

from __future__ import annotations

import re
from typing import Any

from dashboard_pages import text
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from domain_builders import mig_beside
from rest_framework.test import APIClient
from two_teams import MIG_BEHIND_SAYS, Pool, mig_behind

GPU_WORD = re.compile(r"\bGPUs?\b")


def said_in_mig_instances(said: str) -> None:
    for words in MIG_BEHIND_SAYS:
        assert words in said, said
    assert "a100-3g.40gb GPU" not in said and "lent 3 GPUs" not in said, said


def test_the_workload_page_says_it_in_mig_instances(pool: Pool, page_as: Any) -> None:
    mig_beside(pool)
    mig_behind(pool, "slices")
    page = text(page_as("max").get("/workloads/nlp/slices/"))
    said_in_mig_instances(page)
    assert "position 1 in queue nlp" in page


def test_my_workloads_says_it_in_mig_instances(pool: Pool, page_as: Any) -> None:
    mig_beside(pool)
    mig_behind(pool, "slices", 1.0)
    mig_behind(pool, "more", 2.0)
    page = text(page_as("max").get("/workloads/"))
    said_in_mig_instances(page)
    assert "position 2 in queue nlp" in page  # said again: the core wrote position 1


def test_the_api_says_it_in_mig_instances(pool: Pool) -> None:
    mig_beside(pool)
    mig_behind(pool, "slices")
    client = APIClient()
    client.force_authenticate(pool.users["max"])
    response = client.get("/api/v1/workloads/nlp/slices/")
    assert response.status_code == 200, response.content
    explanation = response.json()["explanation"]
    said_in_mig_instances(explanation["detail"])
    said_in_mig_instances(explanation["summary"])
    assert not GPU_WORD.search(explanation["detail"]), explanation["detail"]


def test_my_workloads_reads_the_units_once_for_the_page(
    pool: Pool, page_as: Any, django_assert_num_queries: Any
) -> None:
    """One MIG row said again, then four: the same queries (the flavors' units are read once
    for the page, not once a row)."""
    mig_beside(pool)
    client: Client = page_as("max")
    mig_behind(pool, "w0", 1.0)
    client.get("/workloads/")  # the session's and the caches' first reads
    with CaptureQueriesContext(connection) as one:
        assert text(client.get("/workloads/")).count("MIG instances of quota left") == 1
    for index in range(1, 4):
        mig_behind(pool, f"w{index}", float(index + 1))
    with django_assert_num_queries(len(one)):
        page = text(client.get("/workloads/"))
    assert page.count("MIG instances of quota left") == 4
    assert "a100-3g.40gb GPUs" not in page
