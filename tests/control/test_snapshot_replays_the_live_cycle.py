"""``gpupool snapshot`` writes the snapshot the live cycle plans on: what the cluster adds to
the database (a gang's ``missing_pods``, a pod set's ``allowed_nodes``) is in the file, so
``gpupool plan FILE`` decides what the loop decides."""

from __future__ import annotations

import copy
import io
from dataclasses import replace
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command
from loop_builders import World, build_world

from gpupool.cli.subcommands import snapshot as snapshot_command
from gpupool.clusters.base import ClusterBackend
from gpupool.scheduler import plan
from gpupool.scheduler.scenario import dump_plan, load_scenario
from gpupool.scheduler.types import PolicyInfo

pytestmark = pytest.mark.django_db


@pytest.fixture
def world(db: None) -> World:
    """Two 8-GPU h100 nodes; a gang of 3 with 2 pods so far; a pod no node's labels match."""
    world = build_world()
    gang = {"gpupool.io/min-member": "3"}
    world.cluster.add_pod("gang-b-0", workload="gang-b", annotations=gang)
    world.cluster.add_pod("gang-b-1", workload="gang-b", annotations=gang)
    key = world.cluster.add_pod("sel-nomatch", gpus=1)
    pod = world.cluster.pods[key]
    world.cluster.pods[key] = replace(pod, node_selector={"zone": "x"})
    world.cycle()  # registers both; neither is admitted
    return world


def fresh_client(world: World) -> ClusterBackend:
    """Another client of the same cluster: its first sync lists everything."""
    cluster = copy.copy(world.cluster)
    cluster._seen_nodes, cluster._seen_pods = {}, {}
    cluster._seen_foreign, cluster._seen_jobs = {}, {}
    return cluster


def gpupool(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    try:
        call_command("gpupool", *args, stdout=out, stderr=err)
        status = 0
    except SystemExit as exit_:
        status = int(exit_.code or 0)
    return status, out.getvalue(), err.getvalue()


def test_the_exported_file_plans_as_the_live_cycle_decides(
    world: World, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert world.workload("gang-b").pending_reason == "gang"
    assert world.workload("gang-b").min_member == 2  # held up to the pods that exist
    assert world.workload("sel-nomatch").pending_facts["never_fits"] is True
    monkeypatch.setattr(
        snapshot_command, "backend_from_settings", lambda: fresh_client(world), raising=False
    )
    target = tmp_path / "pool.json"
    status, out, err = gpupool("snapshot", "--out", str(target))
    assert (status, err) == (0, "")
    assert out.startswith(f"wrote {target}: 2 nodes, 3 queues, 0 workloads holding GPUs, 2 pending")
    scenario = load_scenario(target)
    by_name = {w.name: w for w in scenario.snapshot.workloads}
    assert by_name["team-a/gang-b"].missing_pods == 1
    assert by_name["team-a/sel-nomatch"].pod_sets[0].allowed_nodes == frozenset()
    replayed = plan(scenario.snapshot, scenario.policy, scenario.now)
    assert replayed.admit == ()
    reasons = {p.workload: (p.reason, p.facts.get("never_fits")) for p in replayed.pending}
    assert reasons == {
        "team-a/gang-b": ("gang", None),
        "team-a/sel-nomatch": ("capacity", True),
    }
    # The loop's own next cycle (dry run: nothing written) decides the same.
    world.cycle(dry_run=True)
    latest = world.loop.latest
    assert latest is not None
    live = plan(latest.snapshot, PolicyInfo(), latest.now)
    assert dump_plan(replayed) == dump_plan(live)


def test_a_cluster_that_cannot_be_read_gives_the_database_alone_and_says_so(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    def unreadable() -> ClusterBackend:
        raise ImproperlyConfigured("GPUPOOL_CLUSTER='nowhere' has no factory")

    monkeypatch.setattr(snapshot_command, "backend_from_settings", unreadable, raising=False)
    status, out, err = gpupool("snapshot")
    assert status == 0 and '"team-a/gang-b"' in out
    assert err.startswith("warning: the cluster cannot be read (GPUPOOL_CLUSTER='nowhere'")
    assert "missing_pods" in err and "allowed_nodes" in err
