"""B1's pool, small: loaded at once, then one cycle of the loop on it (the bench's path)."""

from __future__ import annotations

import pytest
from django.db import connection
from fake_cluster import FakeCluster

from gpupool.clusters.base import PodBinding
from gpupool.control.actions import do_load_pool
from gpupool.control.apply import new_pods
from gpupool.control.bench import PRODUCT, _moment, _run_of, node_labels
from gpupool.control.loop import ControlLoop
from gpupool.control.snapshot import build_snapshot
from gpupool.quotas.queries import ledger_mismatches
from gpupool.simulation.scale_pool import synthetic_snapshot
from gpupool.workloads.models import Placement, PodSet, Workload

pytestmark = pytest.mark.django_db


def test_a_pool_loads_at_once_and_reads_back_as_the_same_snapshot() -> None:
    snapshot, policy, now = synthetic_snapshot(50, 7)
    do_load_pool(snapshot, at=_moment(now), node_labels=node_labels())
    assert ledger_mismatches() == []  # the grants moved the budgets' kept balances
    read = build_snapshot(now=_moment(now), policy=policy).snapshot
    assert read.budgets == snapshot.budgets
    tenant = {q.name: q.tenant for q in snapshot.queues}
    assert [n.name for n in read.nodes] == sorted(n.name for n in snapshot.nodes)
    assert {w.name for w in read.workloads} == {
        f"{tenant[w.queue]}/{w.name}" for w in snapshot.workloads
    }
    assert sum(len(w.placement) for w in read.workloads) == sum(
        len(w.placement) for w in snapshot.workloads
    )


@pytest.mark.skipif("connection.vendor != 'postgresql'", reason="PostgreSQL's statistics")
def test_a_loaded_pool_is_planned_by_statistics_that_count_it() -> None:
    # Without them, the planner takes the tables for the empty ones they were until
    # autovacuum samples them, and plans a refresh by a few ids as a hash of every row.
    snapshot, _, now = synthetic_snapshot(50, 7)
    do_load_pool(snapshot, at=_moment(now), node_labels=node_labels())
    with connection.cursor() as cursor:
        for model in (Workload, PodSet, Placement):
            cursor.execute(
                "SELECT reltuples FROM pg_class WHERE relname = %s", [model._meta.db_table]
            )
            assert cursor.fetchone()[0] == model.objects.count() > 0, model.__name__


def test_the_loop_runs_a_cycle_on_the_loaded_pool() -> None:
    snapshot, policy, now = synthetic_snapshot(50, 7)
    labels = {
        n.name: {"nvidia.com/gpu.product": PRODUCT[n.flavor]}
        | ({} if n.domain == n.name else {"nvidia.com/gpu.clique": n.domain})
        for n in snapshot.nodes
    }
    do_load_pool(snapshot, at=_moment(now), node_labels=node_labels(), labels_of_node=labels)
    cluster = FakeCluster()
    cluster.offset = now - cluster.clock
    for node in snapshot.nodes:
        cluster.add_node(
            node.name,
            node.gpus,
            PRODUCT[node.flavor],
            cpu=node.cpu_milli // 1000,
            memory_gib=node.memory_mib // 1024,
            labels=labels[node.name],
        )
    tenant = {q.name: q.tenant or "default" for q in snapshot.queues}
    for workload in snapshot.workloads:
        pods = new_pods(_run_of(workload, tenant[workload.queue]), ())
        cluster.create_pods(pods)
        if workload.state == "running":
            refs = [cluster.pods[(p.namespace, p.name)].ref for p in pods]
            assert cluster.bind(
                [PodBinding(r, pod.node) for r, pod in zip(refs, workload.placement, strict=False)]
            ).ok
    cluster.run()
    loop = ControlLoop(cluster, policy=policy)
    result = loop.run_cycle()
    assert result.status == "succeeded", result.error
    assert result.counts["sync_writes"] == 0  # the cluster agrees with the database
    assert result.counts["admitted"] > 0
    assert Workload.objects.filter(state="admitted").count() == result.counts["admitted"]
    again = loop.run_cycle()
    assert again.status == "succeeded", again.error
