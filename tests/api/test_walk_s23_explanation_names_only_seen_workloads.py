"""Walk s23: the workloads API's explanation named another team's workloads to nlp's member --
a preemptor's victims in ``facts.victims`` ("vision/seg"), which the workload page no longer
showed, and the workload capacity is held for, in ``facts.held_for`` and in ``detail`` and
``summary`` ("Capacity is held for vision/big, ..."). A workload is named only to admins and
its own team, as a preemption's preemptor is; the sentences say "another team's workload".
One more query at most for the request."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from domain_builders import explained
from resources_pool import pool as resources_pool
from rest_framework.test import APIClient
from two_teams import (
    ANOTHER_TEAMS_WORKLOAD,
    LEAVING_FROM_BOTH,
    STARVING_FOR_VISION,
    Pool,
    nlp_and_vision,
    submit,
)

from gpupool.scheduler import estimate
from gpupool.scheduler.explain import Verdict, explanation
from gpupool.workloads import queries

pytestmark = pytest.mark.django_db

STARVING, LEAVING = STARVING_FOR_VISION, LEAVING_FROM_BOTH


@pytest.fixture
def pool(db: Any) -> Pool:
    """Teams nlp (lead lena, member max) and vision (lead vera); admin ada. nlp's ``urgent``
    waits for nlp/sweep and vision/seg to leave; nlp's ``starved`` waits behind capacity
    held for vision/big; nlp's ``plain`` waits for quota (no workload named)."""
    made = nlp_and_vision()
    urgent = submit(made, "urgent", made.nlp_queue, "max")
    leaving = "Evicting 1 workload of queue nlp and 1 of queue vision to make room."
    explained(urgent, "waiting-for-preemption", leaving, LEAVING, queue_rank=1.0)
    starved = submit(made, "starved", made.nlp_queue, "max")
    written = explanation("", Verdict("behind", STARVING), 2).detail
    explained(starved, "behind", written, STARVING, queue_rank=2.0)
    plain = submit(made, "plain", made.nlp_queue, "max")
    quota = {"queue": "nlp", "flavor": "h100", "asked_gpus": 8, "available_gpus": 0}
    explained(plain, "quota", "Queue nlp has 0 h100 GPUs of quota available.", quota, 3.0)
    return made


def explanation_as(pool: Pool, user: str, name: str) -> dict[str, Any]:
    client = APIClient()
    client.force_authenticate(pool.users[user])
    response = client.get(f"/api/v1/workloads/nlp/{name}/")
    assert response.status_code == 200, response.content
    found: dict[str, Any] = response.json()["explanation"]
    return found


@pytest.mark.parametrize("user", ["max", "lena"])
def test_a_team_reads_its_own_victims_named_and_another_teams_counted(
    pool: Pool, user: str
) -> None:
    facts = explanation_as(pool, user, "urgent")["facts"]
    assert facts["victims"] == ["nlp/sweep"]
    assert facts["victim_queues"] == {"nlp": 1, "vision": 1}


@pytest.mark.parametrize("user", ["max", "lena"])
def test_the_workload_held_for_is_another_teams_workload(pool: Pool, user: str) -> None:
    said = explanation_as(pool, user, "starved")
    assert "held_for" not in said["facts"] and said["facts"]["held_because"] == "starving"
    for field in ("detail", "summary"):
        assert "vision/big" not in said[field]
        assert f"Capacity is held for {ANOTHER_TEAMS_WORKLOAD}, which has starved" in said[field]
    assert "position 2" in said["detail"]


def test_an_admin_reads_every_name(pool: Pool) -> None:
    assert explanation_as(pool, "ada", "urgent")["facts"]["victims"] == ["nlp/sweep", "vision/seg"]
    said = explanation_as(pool, "ada", "starved")
    assert said["facts"]["held_for"] == "vision/big"
    assert "Capacity is held for vision/big," in said["summary"]


def test_unnaming_costs_one_query_at_most(pool: Pool) -> None:
    client = APIClient()
    client.force_authenticate(pool.users["max"])
    counts = {}
    for name in ("plain", "urgent", "starved"):
        with CaptureQueriesContext(connection) as queries:
            assert client.get(f"/api/v1/workloads/nlp/{name}/").status_code == 200
        counts[name] = len(queries)
    assert counts["urgent"] <= counts["plain"] + 1, counts
    assert counts["starved"] <= counts["plain"] + 1, counts


# ----------------------------------------------------------------------------- the dry-run


def test_the_dry_run_names_no_workload_of_another_team(
    db: Any, world: Any, api_as: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A dry-run's placement facts may say for whom capacity is held (the core's ``behind``
    facts, kept by its placement layer): the core's answer for this body is given such a
    layer, naming vision's workload; the member reads neither its name nor ``held_for``."""
    resources_pool(world)
    facts = {**STARVING, "queue": "nlp-train"}
    held = estimate.LayerAnswer(
        "placement", False, explanation("", Verdict("behind", facts), 1).detail, facts
    )

    def core(*args: Any, **kwargs: Any) -> estimate.DryRun:
        answer = estimate.dry_run(*args, **kwargs)
        layers = (*(layer for layer in answer.layers if layer.layer != "placement"), held)
        return estimate.DryRun(answer.workload, layers, "placement")

    monkeypatch.setattr(queries, "dry_run", core)
    pod_set = {"count": 1, "gpus": 4, "flavor": "h100", "cpu": "8", "memory_gb": "64",
               "image": "nvcr.io/nvidia/pytorch:24.05-py3"}  # fmt: skip
    body = {"name": "try", "queue": "nlp-train", "pod_sets": [pod_set]}
    answers = {}
    for role in ("member", "admin"):
        response = api_as(role).post("/api/v1/workloads/dry-run/", body, format="json")
        assert response.status_code == 200, response.content
        answers[role] = response.json()["layers"][-1]
    assert "held_for" not in answers["member"]["facts"]
    assert "vision/big" not in answers["member"]["detail"]
    assert ANOTHER_TEAMS_WORKLOAD in answers["member"]["detail"]
    assert answers["admin"]["facts"]["held_for"] == "vision/big"
