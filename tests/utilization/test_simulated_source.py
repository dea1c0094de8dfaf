"""The simulated source draws each running workload's GPU use from its profile."""

from __future__ import annotations

import pytest

from gpupool.clusters.base import NewPod, PodBinding
from gpupool.clusters.node_profiles import gpu_node_manifest
from gpupool.clusters.simulated import SimulatedBackend, SimulatedCluster, VirtualClock
from gpupool.clusters.simulated_store import MemoryStore
from gpupool.utilization.activity import pod_activity
from gpupool.utilization.simulated import PROFILE_ANNOTATION, Profile, SimulatedSource

START = 1_800_000_000.0


class World:
    """A one-node simulated cluster on a virtual clock."""

    def __init__(self) -> None:
        self.clock = VirtualClock(START)
        self.cluster = SimulatedCluster(MemoryStore(), self.clock)
        self.backend = SimulatedBackend(self.cluster)
        group = {"kind": "hgx", "prefix": "u", "gpus": 8, "product": "NVIDIA-H100-80GB-HBM3"}
        self.cluster.add_nodes([gpu_node_manifest("u-1", group)])
        self.backend.sync()

    def run(self, name: str, gpus: int, profile: str | None = None) -> None:
        annotations = {PROFILE_ANNOTATION: profile} if profile else {}
        pod = NewPod("team-a", name, image="x", gpus=gpus, annotations=annotations,
                     labels={"gpupool.io/queue": "a", "gpupool.io/workload": name})  # fmt: skip
        (created,) = self.backend.create_pods([pod]).results
        self.backend.sync()
        assert self.backend.bind([PodBinding(created.pod, "u-1")]).ok


@pytest.fixture
def world() -> World:
    return World()


def test_each_profile_uses_its_gpus_as_its_name_says(world: World) -> None:
    world.run("train", 4, Profile.BUSY_TRAINING)
    world.run("notebook", 2, Profile.BURSTY_NOTEBOOK)
    world.run("reserved", 2, Profile.IDLE_RESERVATION)
    world.clock.advance(4 * 3600)

    readout = SimulatedSource(world.cluster, seed=7).read(START, START + 4 * 3600, 60)
    activity = {pod.name: a for pod, a in pod_activity(readout).items()}

    assert {name: a.gpus for name, a in activity.items()} == {
        "train": 4, "notebook": 2, "reserved": 2}  # fmt: skip
    assert activity["train"].active_gpu_seconds == activity["train"].observed_gpu_seconds
    assert activity["train"].mean_utilization >= 80
    assert activity["reserved"].active_gpu_seconds == 0
    assert activity["reserved"].last_active_at is None
    notebook = activity["notebook"]
    assert 0 < notebook.active_gpu_seconds < notebook.observed_gpu_seconds
    # the GPUs the pods hold are distinct and on the node
    devices = [(s.device.node, s.device.index) for s in readout.series]
    assert len(devices) == len(set(devices)) == 8


def test_a_window_read_twice_gives_the_same_samples_and_another_seed_others(
    world: World,
) -> None:
    world.run("notebook", 1, Profile.BURSTY_NOTEBOOK)
    world.clock.advance(3 * 3600)

    first = SimulatedSource(world.cluster, seed=1).read(START, START + 3 * 3600, 60)
    again = SimulatedSource(world.cluster, seed=1).read(START, START + 3 * 3600, 60)
    other = SimulatedSource(world.cluster, seed=2).read(START, START + 3 * 3600, 60)

    assert first.series == again.series
    assert first.series != other.series


def test_a_pod_is_sampled_from_its_start_only(world: World) -> None:
    world.clock.advance(600)
    world.run("late", 1, Profile.BUSY_TRAINING)
    world.clock.advance(600)

    readout = SimulatedSource(world.cluster).read(START, START + 1200, 60)

    (series,) = readout.series
    assert series.samples[0].at == START + 600
    assert len(series.samples) == 11


def test_without_an_annotation_the_profile_is_drawn_from_the_workload_and_seed(
    world: World,
) -> None:
    for number in range(8):
        world.run(f"job-{number}", 1)
    world.clock.advance(3600)

    readout = SimulatedSource(world.cluster, seed=3).read(START, START + 3600, 60)
    activity = pod_activity(readout)

    assert len(activity) == 8
    assert any(a.active_gpu_seconds == a.observed_gpu_seconds for a in activity.values())
    assert readout == SimulatedSource(world.cluster, seed=3).read(START, START + 3600, 60)


