"""Work that never fits -- a gang larger than its queue's capability, which the core's enqueue
sets aside (the fact ``never_fits``) -- has no place in its queue and no estimated start: the
record gives it no rank, the estimates leave it out of their replay, and the API, the CLI and
the page say "Never fits" with the core's reason. Work behind it does not count it. Once the
capability is raised so that it could fit, it is ranked and explained again at once."""

from __future__ import annotations

import io
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone
from domain_builders import quota, user
from loop_builders import World, build_world
from rest_framework.test import APIClient

from gpupool.client.main import print_story
from gpupool.control.actions import EstimateRow, do_record_estimates
from gpupool.workloads.queries import ESTIMATE_NOT_BEFORE_FACT

pytestmark = pytest.mark.django_db

HOUR = 3600


@pytest.fixture
def world(db: None) -> World:
    """Three 8-GPU nodes (24 GPUs); team-a and team-b each deserve 8 and may hold 16."""
    return build_world(nodes=3)


def detail(name: str) -> dict[str, Any]:
    """The API's workload detail, as an admin reads it."""
    client = APIClient()
    admin = get_user_model().objects.filter(username="ada").first() or user("ada", admin=True)
    client.force_authenticate(admin)
    response = client.get(f"/api/v1/workloads/team-a/{name}/")
    assert response.status_code == 200, response.content
    body: dict[str, Any] = response.json()
    return body


def never_fitting_behind_running_work(world: World) -> None:
    """The pool full for two hours (team-b runs 16 GPUs, team-a 8); then team-a asks 24 GPUs
    (its capability is 16), and 8 twice behind it."""
    world.submit("hog", queue="team-b", gpus=8, count=2, expected_runtime_s=2 * HOUR)
    world.submit("first", gpus=8, expected_runtime_s=2 * HOUR)
    world.cycle()  # their pods are made
    world.cycle()  # admitted
    world.cluster.run()
    world.cycle()
    world.cluster.tick(10)
    world.submit("huge", gpus=8, count=3, expected_runtime_s=HOUR)
    world.cluster.tick(10)
    world.submit("small", gpus=8, expected_runtime_s=HOUR)
    world.submit("after", gpus=8, expected_runtime_s=HOUR)
    world.cycle()  # their pods are made
    world.cycle()  # explained


def test_never_fitting_work_has_no_position_and_no_estimate_in_the_api(world: World) -> None:
    never_fitting_behind_running_work(world)
    huge = world.workload("huge")
    assert huge.pending_reason == "quota" and huge.pending_facts["never_fits"] is True
    assert huge.queue_rank is None  # in no queue's order
    run = world.loop.refresh_estimates()
    assert run.never_fits == 1
    explanation = detail("huge")["explanation"]
    assert explanation["never_fits"] is True
    assert explanation["queue_position"] is None
    assert explanation["estimated_start_at"] is None
    assert explanation["estimate_not_before"] is None
    assert explanation["summary"].startswith(
        "Never fits: Queue team-a can never hold 24 h100 GPUs: the capabilities on its path "
        "allow 16."
    ), explanation["summary"]
    assert "Position" not in explanation["summary"]
    assert ESTIMATE_NOT_BEFORE_FACT not in world.workload("huge").pending_facts
    # work submitted after it does not count it ahead
    assert world.workload("small").queue_position == 1
    assert world.workload("after").queue_position == 2
    assert detail("small")["explanation"]["queue_position"] == 1


def test_the_cli_says_never_fits_without_a_position_or_an_estimate(world: World) -> None:
    never_fitting_behind_running_work(world)
    world.loop.refresh_estimates()
    out = io.StringIO()
    print_story(detail("huge"), out)
    printed = out.getvalue()
    assert "Why: Never fits: Queue team-a can never hold 24 h100 GPUs" in printed
    assert "Position:" not in printed and "Estimated start:" not in printed


def test_the_estimates_replay_leaves_never_fitting_work_out(world: World) -> None:
    """Waiting for work no step could admit kept the replay going to its bound: with the
    never-fitting work left out it stops once the rest has its estimate."""
    never_fitting_behind_running_work(world)
    world.loop.estimates.max_steps = 50
    run = world.loop.refresh_estimates()
    assert (run.pending, run.estimated, run.unestimated, run.never_fits) == (2, 2, 0, 1)
    assert world.workload("small").estimated_start_at is not None
    assert world.workload("huge").estimated_start_at is None


def test_an_estimate_written_before_the_work_stopped_fitting_is_cleared(world: World) -> None:
    never_fitting_behind_running_work(world)
    quota(world.queues["team-a"], world.h100, 0, 8, 24)  # it could fit: ranked, estimated
    world.cycle()
    world.loop.refresh_estimates()
    assert world.workload("huge").estimated_start_at is not None
    # As a replay that could not estimate it writes it: a moment it starts no earlier than.
    huge = world.workload("huge")
    do_record_estimates({huge.pk: EstimateRow(None, None, timezone.now() + timedelta(hours=3))})
    assert ESTIMATE_NOT_BEFORE_FACT in world.workload("huge").pending_facts
    quota(world.queues["team-a"], world.h100, 0, 8, 16)  # never again
    world.cycle()
    # The cycle's record already drops the estimate's facts (the next refresh is a minute
    # away: the page said "starts not before ..." beside "never fits" meanwhile).
    assert ESTIMATE_NOT_BEFORE_FACT not in world.workload("huge").pending_facts
    world.loop.refresh_estimates()
    huge = world.workload("huge")
    assert huge.estimated_start_at is None and huge.queue_position is None
    assert ESTIMATE_NOT_BEFORE_FACT not in huge.pending_facts


def test_raising_the_capability_ranks_it_and_says_why_it_waits_at_once(world: World) -> None:
    never_fitting_behind_running_work(world)
    quota(world.queues["team-a"], world.h100, 0, 8, 24)
    world.cycle()
    huge = world.workload("huge")
    # Never fitting, it was given no pods: now it waits for them, with its place in line.
    assert huge.pending_reason == "gang" and huge.pending_facts["pods_being_created"]
    assert huge.queue_position == 1
    world.cycle()
    huge = world.workload("huge")
    # still quota (team-b holds 16 of the 24 GPUs), but no longer never: rewritten at once
    assert huge.state == "pending" and huge.pending_reason == "quota"
    assert huge.pending_facts["never_fits"] is False
    assert huge.queue_position == 1  # the oldest of its queue again
    explanation = detail("huge")["explanation"]
    assert explanation["never_fits"] is False and explanation["queue_position"] == 1
    assert not explanation["summary"].startswith("Never fits")


def test_the_page_shows_never_fits_instead_of_a_position(world: World, client: Any) -> None:
    never_fitting_behind_running_work(world)
    said = detail("huge")["explanation"]["summary"]
    client.force_login(get_user_model().objects.get(username="ada"))
    page = client.get("/workloads/team-a/huge/").content.decode()
    assert "data-never-fits" in page and "never fits</span>" in page
    assert said.replace("'", "&#x27;") in page
