"""A new loop reads its state before it takes the cycle lock (``ControlLoop._warm_up``).

Its first cycle, under the lock, still looks at every workload and node, but reads only what
changed since the warm-up: what other writers did meanwhile (another worker's cycles, an
admin, a user) must be in it as if the loop had read everything under the lock.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.utils import timezone
from domain_builders import flavor, priority_class, queue, quota, tenant
from test_loop_commands import holding_the_lock

from gpupool.clusters.base import ClusterUnavailable
from gpupool.clusters.node_profiles import gpu_node_manifest
from gpupool.clusters.simulated import SimulatedBackend, SimulatedCluster, VirtualClock
from gpupool.clusters.simulated_store import MemoryStore
from gpupool.control.loop import PHASES, ControlLoop
from gpupool.control.models import SchedulingCycle
from gpupool.inventory.actions import do_set_node_cordoned
from gpupool.inventory.models import Node
from gpupool.workloads.actions import PodSetSpec, do_submit_workload
from gpupool.workloads.models import Workload

pytestmark = pytest.mark.django_db(transaction=True)

START = 1_800_000_000.0
PRODUCT = "NVIDIA-H100-80GB-HBM3"
GROUP = {"kind": "hgx", "prefix": "u", "gpus": 8, "product": PRODUCT}


class Pool:
    """Two 8-GPU nodes on the simulated cluster (in memory, virtual clock); a loop is a
    process of its own on it (``restart``: its own backend, as a new worker has)."""

    def __init__(self) -> None:
        self.h100 = flavor("h100", node_labels={"nvidia.com/gpu.product": PRODUCT})
        priority_class("normal", 0, default=True)
        self.team = queue(
            "team-a", parent=queue("root"), tenant=tenant("a", namespaces=("team-a",))
        )
        quota(self.team, self.h100, 0, 8, 16)
        self.cluster = SimulatedCluster(MemoryStore(), VirtualClock(START))
        self.cluster.add_nodes([gpu_node_manifest(f"u-{n}", GROUP) for n in (1, 2)])
        self.loop = self.restart()

    def restart(self) -> ControlLoop:
        return ControlLoop(SimulatedBackend(self.cluster))

    def submit(self, name: str, gpus: int) -> None:
        do_submit_workload(
            name, queue=self.team, pod_sets=[PodSetSpec(1, gpus=gpus, flavor=self.h100)]
        )


def _cycle(loop: ControlLoop) -> dict[str, float]:
    result = loop.run_cycle()
    assert result.status == "succeeded", result.error
    return result.timings


def _skipped(loop: ControlLoop) -> None:
    """A cycle of ``loop`` while another worker holds the lock: skipped, after its warm-up."""
    other, release = holding_the_lock()
    try:
        assert loop.run_cycle().status == "skipped"
    finally:
        release.set()
        other.join()


def test_a_worker_that_finds_the_lock_taken_is_warm_when_its_turn_comes() -> None:
    pool = Pool()
    _cycle(pool.loop)  # the nodes' rows
    loop = pool.restart()
    _skipped(loop)
    assert loop.state.loaded and set(loop.state.nodes) == {"u-1", "u-2"}
    assert SchedulingCycle.objects.filter(status="skipped").count() == 1

    first = _cycle(loop)
    assert first["warm"] > 0  # the warm-up's time, beside the phases
    assert set(PHASES) <= set(first)
    assert "warm" not in _cycle(loop)  # warm once


def test_the_first_cycle_after_a_warm_up_sees_what_changed_since() -> None:
    """An admin cordons a node and a user submits work between the warm-up and the cycle,
    and a node joins the cluster: the work is placed, and not on the cordoned node; the new
    node is in the inventory."""
    pool = Pool()
    _cycle(pool.loop)
    loop = pool.restart()
    _skipped(loop)
    do_set_node_cordoned(Node.objects.get(name="u-1"), cordoned=True, acting_user=None)
    pool.submit("train", gpus=8)
    pool.cluster.add_nodes([gpu_node_manifest("u-3", GROUP)])

    _cycle(loop)  # makes the pods
    _cycle(loop)  # binds them
    train = Workload.objects.get(name="train")
    assert train.state in ("admitted", "running")
    nodes = {p.node.name for p in train.placements.all()}
    assert len(nodes) == 1 and nodes <= {"u-2", "u-3"}
    assert Node.objects.filter(name="u-3", gone_at__isnull=True).exists()


def test_the_first_sync_compares_the_nodes_as_changed_since_the_warm_up() -> None:
    """A node's row changed by another writer after the warm-up read it: the first sync
    compares the cluster with the row as it is now (the warm-up's description of the
    nodes is kept only as the refreshes keep it up to date), so the row is put right."""
    pool = Pool()
    _cycle(pool.loop)
    cluster_labels = Node.objects.get(name="u-1").labels
    loop = pool.restart()
    _skipped(loop)
    Node.objects.filter(name="u-1").update(labels={"stale": "yes"}, updated_at=timezone.now())

    _cycle(loop)
    assert Node.objects.get(name="u-1").labels == cluster_labels


def test_a_failed_warm_up_leaves_the_cycle_to_read_everything(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pool = Pool()
    pool.submit("train", gpus=2)
    backend = pool.loop.backend
    sync = backend.sync
    calls = []

    def flaky() -> Any:
        calls.append(1)
        if len(calls) == 1:
            raise ClusterUnavailable("the API server is restarting")
        return sync()

    monkeypatch.setattr(backend, "sync", flaky)
    assert "warm" not in _cycle(pool.loop) and len(calls) == 2
    _cycle(pool.loop)
    assert Workload.objects.get(name="train").state in ("admitted", "running")
