"""A gang that waits for pods its controller has not made yet (reason ``gang``, its
``missing_pods``) has no queue position: the cycle ranks it in its queue, but it cannot start
when its turn comes, so a position misleads. The workloads API (detail and list: null
``queue_position``, ``waits_for_pods``), the My workloads page, the workload page and
``gpupool why`` say it waits for its pods instead; a gang of gpupool's own, whose pods the
loop is creating (``pods_being_created``), and other pending work keep their positions.

The pool (``conftest``): queue ``nlp`` of tenant nlp; ``max`` is a member of nlp."""

from __future__ import annotations

import html
import io
import re
from datetime import timedelta
from typing import Any

import pytest
from dashboard_pages import live, text
from domain_builders import explained
from rest_framework.test import APIClient
from two_teams import submit

from gpupool.client.main import print_story

pytestmark = pytest.mark.django_db

WAITS = "it waits for its pods (1 not created yet)"


@pytest.fixture
def ranked(pool: Any) -> None:
    """nlp's queue as a cycle ranked it: ``first`` behind others, then ``own-gang``, whose
    pod gpupool is making; ``job-gang``, waiting for a pod its Job has not made, has no rank
    (``control.record``), but kept the estimated start of before it lost that pod."""
    explained(submit(pool, "first", pool.nlp_queue, "max"), "behind", "Behind.", {}, 1.0)
    job_gang = submit(pool, "job-gang", pool.nlp_queue, "max")
    explained(job_gang, "gang", "1 of its pods does not exist yet.", {"missing_pods": 1}, None)
    job_gang.estimated_start_at = job_gang.submitted_at - timedelta(hours=1)
    job_gang.save(update_fields=["estimated_start_at"])
    explained(
        submit(pool, "own-gang", pool.nlp_queue, "max"),
        "gang",
        "Its pods are being created.",
        {"missing_pods": 1, "pods_being_created": True},
        3.0,
    )


def api(pool: Any) -> APIClient:
    client = APIClient()
    client.force_authenticate(pool.users["max"])
    return client


def test_the_api_gives_no_position_and_says_it_waits_for_its_pods(pool: Any, ranked: None) -> None:
    detail = api(pool).get("/api/v1/workloads/nlp/job-gang/").json()
    told = detail["explanation"]
    assert (detail["queue_position"], told["queue_position"]) == (None, None)
    assert (detail["waits_for_pods"], told["waits_for_pods"]) == (True, True)
    assert told["summary"] == (
        "1 of its pods does not exist yet. No position and no estimated start: " + WAITS + "."
    )
    listed = api(pool).get("/api/v1/workloads/?queue=nlp").json()["results"]
    positions = {row["name"]: (row["queue_position"], row["waits_for_pods"]) for row in listed}
    assert positions == {"first": (1, False), "job-gang": (None, True), "own-gang": (2, False)}


def test_the_pages_say_it_waits_for_its_pods_instead_of_a_position(
    pool: Any, page_as: Any, ranked: None
) -> None:
    client = page_as("max")
    table = html.unescape(text(live(client, "/workloads/")))
    cells = {
        name: row.split('<td class="number">')[2].split("</td>")[0]
        for row in table.split("<tr>")[2:]
        if (found := re.search(r"<code>nlp/([^<]+)</code>", row))
        for name in [found.group(1)]
    }
    assert cells == {"first": "1", "job-gang": f"none: {WAITS}", "own-gang": "2"}
    job_gang = next(row for row in table.split("<tr>")[2:] if "<code>nlp/job-gang</code>" in row)
    assert "due to start" not in job_gang  # the time its row kept is not an estimate
    card = html.unescape(text(live(client, "/workloads/nlp/job-gang/")))
    position = card.split("Position in queue nlp</p>", 1)[1].split("</div>", 1)[0]
    assert '<p class="value">\u2013</p>' in position and f"no estimated start: {WAITS}" in position


def test_gpupool_why_says_it_waits_for_its_pods_instead_of_a_position(
    pool: Any, ranked: None
) -> None:
    out = io.StringIO()
    print_story(api(pool).get("/api/v1/workloads/nlp/job-gang/").json(), out)
    assert f"Position: none: {WAITS}\n" in out.getvalue()
    out = io.StringIO()
    print_story(api(pool).get("/api/v1/workloads/nlp/own-gang/").json(), out)
    assert "Position: 2 in queue nlp\n" in out.getvalue()
