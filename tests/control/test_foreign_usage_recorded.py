"""What other schedulers' pods hold reaches the pages' view of the pool (DESIGN §4: "pods of
other schedulers on the same nodes count as occupied capacity"). The loop takes it off its
own snapshot from the cluster; the web processes have no cluster, so the loop records it on
the nodes' rows (``Node.foreign_usage``, where it changed) and the pages' snapshot
(``control.queries.pool_snapshot``: heatmap, fragmentation, dry-run, what-if) takes it off
by the same rule (``sync.with_foreign_usage``). The pages showed those GPUs as free."""

from __future__ import annotations

import pytest
from django.core.cache import cache
from loop_builders import World, build_world

from gpupool.clusters.base import ResourceAmounts
from gpupool.control import queries
from gpupool.control.loop import ControlLoop
from gpupool.dashboard.heatmap import OTHER, describe, gpu_rows, legend_counts
from gpupool.inventory.actions import do_record_foreign_usage
from gpupool.inventory.models import Node

pytestmark = pytest.mark.django_db


@pytest.fixture
def world(db: None) -> World:
    cache.clear()
    yield build_world()
    cache.clear()


def pages_nodes() -> dict[str, object]:
    """The nodes of the pages' snapshot, by name (a fresh one: the cache emptied)."""
    cache.clear()
    return {node.name: node for node in queries.pool_snapshot().value.snapshot.nodes}


def test_the_loop_records_other_schedulers_usage_and_the_pages_take_it_off(world: World) -> None:
    world.cluster.foreign["n1"] = ResourceAmounts(4000, 8192, 6)
    world.cycle()
    n1 = Node.objects.get(name="n1")
    assert n1.foreign_usage == {"cpu_milli": 4000, "memory_mib": 8192, "gpus": 6}
    assert Node.objects.get(name="n2").foreign_usage == {}
    nodes = pages_nodes()
    assert nodes["n1"].foreign_gpus == frozenset({2, 3, 4, 5, 6, 7})
    assert nodes["n1"].healthy_gpus == 2 and nodes["n2"].foreign_gpus == frozenset()

    world.cluster.foreign["n1"] = ResourceAmounts(1000, 1024, 1)
    world.cycle()
    assert Node.objects.get(name="n1").foreign_usage["gpus"] == 1
    world.cluster.foreign.clear()
    world.cycle()
    assert Node.objects.get(name="n1").foreign_usage == {}
    assert pages_nodes()["n1"].foreign_gpus == frozenset()


def test_a_recorded_usage_the_cluster_no_longer_shows_is_cleared_by_a_new_loop(
    world: World,
) -> None:
    """A loop that stopped while other schedulers' pods ran left their usage on the rows;
    the next loop's first cycle compares every row with the cluster."""
    do_record_foreign_usage({"n2": ResourceAmounts(0, 0, 8).as_json()})
    world.cycle()
    assert Node.objects.get(name="n2").foreign_usage == {}
    world.cluster.foreign["n1"] = ResourceAmounts(0, 0, 2)
    restarted = ControlLoop(world.cluster)
    assert restarted.run_cycle().status == "succeeded"
    assert Node.objects.get(name="n1").foreign_usage == {"cpu_milli": 0, "memory_mib": 0, "gpus": 2}


def test_recording_the_usage_leaves_the_nodes_updated_at_alone(world: World) -> None:
    """An observation the loop takes from the cluster each cycle: its own view does not read
    it back, so it does not make the loop re-read the node."""
    world.cycle()
    before = Node.objects.get(name="n1").updated_at
    assert do_record_foreign_usage({"n1": {"gpus": 3}, "n2": {"gpus": 3}, "gone": {"gpus": 1}}) == 2
    n1 = Node.objects.get(name="n1")
    assert n1.updated_at == before and n1.foreign_usage == {"gpus": 3}


def test_the_heatmap_draws_other_schedulers_gpus_as_theirs(world: World) -> None:
    world.cluster.foreign["n1"] = ResourceAmounts(0, 0, 3)
    world.cycle()
    cache.clear()
    rows = {row.node: row for row in gpu_rows(queries.pool_snapshot().value.snapshot)}
    cells = rows["n1"].cells
    assert [cell.state for cell in cells[5:]] == [OTHER] * 3
    assert all(cell.free_milli == 0 for cell in cells[5:])
    assert describe(rows["n1"], cells[7]).endswith("held by another scheduler's pods")
    counts = legend_counts(rows.values())
    assert (counts[OTHER], counts["free"]) == (3, 13)


def test_amounts_read_back_as_written() -> None:
    amounts = ResourceAmounts(1500, 2048, 2, {"3g.40gb": 1})
    assert ResourceAmounts.from_json(amounts.as_json()) == amounts
    assert ResourceAmounts().as_json() == {} and ResourceAmounts.from_json({}).is_zero


def test_the_nodes_api_and_health_say_what_other_schedulers_hold(world: World) -> None:
    """The API's ``foreign_gpus`` and the node's health reasons (the Cluster page, the
    nodes API and ``gpupool nodes`` show them) count what the loop takes off the node: on a
    node sharing each GPU 4 ways, 6 pods asking one each hold 2 GPUs."""
    from django.contrib.auth import get_user_model
    from rest_framework.test import APIClient

    world.cluster.foreign["n1"] = ResourceAmounts(0, 0, 3)
    world.cycle()
    n1 = Node.objects.get(name="n1")
    assert n1.foreign_gpus == 3
    assert "3 GPUs held by other schedulers' pods" in n1.health_reasons()
    client = APIClient()
    client.force_authenticate(get_user_model().objects.create_superuser("root", "", "x"))
    body = client.get("/api/v1/nodes/n1/").json()
    assert (body["foreign_gpus"], body["health"][-1]) == (
        3,
        "3 GPUs held by other schedulers' pods",
    )
    assert client.get("/api/v1/nodes/n2/").json()["foreign_gpus"] == 0

    shared = Node(foreign_usage={"gpus": 6}, labels={"nvidia.com/gpu.replicas": "4"})
    assert shared.foreign_gpus == 2
    assert (
        Node(foreign_usage={"gpus": 6}, labels={"nvidia.com/gpu.replicas": "99999"}).foreign_gpus
        == 6
    )
