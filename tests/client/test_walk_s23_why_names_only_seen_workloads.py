"""Walk s23: ``gpupool why`` (the API's detail, printed) told nlp's member the names of
vision's workloads -- a victim among its facts ("victims=nlp/sweep, vision/seg") and the
workload capacity is held for ("Why: Capacity is held for vision/big, ...") -- and said of
work that never fits "Why: Never fits: It can never run as asked: ...". It names only what
the workload page names, and says "never" once."""

from __future__ import annotations

import io
from typing import Any

import pytest
from domain_builders import explained
from rest_framework.test import APIClient
from two_teams import (
    ANOTHER_TEAMS_WORKLOAD,
    LEAVING_FROM_BOTH,
    STARVING_FOR_VISION,
    Pool,
    nlp_and_vision,
    submit,
)

from gpupool.client.main import print_story
from gpupool.scheduler.explain import Verdict, explanation

pytestmark = pytest.mark.django_db

STARVING, LEAVING = STARVING_FOR_VISION, LEAVING_FROM_BOTH
NEVER = {"flavor": "h100", "allowed_nodes": 0, "asked": 8, "never_fits": True}


@pytest.fixture
def pool(db: Any) -> Pool:
    """Teams nlp (member max) and vision; admin ada; three of nlp's workloads explained."""
    made = nlp_and_vision()
    for name, reason, facts, rank in (
        ("urgent", "waiting-for-preemption", LEAVING, 1.0),
        ("starved", "behind", STARVING, 2.0),
        ("huge", "capacity", NEVER, None),
    ):
        workload = submit(made, name, made.nlp_queue, "max")
        written = explanation("", Verdict(reason, facts), 2).detail  # type: ignore[arg-type]
        explained(workload, reason, written, facts, queue_rank=rank)
    return made


def why(pool: Pool, user: str, name: str) -> str:
    """What ``gpupool why nlp/<name>`` prints for ``user``: the API's detail, printed."""
    client = APIClient()
    client.force_authenticate(pool.users[user])
    response = client.get(f"/api/v1/workloads/nlp/{name}/")
    assert response.status_code == 200, response.content
    out = io.StringIO()
    print_story(response.json(), out)
    return out.getvalue()


def test_why_names_no_workload_of_another_team(pool: Pool) -> None:
    urgent = why(pool, "max", "urgent")
    assert "nlp/sweep" in urgent and "vision/seg" not in urgent
    starved = why(pool, "max", "starved")
    assert "vision/big" not in starved
    assert f"Why: Capacity is held for {ANOTHER_TEAMS_WORKLOAD}, which has starved" in starved


def test_why_names_them_to_an_admin(pool: Pool) -> None:
    assert "vision/seg" in why(pool, "ada", "urgent")
    assert "Why: Capacity is held for vision/big," in why(pool, "ada", "starved")


def test_why_says_never_fits_once(pool: Pool) -> None:
    said = why(pool, "max", "huge")
    assert "Why: Never fits: no h100 node matches its node selector" in said, said
    assert "never run as asked" not in said
