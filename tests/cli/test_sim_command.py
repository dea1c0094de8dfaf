"""`gpupool sim`: faults injected into the demo's simulated cluster, and its status."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command

from gpupool.clusters.node_profiles import gpu_node_manifest
from gpupool.simcluster.store import cluster_state, open_simulated_backend, open_simulated_cluster

pytestmark = pytest.mark.django_db

H100 = {"gpus": 8, "product": "NVIDIA-H100-80GB-HBM3"}


def sim(*args: str) -> tuple[int, str, str]:
    out, err = StringIO(), StringIO()
    try:
        call_command("gpupool", "sim", *args, stdout=out, stderr=err)
    except SystemExit as exit_:
        return int(exit_.code or 0), out.getvalue(), err.getvalue()
    return 0, out.getvalue(), err.getvalue()


@pytest.fixture
def two_nodes() -> None:
    open_simulated_cluster().add_nodes(
        [gpu_node_manifest("h100-0", H100), gpu_node_manifest("h100-1", H100)]
    )


def test_a_node_taken_down_is_not_ready_for_the_backend_and_in_the_status(two_nodes: None) -> None:
    assert sim("node-down", "h100-0")[0] == 0
    assert sim("gpu-fail", "h100-1", "3", "--reason", "XID 48")[0] == 0
    view = open_simulated_backend().sync()
    assert not view.nodes["h100-0"].ready and view.nodes["h100-1"].allocatable.gpus == 7

    status = sim("status")[1]
    assert "h100-0" in status and "NotReady" in status
    assert "GPU 3 unhealthy (XID 48)" in status and "2 nodes" in status

    sim("node-up", "h100-0")
    sim("gpu-heal", "h100-1", "3")
    view = open_simulated_backend().sync()
    assert view.nodes["h100-0"].ready and view.nodes["h100-1"].allocatable.gpus == 8


def test_a_cordon_shows_in_the_nodes_facts(two_nodes: None) -> None:
    sim("cordon", "h100-1")
    assert open_simulated_backend().sync().nodes["h100-1"].unschedulable
    sim("uncordon", "h100-1")
    assert not open_simulated_backend().sync().nodes["h100-1"].unschedulable


@pytest.mark.parametrize(
    ("args", "error"),
    [(("node-down", "nope"), "no node nope"), (("gpu-fail", "h100-0", "8"), "GPUs 0..7")],
    ids=["an unknown node", "a GPU the node does not have"],
)
def test_a_fault_on_something_that_is_not_there_exits_2_saying_what(
    two_nodes: None, args: tuple[str, ...], error: str
) -> None:
    status, _, err = sim(*args)
    assert status == 2 and error in err


def test_the_clock_speed_is_set_for_every_process_from_the_state_row() -> None:
    status, out, _ = sim("clock", "--speed", "60")
    assert status == 0 and "speed 60" in out
    assert cluster_state().speed == 60.0
