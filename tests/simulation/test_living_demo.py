"""The living demo starts: the loop and the generator on the simulated cluster, on SQLite,
admit, run and finish the teams' work (in-process on a virtual clock, and as `gpupool demo`'s
three processes on a sped-up wall clock)."""

from __future__ import annotations

import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from django.db.models import Sum

from gpupool.cli.subcommands.seed_demo import seed
from gpupool.clusters.simulated import SimulatedBackend, SimulatedCluster, VirtualClock
from gpupool.control.loop import ControlLoop
from gpupool.control.models import SchedulingCycle
from gpupool.simcluster.store import DatabaseStore, cluster_state
from gpupool.simulation.demo_submissions import DemoWorkloadFeed
from gpupool.workloads.models import Workload, WorkloadTransition

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.django_db
def test_the_loop_and_the_generator_admit_run_and_finish_the_teams_work(settings: Any) -> None:
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    seed()
    state = cluster_state()
    clock = VirtualClock(state.last_reading)
    backend = SimulatedBackend(SimulatedCluster(DatabaseStore(state.pk, clock), clock))
    loop = ControlLoop(backend)
    feed = DemoWorkloadFeed(seed=42, load=1.0, start=clock.now())

    failed = []
    for _ in range(40):  # 200 simulated minutes, a cycle every five
        clock.advance(300)
        feed.submit_due(clock.now())
        result = loop.run_cycle()
        if result.status != "succeeded":
            failed.append(result.error)

    assert failed == []
    states = Counter(Workload.objects.values_list("state", flat=True))
    assert states["running"] > 0 and states["succeeded"] > 0
    moved = Counter(WorkloadTransition.objects.values_list("to_state", flat=True))
    assert moved["admitted"] >= states["running"] + states["succeeded"]
    running = {p.key for p in backend.sync().pods.values() if p.phase == "Running"}
    assert len(running) >= states["running"]
    # Nothing failed and nobody drained: every workload stopped early was one the loop evicted.
    evicted = SchedulingCycle.objects.aggregate(total=Sum("evicted"))["total"] or 0
    assert moved["preempted"] <= evicted


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.mark.slow
def test_make_demo_runs_three_processes_that_change_the_pool_and_stop_on_ctrl_c(
    tmp_path: Path,
) -> None:
    database = tmp_path / "demo.sqlite3"
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{database}", "GPUPOOL_PURE_CORE": "1"}
    env.pop("REDIS_URL", None)
    manage = [sys.executable, str(ROOT / "manage.py")]
    for step in (["migrate", "--noinput", "-v0"], ["gpupool", "seed-demo"]):
        subprocess.run([*manage, *step], env=env, check=True, capture_output=True, timeout=300)
    demo = subprocess.Popen(
        [*manage, "gpupool", "demo", "--speed", "600", "--port", str(_free_port())],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # Ctrl-C goes to the group, as from a terminal
    )
    try:
        deadline = time.monotonic() + 240
        states: Counter[str] = Counter()
        while time.monotonic() < deadline and demo.poll() is None:
            time.sleep(2)
            with sqlite3.connect(database, timeout=20) as db:
                rows = db.execute("select state, count(*) from workloads_workload group by state")
                states = Counter(dict(rows.fetchall()))
            if states["succeeded"] >= 5 and states["running"] > 0:
                break
        assert demo.poll() is None, demo.communicate()[0].decode()[-2000:]
        assert states["succeeded"] >= 5 and states["running"] > 0, states
    finally:
        if demo.poll() is None:
            os.killpg(demo.pid, signal.SIGINT)
        output = demo.communicate(timeout=60)[0].decode()
    assert demo.returncode == 0, output[-2000:]
    assert "demo: stopped" in output
