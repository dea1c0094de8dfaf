"""A gang that waits for pods its controller has not made (reason ``gang``, ``missing_pods``)
is not served by the cycle until they exist (DESIGN 3, enqueue), so it is in no queue's
order: the record gives it no rank (``control.record``), work behind it does not count it in
its position, ``?ordering=queue_position`` lists it with the work that has no position
(last), and nothing gives it an estimated start -- not even one its rows kept from before it
lost a pod, until the estimates' next refresh. Once its pods exist it is ranked again, in
its place. A gang of gpupool's own, whose pods the loop makes at once, stays in line."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone
from domain_builders import user
from loop_builders import World, build_world
from rest_framework.test import APIClient

from gpupool.control.actions import EstimateRow, do_record_estimates
from gpupool.dashboard.estimates import estimated_start_detail
from gpupool.inventory.units import FlavorUnits
from gpupool.workloads.queries import AS_WRITTEN, ESTIMATE_NOT_BEFORE_FACT, explain

pytestmark = pytest.mark.django_db

GANG = {"gpupool.io/min-member": "3"}
WAITS = "no estimated start: it waits for its pods (1 not created yet)"


def api() -> APIClient:
    client = APIClient()
    admin = get_user_model().objects.filter(username="ada").first() or user("ada", admin=True)
    client.force_authenticate(admin)
    return client


def get(url: str) -> Any:
    response = api().get(url)
    assert response.status_code == 200, response.content
    return response.json()


def listed(ordering: str) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = get(f"/api/v1/workloads/?queue=team-a&ordering={ordering}")[
        "results"
    ]
    return rows


@pytest.fixture
def world(db: None) -> World:
    """Both 8-GPU nodes held by team-a's ``x`` and ``y``; then, in this order, ``gang-b``
    (3 pods by its annotation, 2 made), ``w1`` (8 GPUs) and ``mine`` (submitted through
    gpupool: its pods are the loop's to make), all pending."""
    world = build_world()
    for name in "xy":
        world.cluster.add_pod(f"{name}-0", workload=name, gpus=8)
    world.cycle()
    world.cluster.run()
    world.cluster.add_pod("gang-b-0", workload="gang-b", annotations=GANG)
    world.cluster.add_pod("gang-b-1", workload="gang-b", annotations=GANG)
    world.cluster.add_pod("w1-0", workload="w1", gpus=8)
    world.submit("mine", gpus=8)
    world.cycle()
    return world


def test_work_behind_a_gang_waiting_for_its_pods_does_not_count_it(world: World) -> None:
    gang, w1, mine = (world.workload(name) for name in ("gang-b", "w1", "mine"))
    assert (gang.state, gang.pending_reason, gang.pending_facts["missing_pods"]) == (
        "pending",
        "gang",
        1,
    )
    # w1 is first in line: the cycle serves it before anything else of team-a's pending work.
    assert (w1.queue_position, mine.queue_position) == (1, 2)
    assert (gang.queue_rank, gang.queue_position) == (None, None)
    assert explain(w1, seen=AS_WRITTEN, units=FlavorUnits()).queue_position == 1
    # its pods are being made: in line as usual
    assert explain(mine, seen=AS_WRITTEN, units=FlavorUnits()).queue_position == 2
    rows = {row["name"]: row for row in listed("queue_position")}
    assert {name: rows[name]["queue_position"] for name in ("gang-b", "w1", "mine")} == {
        "gang-b": None,
        "w1": 1,
        "mine": 2,
    }
    assert get("/api/v1/workloads/team-a/w1/")["explanation"]["queue_position"] == 1

    # Its pods made, it is served again, in its place: ahead of w1 (submitted before it).
    world.cluster.add_pod("gang-b-2", workload="gang-b", annotations=GANG)
    world.cycle()
    gang, w1, mine = (world.workload(name) for name in ("gang-b", "w1", "mine"))
    assert gang.pending_reason != "gang"
    assert (gang.queue_position, w1.queue_position, mine.queue_position) == (1, 2, 3)


@pytest.mark.parametrize("ordering", ["queue_position", "-queue_position"])
def test_ordering_by_position_lists_a_gang_waiting_for_its_pods_with_the_unranked(
    world: World, ordering: str
) -> None:
    names = [row["name"] for row in listed(ordering)]
    ranked = ["w1", "mine"] if ordering == "queue_position" else ["mine", "w1"]
    assert names[:2] == ranked  # then the work with no position: x, y (running) and gang-b
    assert sorted(names[2:]) == ["gang-b", "x", "y"]


def test_a_gang_waiting_for_its_pods_has_no_estimated_start_its_row_kept(world: World) -> None:
    gang = world.workload("gang-b")
    # An estimate written while it had all its pods (one lost since) stays until the
    # estimates' next refresh: the cycle's writes keep their facts (``ESTIMATE_FACTS``).
    soon = timezone.now() + timedelta(hours=1)
    do_record_estimates({gang.pk: EstimateRow(soon, False, None)})
    gang = world.workload("gang-b")
    assert gang.estimated_start_at is not None
    told = explain(gang, seen=AS_WRITTEN, units=FlavorUnits())
    assert (told.estimated_start_at, told.estimate_learned, told.waits_for_pods) == (
        None,
        None,
        True,
    )
    body = get("/api/v1/workloads/team-a/gang-b/")
    assert body["explanation"]["estimated_start_at"] is None
    assert body["estimated_start_at"] is None
    row = next(row for row in listed("name") if row["name"] == "gang-b")
    assert (row["estimated_start_at"], row["waits_for_pods"]) == (None, True)
    # The workload page's line, even when handed the time the row kept.
    now = timezone.now()
    assert str(estimated_start_detail(gang.estimated_start_at, None, now, 1)) == WAITS


def test_a_gang_waiting_for_its_pods_has_no_estimate_not_before(world: World) -> None:
    gang = world.workload("gang-b")
    # Where the estimates stopped looking ahead, written while it had all its pods (kept as above).
    later = timezone.now() + timedelta(hours=3)
    do_record_estimates({gang.pk: EstimateRow(None, None, later)})
    gang = world.workload("gang-b")
    assert isinstance(gang.pending_facts.get(ESTIMATE_NOT_BEFORE_FACT), str)
    assert explain(gang, seen=AS_WRITTEN, units=FlavorUnits()).estimate_not_before is None
    body = get("/api/v1/workloads/team-a/gang-b/")
    assert body["explanation"]["estimate_not_before"] is None
    assert body["estimate_not_before"] is None
    row = next(row for row in listed("name") if row["name"] == "gang-b")
    assert row["estimate_not_before"] is None
