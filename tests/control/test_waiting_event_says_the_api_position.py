"""The ``Waiting`` Event on a pending pod says the position the API says.

The core's sentence counts every pending workload of the queue ahead, also the work the cycle
does not serve -- a gang that waits for pods its controller has not made, work that never
fits -- which has no rank, so the API, the pages and ``gpupool why`` do not count it
(``control.record``): ``kubectl describe pod`` said "position 3" where they said 2. The Event
now renders the sentence as they do (``workloads.queries.sentence``) with the position of the
record it follows. A position that moved alone still sends no Event (one per reason,
docs/control-loop.md)."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model
from domain_builders import user
from loop_builders import World, build_world
from rest_framework.test import APIClient

from gpupool.clusters.base import PodKey
from gpupool.control.loop import ControlLoop
from gpupool.scheduler.types import PolicyInfo

pytestmark = pytest.mark.django_db

GANG = {"gpupool.io/min-member": "3"}


def explanation(name: str) -> dict[str, Any]:
    """The workload's explanation as the API gives it."""
    client = APIClient()
    admin = get_user_model().objects.filter(username="ada").first() or user("ada", admin=True)
    client.force_authenticate(admin)
    response = client.get(f"/api/v1/workloads/team-a/{name}/")
    assert response.status_code == 200, response.content
    told: dict[str, Any] = response.json()["explanation"]
    return told


def waiting_told(world: World, key: PodKey) -> list[str]:
    """The messages of the ``Waiting`` Events on the pod."""
    return [message for reason, message, _ in world.cluster.events_on(key) if reason == "Waiting"]


def world_with_work_ahead(ahead: str) -> tuple[World, PodKey]:
    """Queues served in strict FIFO order; the pool full (team-a's ``x``, team-b's ``y``);
    then, in this order, team-a's ``h1`` (8 GPUs: no quota left), ``ahead`` -- the gang
    ``gang-b`` (3 pods by its annotation, 2 made) or ``huge`` (24 GPUs: never fits) -- and
    ``w`` (8 GPUs), which waits ``behind`` h1, a sentence that says its position."""
    world = build_world()
    world.loop = ControlLoop(world.cluster, policy=PolicyInfo(queueing="fifo"))
    world.cluster.add_pod("x-0", workload="x", gpus=8)
    world.cluster.add_pod("y-0", "team-b", queue="team-b", workload="y", gpus=8)
    world.cycle()
    world.cluster.run()
    world.cluster.tick(10)
    world.cluster.add_pod("h1-0", workload="h1", gpus=8)
    world.cluster.tick(10)
    if ahead == "gang":
        world.cluster.add_pod("gang-b-0", workload="gang-b", annotations=GANG)
        world.cluster.add_pod("gang-b-1", workload="gang-b", annotations=GANG)
    else:
        for index in range(3):
            world.cluster.add_pod(f"huge-{index}", workload="huge", gpus=8)
    world.cluster.tick(10)
    pod = world.cluster.add_pod("w-0", workload="w", gpus=8)
    world.cycle()
    return world, pod


@pytest.mark.parametrize("ahead", ["gang", "never"])
def test_the_waiting_event_says_the_position_the_api_says(db: None, ahead: str) -> None:
    world, pod = world_with_work_ahead(ahead)
    w = world.workload("w")
    assert (w.state, w.pending_reason) == ("pending", "behind")
    told = explanation("w")
    assert told["queue_position"] == 2  # what waits between h1 and w has no place in line
    assert told["detail"].endswith("cannot be admitted yet: position 2."), told["detail"]
    # The core's own sentence, as written, counts it (3rd): the Event no longer says that.
    assert w.pending_detail.endswith("position 3.")
    assert waiting_told(world, pod) == [told["detail"]]
    world.cycle()  # nothing moved: nothing told again
    assert waiting_told(world, pod) == [told["detail"]]


def test_a_position_that_moves_alone_sends_no_new_event(db: None) -> None:
    world, pod = world_with_work_ahead("gang")
    w = world.workload("w")
    before = (w.pending_reason, w.pending_facts, w.pending_detail)
    first = explanation("w")["detail"]
    assert waiting_told(world, pod) == [first]

    # The gang's pods made, it is in line again, ahead of w: w's position moves, alone.
    world.cluster.add_pod("gang-b-2", workload="gang-b", annotations=GANG)
    world.cycle()
    world.cycle()
    assert world.workload("gang-b").pending_reason == "behind"
    w = world.workload("w")
    assert (w.pending_reason, w.pending_facts, w.pending_detail) == before
    told = explanation("w")
    assert told["queue_position"] == 3
    assert told["detail"].endswith("position 3."), told["detail"]
    assert waiting_told(world, pod) == [first]  # one Event per reason, not one per position
