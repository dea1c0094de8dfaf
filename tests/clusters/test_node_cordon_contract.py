"""gpupool's cordon of a node, on both backends (``ClusterBackend.set_node_unschedulable``):
the node's ``spec.unschedulable`` is set, as ``kubectl cordon`` does, so other schedulers
place nothing there either; idempotent; gpupool lifts only its own cordon, never one made by
someone else, and a node that does not exist is ``gone``."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from cluster_worlds import EVERY_BACKEND, World, open_world

from gpupool.clusters.inventory import exclusion


@pytest.fixture(params=EVERY_BACKEND)
def world(request: pytest.FixtureRequest) -> Iterator[World]:
    """The contract's backends (``cluster_worlds.EVERY_BACKEND``)."""
    yield from open_world(request)


def test_gpupool_cordons_a_node_in_the_cluster_and_lifts_its_own_cordon(world: World) -> None:
    node = world.node()
    world.until("the node", lambda v: node in v.nodes)
    backend = world.backend
    assert backend.set_node_unschedulable(node, True).status == "cordoned"
    view = world.until("the cordon", lambda v: v.nodes[node].unschedulable)
    assert exclusion(view.nodes[node]) == "cordoned"
    assert backend.set_node_unschedulable(node, True).status == "unchanged"
    assert backend.set_node_unschedulable(node, False).status == "uncordoned"
    view = world.until("the cordon lifted", lambda v: not v.nodes[node].unschedulable)
    assert exclusion(view.nodes[node]) is None
    assert backend.set_node_unschedulable(node, False).status == "unchanged"


def test_someone_elses_cordon_is_neither_taken_over_nor_lifted(world: World) -> None:
    node = world.node()
    world.until("the node", lambda v: node in v.nodes)
    world.cordon(node)
    world.until("kubectl's cordon", lambda v: v.nodes[node].unschedulable)
    backend = world.backend
    assert backend.set_node_unschedulable(node, True).status == "unchanged"
    lifted = backend.set_node_unschedulable(node, False)
    assert (lifted.status, lifted.message) == ("kept", "cordoned by someone else: left cordoned")
    view = world.until("still cordoned", lambda v: v.nodes[node].unschedulable)
    assert view.nodes[node].unschedulable


def test_a_node_that_does_not_exist_is_gone(world: World) -> None:
    world.until("the cluster", lambda v: True)
    assert world.backend.set_node_unschedulable("no-such-node-anywhere", True).status == "gone"
