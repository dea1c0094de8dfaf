"""A gang that waits for a pod the cluster has not made cannot start when GPUs free: it got
"Estimated start: due now" (the replay assumed its pods made). It gets no estimated start,
and the API, the CLI and the pages say it waits for its pods; work submitted through gpupool,
whose pods the loop makes itself, is still estimated."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from loop_builders import World, build_world

from gpupool.client.main import estimate
from gpupool.dashboard.estimates import estimated_start_detail
from gpupool.inventory.units import FlavorUnits
from gpupool.workloads.api import ExplanationSerializer
from gpupool.workloads.queries import AS_WRITTEN, ESTIMATE_NOT_BEFORE_FACT, explain

pytestmark = pytest.mark.django_db


@pytest.fixture
def world(db: None) -> World:
    """Two 8-GPU nodes; a gang of 3 (``gpupool.io/min-member: 3``) with 2 pods so far."""
    world = build_world()
    gang = {"gpupool.io/min-member": "3"}
    world.cluster.add_pod("gang-b-0", workload="gang-b", annotations=gang)
    world.cluster.add_pod("gang-b-1", workload="gang-b", annotations=gang)
    world.cycle()
    return world


def test_a_gang_waiting_for_the_clusters_pods_has_no_estimated_start(world: World) -> None:
    run = world.loop.refresh_estimates()
    gang = world.workload("gang-b")
    assert (gang.state, gang.pending_reason) == ("pending", "gang")
    assert gang.pending_facts["missing_pods"] == 1
    assert gang.estimated_start_at is None
    assert ESTIMATE_NOT_BEFORE_FACT not in gang.pending_facts
    assert run.waiting_for_pods == 1 and run.as_json()["waiting_for_pods"] == 1
    told = explain(gang, seen=AS_WRITTEN, units=FlavorUnits())
    api = dict(ExplanationSerializer(told).data)
    assert api["estimated_start_at"] is None and api["estimate_not_before"] is None
    assert estimate(api) == "none: it waits for its pods (1 not created yet)"
    assert "due now" not in told.detail
    page = estimated_start_detail(
        told.estimated_start_at, told.estimate_not_before, datetime.now(UTC), 1
    )
    assert str(page) == "no estimated start: it waits for its pods (1 not created yet)"


def test_work_whose_pods_gpupool_makes_is_still_estimated(world: World) -> None:
    world.submit("mine", gpus=8)  # its pods are the loop's to make
    world.cycle()  # planned before they were made: it waits for them, made by the apply
    latest = world.loop.latest
    assert latest is not None
    lacking = {w.name: w.missing_pods for w in latest.snapshot.workloads}
    assert lacking == {"team-a/gang-b": 1, "team-a/mine": 1}
    run = world.loop.refresh_estimates()
    assert run.waiting_for_pods == 1  # gang-b only
    mine = world.workload("mine")
    assert (mine.state, mine.pending_reason) == ("pending", "gang")
    assert mine.estimated_start_at is not None
