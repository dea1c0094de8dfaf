"""`gpupool sim`: faults injected into the demo's simulated cluster, and its status."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from gpupool.clusters.node_profiles import gpu_node_manifest
from gpupool.simcluster.models import SimulatedClusterState
from gpupool.simcluster.store import (
    clock_of,
    cluster_state,
    open_simulated_backend,
    open_simulated_cluster,
    restart_clock,
    time_in_range,
)

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


@pytest.mark.parametrize(
    ("speed", "message"),
    [
        ("1e308", "argument --speed: must be at most 86400 (a simulated day a second), got 1e308"),
        ("0", "argument --speed: must be above 0, got 0"),
        ("-60", "argument --speed: must be above 0, got -60"),
        ("inf", "argument --speed: not a finite number: 'inf'"),
    ],
)
def test_a_clock_speed_out_of_bounds_exits_2_naming_it_and_stores_nothing(
    speed: str, message: str
) -> None:
    before = cluster_state()
    with pytest.raises(CommandError, match=re.escape(message)):
        sim("clock", "--speed", speed)
    after = cluster_state()
    assert (after.speed, after.clock_origin, after.wall_origin) == (
        before.speed,
        before.clock_origin,
        before.wall_origin,
    )
    with pytest.raises(ValueError, match="speed must be at most"):  # past the parser, too
        restart_clock(1e308)
    assert cluster_state().speed == before.speed


def test_a_clock_stored_out_of_range_is_shown_and_a_new_speed_mends_it(two_nodes: None) -> None:
    # what `sim clock --speed 1e308` left behind before speeds were bounded
    SimulatedClusterState.objects.update(speed=1e308, last_reading=float("inf"))
    for action in ("status", "clock"):
        status, out, _ = sim(action)
        assert status == 0 and "simulated time out of range" in out, out
    status, out, _ = sim("clock", "--speed", "60")
    assert status == 0 and "out of range" not in out and "speed 60" in out
    clock = clock_of(cluster_state())
    assert time_in_range(clock.now()) and abs(clock.now() - time.time()) < 60
    assert "2 nodes" in sim("status")[1]


def test_the_status_counts_in_words() -> None:
    open_simulated_cluster().add_nodes([gpu_node_manifest("h100-0", H100)])
    status = sim("status")[1]
    assert "\n1 node; " in status and "1 nodes" not in status  # "1 nodes" before


def test_a_reader_that_leaves_gets_no_traceback() -> None:
    # `manage.py gpupool plan x.json | head -1` ended in a BrokenPipeError's traceback; now
    # the exit status a shell gives a tool stopped by SIGPIPE, and nothing on stderr
    root = Path(__file__).resolve().parents[2]
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    child = subprocess.Popen(
        [sys.executable, "manage.py", "gpupool", "plan", "scenarios/budget-gates-priority.json"],
        cwd=root,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    assert child.stdout is not None
    child.stdout.close()  # the reader leaves before the first line
    _, err = child.communicate(timeout=120)
    assert (child.returncode, err.decode()) == (128 + 13, "")
