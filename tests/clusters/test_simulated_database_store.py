"""The simulated cluster kept in the database: shared by processes, compacted, on one clock."""

from __future__ import annotations

import threading

import pytest
from cluster_worlds import START, database_store, pod_manifest

from gpupool.clusters.node_profiles import gpu_node_manifest
from gpupool.clusters.simulated import SimulatedBackend, SimulatedCluster, VirtualClock
from gpupool.simcluster.models import SimulatedClusterState, SimulatedObject
from gpupool.simcluster.store import (
    DatabaseStore,
    StateClock,
    clock_of,
    cluster_state,
    open_simulated_backend,
    open_simulated_cluster,
    restart_clock,
)

pytestmark = pytest.mark.django_db

H100 = {"gpus": 8, "product": "NVIDIA-H100-80GB-HBM3"}


def test_a_reader_behind_the_compacted_tombstones_relists_without_missing_a_deletion() -> None:
    clock = VirtualClock(START)
    cluster = SimulatedCluster(database_store(clock, horizon=5, compact_every=5), clock)
    cluster.add_nodes([gpu_node_manifest("n-0", H100)])
    reader = SimulatedBackend(cluster)
    doomed = cluster.add_pod(pod_manifest("a", "doomed", 1))
    kept = cluster.add_pod(pod_manifest("a", "kept", 1))
    assert reader.sync().delta.relisted

    cluster.delete_pods([doomed], "gone")
    born = [cluster.add_pod(pod_manifest("a", f"born-{i}", 1)) for i in range(12)]
    assert not SimulatedObject.objects.filter(deleted=True).exists()  # compacted away
    view = reader.sync()

    assert view.delta.relisted
    assert view.delta.pods_of("removed") == {doomed.key}
    assert view.delta.pods_of("added") == {p.key for p in born}
    assert kept.key not in view.delta.pods
    assert reader.sync().delta.empty and not reader.sync().delta.relisted


def test_a_process_that_opens_the_cluster_sees_what_another_made() -> None:
    maker = open_simulated_cluster()
    maker.add_nodes([gpu_node_manifest("h100-0", H100)])
    maker.add_pod(pod_manifest("nlp", "train-0", 8))

    view = open_simulated_backend().sync()

    assert set(view.nodes) == {"h100-0"}
    assert {str(key) for key in view.pods} == {"nlp/train-0"}
    assert SimulatedClusterState.objects.count() == 1


def test_every_process_reads_the_same_simulated_time_from_the_state_row() -> None:
    state = cluster_state(speed=60.0)
    first, second = clock_of(state), clock_of(SimulatedClusterState.objects.get())
    assert (first.speed, first.origin, first.wall_origin) == (60.0, state.clock_origin,
                                                             state.wall_origin)  # fmt: skip
    assert first == second


def test_a_restarted_demo_resumes_its_clock_where_the_last_write_left_it() -> None:
    state = cluster_state(speed=1.0)
    SimulatedClusterState.objects.filter(pk=state.pk).update(
        clock_origin=START, wall_origin=0.0, last_reading=START + 7200
    )  # a cluster last written two simulated hours after its origin, long ago

    clock = restart_clock(speed=60.0)

    assert clock.speed == 60.0
    assert START + 7200 <= clock.now() < START + 7200 + 600


@pytest.mark.django_db(transaction=True)
def test_concurrent_writers_get_distinct_revisions_and_a_follower_misses_none() -> None:
    from django.db import connection, connections

    if connection.vendor != "postgresql":
        pytest.skip("concurrent writers need a server database (SQLite in memory is per thread)")
    clock = VirtualClock(START)
    state = SimulatedClusterState.objects.create(clock_origin=START, wall_origin=START)
    follower = SimulatedBackend(SimulatedCluster(DatabaseStore(state.pk, clock), clock))
    seen: set[str] = set()
    errors: list[BaseException] = []

    def write(prefix: str) -> None:
        try:
            cluster = SimulatedCluster(DatabaseStore(state.pk, clock), clock)
            for i in range(40):
                cluster.add_pod(pod_manifest("a", f"{prefix}-{i}", 1))
        except BaseException as error:  # reported below, on the test's thread
            errors.append(error)
        finally:
            connections.close_all()

    writers = [threading.Thread(target=write, args=(p,)) for p in ("left", "right")]
    for writer in writers:
        writer.start()
    while any(w.is_alive() for w in writers):
        seen |= {key.name for key in follower.sync().delta.pods_of("added")}
    seen |= {key.name for key in follower.sync().delta.pods_of("added")}

    assert not errors
    assert len(seen) == 80
    revisions = list(SimulatedObject.objects.values_list("revision", flat=True))
    assert len(set(revisions)) == len(revisions) == 80
    assert SimulatedClusterState.objects.get(pk=state.pk).revision == max(revisions)


def test_a_new_speed_set_by_another_process_reaches_an_open_clock() -> None:
    assert isinstance(open_simulated_cluster().clock, StateClock)
    clock = StateClock(cluster_state(speed=1.0), refresh_s=0.0)
    before = clock.now()

    restart_clock(speed=120.0)  # what `gpupool sim clock --speed 120` does in another process

    assert clock.now() >= before and clock.speed == 120.0


def test_a_restarted_demo_resumes_no_earlier_than_the_work_the_pool_recorded() -> None:
    """Cycles that failed before writing to the cluster still stamped the work submitted
    meanwhile (on the pool's clock): resumed at the cluster's last write, the clock admitted
    work before its submission, which the database refuses, and every cycle after failed."""
    from datetime import UTC, datetime

    from domain_builders import flavor, priority_class, queue, tenant

    from gpupool.workloads.actions import PodSetSpec, do_submit_workload

    state = cluster_state(speed=1.0)
    SimulatedClusterState.objects.filter(pk=state.pk).update(
        clock_origin=START, wall_origin=0.0, last_reading=START + 7200
    )
    h100 = flavor("h100")
    priority_class("normal", default=True)
    team = queue("team-a", parent=queue("root"), tenant=tenant("a", namespaces=("team-a",)))
    later = datetime.fromtimestamp(START + 9000, tz=UTC)
    do_submit_workload("late", queue=team, pod_sets=[PodSetSpec(1, gpus=1, flavor=h100)], at=later)

    clock = restart_clock(speed=60.0)

    assert START + 9000 <= clock.now() < START + 9000 + 600