@pytest.mark.parametrize("threshold", [1.0, 50.0, 95.0])
def test_its_sums_per_pod_equal_pod_activity_of_its_samples(world: World, threshold: float) -> None:
    world.run("train", 2, Profile.BUSY_TRAINING)
    world.run("notebook", 2, Profile.BURSTY_NOTEBOOK)
    world.clock.advance(1000)
    world.run("late", 1)  # starts inside the window: sampled from its start only
    world.run("reserved", 1, Profile.IDLE_RESERVATION)
    world.clock.advance(2 * 3600)
    source = SimulatedSource(world.cluster, seed=5)

    for start, end, step in [(START, START + 3 * 3600, 15), (START, START + 600, 15),
                             (START + 7000, START + 7200, 60)]:  # fmt: skip
        summed = source.read_activity(start, end, step, threshold=threshold)
        expected = pod_activity(source.read(start, end, step), threshold=threshold)

        assert list(summed.activity) == list(expected)
        for pod, want in expected.items():
            got = summed.activity[pod]
            assert (got.gpus, got.last_active_at, got.last_seen_at) == (
                want.gpus, want.last_active_at, want.last_seen_at)  # fmt: skip
            assert got.observed_gpu_seconds == want.observed_gpu_seconds
            assert got.active_gpu_seconds == want.active_gpu_seconds
            assert got.mean_utilization == pytest.approx(want.mean_utilization, rel=1e-12)
    assert summed.xid_errors == () and summed.queries == 1


def test_a_late_pod_seen_in_no_step_of_the_window_counts_its_gpus_and_nothing_else(
    world: World,
) -> None:
    world.clock.advance(600)
    world.run("late", 2, Profile.BUSY_TRAINING)

    summed = SimulatedSource(world.cluster).read_activity(START, START + 300, 60, threshold=1)
    expected = pod_activity(SimulatedSource(world.cluster).read(START, START + 300, 60))

    assert summed.activity == expected
    (activity,) = summed.activity.values()
    assert (activity.gpus, activity.observed_gpu_seconds, activity.last_seen_at) == (2, 0.0, None)


def test_the_gpus_in_use_kept_between_reads_equal_a_fresh_read_of_the_store(
    world: World,
) -> None:
    """The cluster keeps who holds which GPUs from the store's changes (pods that start, end
    or go, nodes that go): after each change it answers what a reader new to the store
    decodes from every pod."""
    group = {"kind": "hgx", "prefix": "u", "gpus": 8, "product": "NVIDIA-H100-80GB-HBM3"}
    world.cluster.add_nodes([gpu_node_manifest("u-2", group)])
    world.backend.sync()

    def fresh() -> list[object]:
        return list(SimulatedCluster(world.cluster.store, world.clock).gpus_in_use())

    assert world.cluster.gpus_in_use() == fresh() == []
    world.run("train", 4)
    world.run("notebook", 2)
    first = world.cluster.gpus_in_use()
    assert first == fresh()
    assert sorted((h.pod.name, len(h.gpus)) for h in first) == [("notebook", 2), ("train", 4)]
    pod = NewPod("team-a", "later", image="x", gpus=1,
                 labels={"gpupool.io/queue": "a", "gpupool.io/workload": "later"})  # fmt: skip
    (created,) = world.backend.create_pods([pod]).results
    assert world.backend.bind([PodBinding(created.pod, "u-2")]).ok
    assert world.cluster.gpus_in_use() == fresh()
    assert len(world.cluster.gpus_in_use()) == 3
    (gone,) = [h.pod for h in world.cluster.gpus_in_use() if h.node == "u-2"]
    world.backend.delete_pods([gone.ref], "test")
    world.clock.advance(60)
    world.cluster.advance()
    assert world.cluster.gpus_in_use() == fresh()
    assert {h.node for h in world.cluster.gpus_in_use()} == {"u-1"}
    assert world.cluster.remove_node("u-1")
    assert world.cluster.gpus_in_use() == fresh() == []
