"""Walk s23: a vision lead's workload waiting for its victims to leave showed, under "The
scheduler's numbers", "workloads leaving for it: speech/notebook-00058", another team's
workload by name, though its sentence says only "Evicting 1 workload of queue speech" and the
Preemptions page names a preemptor only to admins and its own team. The page names a victim
only to admins and the victim's team; how many of which queue stays everyone's."""

from __future__ import annotations

import re
from typing import Any

import pytest
from dashboard_pages import text
from domain_builders import explained
from two_teams import submit

pytestmark = pytest.mark.django_db

FACTS = {"victims": ["nlp/sweep", "vision/seg"], "victim_queues": {"nlp": 1, "vision": 1}}


def fact_cells(page: str) -> dict[str, str]:
    """The facts table's values by key."""
    found = re.findall(r'<tr data-fact="([a-z_]+)"><th scope="row">[^<]*</th><td>(.*?)</td>', page)
    return dict(found)


@pytest.fixture
def waiting(pool: Any) -> None:
    """nlp's ``urgent`` waits for nlp/sweep and vision/seg to leave, as a cycle wrote it."""
    urgent = submit(pool, "urgent", pool.nlp_queue, "max")
    sentence = "Evicting 1 workload of queue nlp and 1 of queue vision to make room."
    explained(urgent, "waiting-for-preemption", sentence, FACTS, queue_rank=1.0)


def test_a_team_sees_its_own_victims_named_and_other_teams_counted(
    waiting: None, page_as: Any
) -> None:
    for name in ("max", "lena"):
        facts = fact_cells(text(page_as(name).get("/workloads/nlp/urgent/")))
        assert facts["victims"] == "nlp/sweep", name
        assert "vision/seg" not in facts["victims"]
        assert "vision 1" in facts["victim_queues"]


def test_an_admin_sees_every_victim_named(waiting: None, page_as: Any) -> None:
    facts = fact_cells(text(page_as("ada").get("/workloads/nlp/urgent/")))
    assert facts["victims"] == "nlp/sweep, vision/seg"
