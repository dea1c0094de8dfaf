"""The preemptions API says the unit of what each victim freed (``unit``: "MIG instance" for
a victim stopped on a MIG flavor's nodes only, else "GPU"), by the Preemptions page's one rule
(``inventory.units.freed_unit``); both CSVs (the victims' side and ``side=caused``) carry the
column, a page reads the nodes' flavors in one query however many rows it has, the schema
documents the field, and ``gpupool why`` writes "2 MIG instances freed" from it.

The pool (``conftest``): h100 nodes n1 and n2, and here MIG node m1 of flavor
``a100-3g.40gb`` (8 A100 cards of two 3g.40gb instances each)."""

from __future__ import annotations

import csv
import io
from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from domain_builders import flavor, node
from rest_framework.test import APIClient
from two_teams import submit

from gpupool.accounting.actions import do_record_preemption
from gpupool.client.main import print_story
from gpupool.workloads.api import PreemptionEventSerializer

pytestmark = pytest.mark.django_db

MIG = "a100-3g.40gb"


@pytest.fixture
def mig_node(pool: Any) -> None:
    """MIG node m1 beside the h100 nodes."""
    mig = flavor(MIG, sharing="mig", gpu_model="A100-80GB", mig_profile="3g.40gb", gpu_memory_gb=40)
    node("m1", mig, gpus=8, mig_layout={"3g.40gb": 2})


def api_as(pool: Any, name: str) -> APIClient:
    client = APIClient()
    client.force_authenticate(pool.users[name])
    return client


def stopped(pool: Any, name: str, freed: int, nodes: list[str] | None, by: Any = None) -> Any:
    """vision's workload ``name`` stopped on ``nodes`` (by nlp's ``by``), freeing ``freed``."""
    victim = submit(pool, name, pool.vision_queue, "vic")
    do_record_preemption(
        victim,
        reason="reclaim" if by else "node-failure",
        at=timezone.now() - timedelta(minutes=len(name)),
        gpus_freed=freed,
        lost_gpu_hours=Decimal(1),
        preemptor=by,
        nodes=nodes,
    )
    return victim


def units(rows: list[dict[str, Any]]) -> dict[str, tuple[str, str]]:
    """Each row's freed amount and its unit, by the victim's name (admins see every victim)."""
    return {row["victim"].split("/")[1]: (row["gpus_freed"], row["unit"]) for row in rows}


def download(client: APIClient, url: str) -> list[dict[str, str]]:
    answer = client.get(url)
    assert answer.status_code == 200
    return list(csv.DictReader(io.StringIO(b"".join(answer.streaming_content).decode())))


def test_each_row_says_the_unit_of_what_it_freed_as_the_page_does(
    pool: Any, mig_node: None
) -> None:
    stopped(pool, "slices", 2, ["m1"])
    stopped(pool, "whole", 8, ["n1"])
    stopped(pool, "mixed-nodes", 4, ["m1", "n2"])  # not only MIG instances: GPUs, as the page
    stopped(pool, "old", 8, [])  # recorded before the nodes were kept
    response = api_as(pool, "vic").get("/api/v1/preemptions/")
    assert response.status_code == 200, response.content
    assert units(response.json()["results"]) == {
        "slices": ("2.000", "MIG instance"),
        "whole": ("8.000", "GPU"),
        "mixed-nodes": ("4.000", "GPU"),
        "old": ("8.000", "GPU"),
    }
    [event] = [row for row in response.json()["results"] if row["victim"] == "vision/slices"]
    detail = api_as(pool, "vic").get(f"/api/v1/preemptions/{event['id']}/")
    assert detail.json()["unit"] == "MIG instance"


def test_both_csvs_carry_the_unit(pool: Any, mig_node: None) -> None:
    nlp_run = submit(pool, "big-run", pool.nlp_queue, "max")
    stopped(pool, "slices", 2, ["m1"], by=nlp_run)
    stopped(pool, "whole", 8, ["n1"], by=nlp_run)
    suffered = download(api_as(pool, "vic"), "/api/v1/preemptions/?format=csv")
    assert {row["victim"]: row["unit"] for row in suffered} == {
        "vision/slices": "MIG instance",
        "vision/whole": "GPU",
    }
    # nlp's work caused them: its lead sees the victims by queue and tenant, and the unit.
    caused = download(api_as(pool, "lena"), "/api/v1/preemptions/?side=caused&format=csv")
    assert sorted((row["gpus_freed"], row["unit"]) for row in caused) == [
        ("2.000", "MIG instance"),
        ("8.000", "GPU"),
    ]


def test_a_page_reads_the_nodes_flavors_once_whatever_its_rows(pool: Any, mig_node: None) -> None:
    stopped(pool, "slices-0", 2, ["m1"])
    client = api_as(pool, "ada")
    with CaptureQueriesContext(connection) as few:
        client.get("/api/v1/preemptions/")
    for index in range(1, 6):
        stopped(pool, f"slices-{index}", 1, ["m1"])
        stopped(pool, f"whole-{index}", 8, ["n2"])
    with CaptureQueriesContext(connection) as many:
        rows = client.get("/api/v1/preemptions/").json()["results"]
    assert units(rows)["slices-5"] == ("1.000", "MIG instance")
    assert units(rows)["whole-5"] == ("8.000", "GPU")
    assert len(many) == len(few)


def test_the_schema_says_what_the_unit_is() -> None:
    field = PreemptionEventSerializer().fields["unit"]
    assert "What gpus_freed counts" in str(field.help_text)


def test_gpupool_why_says_the_mig_instances_a_victim_freed(pool: Any, mig_node: None) -> None:
    victim = stopped(pool, "slices", 2, ["m1"])
    detail = api_as(pool, "vic").get(f"/api/v1/workloads/vision/{victim.name}/")
    assert detail.status_code == 200, detail.content
    out = io.StringIO()
    print_story(detail.json(), out)
    assert "; 2 MIG instances freed, 1 MIG instance-hour lost" in out.getvalue()
