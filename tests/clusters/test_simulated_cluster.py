"""What the simulated cluster does on its own: pods run and end, kubelets refuse what does not
fit, failed GPUs and lost nodes take their pods down, budgets count, Events expire, and a
reader that fell behind re-lists. (What both backends do alike: ``test_backend_contract.py``.)
"""

from __future__ import annotations

import random

import pytest
from cluster_worlds import START, SimulatedWorld, pod_manifest

from gpupool.clusters import api_objects
from gpupool.clusters.base import NewPod, PodBinding, PodKey, PodRef
from gpupool.clusters.node_profiles import gpu_node_manifest
from gpupool.clusters.simulated import (
    ScaledClock,
    SimulatedBackend,
    SimulatedCluster,
    VirtualClock,
    sleep_seconds,
)
from gpupool.clusters.simulated_store import MemoryStore


@pytest.fixture(params=["memory", pytest.param("database", marks=pytest.mark.django_db)])
def world(request: pytest.FixtureRequest) -> SimulatedWorld:
    """The simulated cluster in memory, and in the database (one model, two stores)."""
    return SimulatedWorld(database=request.param == "database")


def submitted(world: SimulatedWorld, name: str, *, gpus: int = 1, **fields: object) -> PodRef:
    """A pod created through gpupool, as the loop creates them."""
    pod = NewPod(world.namespace, name, image="train:1", labels={"gpupool.io/queue": "train"},
                 gpus=gpus, **fields)  # type: ignore[arg-type]  # fmt: skip
    (result,) = world.backend.create_pods([pod]).results
    assert result.status == "created"
    return result.pod


def phase(world: SimulatedWorld, pod: PodRef) -> str | None:
    view = world.backend.sync()
    facts = view.pods.get(pod.key)
    return None if facts is None else facts.phase


@pytest.mark.parametrize(
    ("command", "seconds"),
    [
        (["sleep", "3600"], 3600.0),
        (["/bin/sleep", "1.5m"], 90.0),
        (["sleep", "1h", "30m"], 5400.0),
        (["sleep", "2d"], 172_800.0),
        (["sleep", "forever"], None),
        (["python", "train.py"], None),
        (["sleep"], None),
    ],
    ids=["seconds", "minutes with a path", "arguments add up", "days", "not a number",
         "another program", "no argument"],
)  # fmt: skip
def test_a_command_sleeps_as_gnu_sleep_would(command: list[str], seconds: float | None) -> None:
    assert sleep_seconds(command) == seconds


def test_a_bound_pod_runs_its_sleep_then_succeeds(world: SimulatedWorld) -> None:
    node = world.node()
    pod = submitted(world, "train", command=("sleep", "600"))
    world.backend.sync()
    assert world.backend.bind([PodBinding(pod, node)]).ok
    assert phase(world, pod) == "Running"

    world.clock.advance(599)
    assert phase(world, pod) == "Running"
    world.clock.advance(1)
    view = world.backend.sync()
    assert view.pods[pod.key].phase == "Succeeded"
    assert view.delta.pods[pod.key].kind == "changed"


def test_without_a_sleep_the_expected_runtime_annotation_is_the_run_time(
    world: SimulatedWorld,
) -> None:
    node = world.node()
    estimated = submitted(world, "estimated", annotations={"gpupool.io/expected-runtime": "1h"})
    endless = submitted(world, "endless")
    world.backend.sync()
    assert world.backend.bind([PodBinding(estimated, node), PodBinding(endless, node)]).ok
    world.clock.advance(3600)
    assert phase(world, estimated) == "Succeeded"
    world.clock.advance(30 * 86400)
    assert phase(world, endless) == "Running"


def test_the_kubelet_rejects_a_pod_that_does_not_fit_the_node(world: SimulatedWorld) -> None:
    node = world.node(gpus=8)
    first = submitted(world, "first", gpus=6)
    second = submitted(world, "second", gpus=4)
    world.backend.sync()
    assert world.backend.bind([PodBinding(first, node)]).ok
    assert world.backend.bind([PodBinding(second, node)]).ok  # the binding API does not count

    assert phase(world, first) == "Running"
    assert phase(world, second) == "Failed"
    (body,) = [p for p in world.cluster.pods() if p.name == "second"]
    assert body.node_name == node


def test_the_kubelet_rejects_a_pod_whose_node_selector_the_node_fails(
    world: SimulatedWorld,
) -> None:
    node = world.node()
    picky = submitted(world, "picky", node_selector={"nvidia.com/gpu.product": "NVIDIA-GB200"})
    world.backend.sync()
    assert world.backend.bind([PodBinding(picky, node)]).ok
    assert phase(world, picky) == "Failed"


def test_an_unhealthy_gpu_leaves_allocatable_and_fails_the_pod_using_it(
    world: SimulatedWorld,
) -> None:
    node = world.node(gpus=8)
    low = submitted(world, "low", gpus=4)  # devices 0-3
    high = submitted(world, "high", gpus=4)  # devices 4-7
    world.backend.sync()
    assert world.backend.bind([PodBinding(low, node)]).ok
    assert world.backend.bind([PodBinding(high, node)]).ok

    world.cluster.set_gpu_health(node, 5, healthy=False, reason="XID 79")
    view = world.backend.sync()

    assert view.nodes[node].allocatable.gpus == 7 and view.nodes[node].capacity.gpus == 8
    assert (view.pods[low.key].phase, view.pods[high.key].phase) == ("Running", "Failed")
    assert world.cluster.unhealthy_gpus(node) == {5: "XID 79"}
    replacement = submitted(world, "replacement", gpus=4)
    world.backend.sync()
    assert world.backend.bind([PodBinding(replacement, node)]).ok
    assert phase(world, replacement) == "Failed"  # 3 healthy devices are free, not 4

    world.cluster.set_gpu_health(node, 5, healthy=True)
    assert world.backend.sync().nodes[node].allocatable.gpus == 8


def test_a_failed_gpu_of_a_shared_node_takes_its_replicas_away(world: SimulatedWorld) -> None:
    group = {"kind": "shared", "prefix": "l40s", "gpus": 4, "replicas": 4, "product": "NVIDIA-L40S"}
    (node,) = world.cluster.add_nodes([gpu_node_manifest("l40s-0", group)])
    slices = [submitted(world, f"slice-{i}", annotations={"gpupool.io/gpu-milli": "250"})
              for i in range(5)]  # fmt: skip
    world.backend.sync()
    for pod in slices:
        assert world.backend.bind([PodBinding(pod, node)]).ok

    world.cluster.set_gpu_health(node, 0, healthy=False, reason="ECC")
    view = world.backend.sync()

    assert view.nodes[node].allocatable.gpus == 12
    phases = [view.pods[p.key].phase for p in slices]
    assert phases == ["Failed"] * 4 + ["Running"]  # replicas 0-3 are GPU 0's


def test_a_lost_node_takes_its_pods_after_the_toleration_unless_it_comes_back(
    world: SimulatedWorld,
) -> None:
    lost, back = world.node(), world.node()
    doomed = world.pod("doomed", scheduler="default-scheduler", node=lost)
    ours = submitted(world, "ours")
    kept = world.pod("kept", scheduler="default-scheduler", node=back)
    world.backend.sync()
    assert world.backend.bind([PodBinding(ours, lost)]).ok

    world.cluster.set_node_ready(lost, False)
    world.cluster.set_node_ready(back, False)
    world.clock.advance(200)
    world.cluster.set_node_ready(back, True)
    view = world.backend.sync()
    assert not view.nodes[lost].ready and any(
        t.key == "node.kubernetes.io/unreachable" for t in view.nodes[lost].taints
    )
    assert ours.key in view.pods
    world.clock.advance(100)
    view = world.backend.sync()

    assert ours.key not in view.pods and view.delta.pods[ours.key].kind == "removed"
    assert lost not in view.foreign_usage
    assert view.foreign_usage[back].gpus == 1
    assert not world.exists(doomed) and world.exists(kept)
    reasons = [e["reason"] for e in world.events_of(ours)]
    assert "TaintManagerEviction" in reasons


def test_a_pod_bound_to_a_lost_node_starts_when_the_node_comes_back(world: SimulatedWorld) -> None:
    node = world.node()
    world.cluster.set_node_ready(node, False)
    pod = submitted(world, "patient", command=("sleep", "60"))
    world.backend.sync()
    assert world.backend.bind([PodBinding(pod, node)]).ok
    assert phase(world, pod) == "Pending"
    world.clock.advance(120)
    world.cluster.set_node_ready(node, True)
    assert phase(world, pod) == "Running"
    world.clock.advance(60)
    assert phase(world, pod) == "Succeeded"


def test_evictions_of_one_set_count_against_the_budget_one_by_one(world: SimulatedWorld) -> None:
    node = world.node()
    pods = [world.pod(f"replica-{i}", node=node, labels={"app": "serving"}) for i in range(3)]
    world.budget("serving", {"app": "serving"}, min_available=2)
    world.backend.sync()

    # Each alone may go (3 healthy, 2 needed); the second in the same call may not.
    outcome = world.backend.evict(pods[:2], reason="reclaim")

    assert [r.status for r in outcome.results] == ["evicted", "refused"]
    assert not outcome.complete
    assert not world.exists(pods[0]) and world.exists(pods[1])


def test_a_budget_by_max_unavailable_counts_pods_already_down(world: SimulatedWorld) -> None:
    node, elsewhere = world.node(), world.node()
    up = world.pod("up", node=node, labels={"app": "db"})
    world.pod("down", node=elsewhere, labels={"app": "db"})
    world.cluster.add_disruption_budget(world.namespace, "db", {"app": "db"}, max_unavailable=1)
    world.cluster.set_node_ready(elsewhere, False)  # its pod is no longer healthy
    world.backend.sync()
    (result,) = world.backend.evict([up], reason="drain").results
    assert result.status == "refused"


def test_a_pending_pod_is_evicted_whatever_its_budget_says(world: SimulatedWorld) -> None:
    waiting = world.pod("waiting", labels={"app": "serving"})
    world.budget("serving", {"app": "serving"}, min_available=5)
    world.backend.sync()
    assert [r.status for r in world.backend.evict([waiting], "preempt").results] == ["evicted"]


def test_events_expire_after_an_hour(world: SimulatedWorld) -> None:
    pod = world.pod("waiting")
    assert world.backend.record_event(pod, "Pending", "quota") == "created"
    world.clock.advance(3599)
    world.cluster.advance()
    assert len(world.events_of(pod)) == 1
    world.clock.advance(1)
    world.cluster.advance()
    assert world.events_of(pod) == []


def test_a_reader_behind_the_compaction_relists_and_its_delta_is_still_exact() -> None:
    clock = VirtualClock(START)
    cluster = SimulatedCluster(MemoryStore(history_limit=10), clock)
    cluster.add_nodes([gpu_node_manifest("n-0", {"gpus": 8, "product": "NVIDIA-H100-80GB-HBM3"})])
    reader = SimulatedBackend(cluster)
    kept = cluster.add_pod(pod_manifest("a", "kept", 1))
    doomed = cluster.add_pod(pod_manifest("a", "doomed", 1))
    assert reader.sync().delta.relisted

    cluster.delete_pods([doomed], "gone")
    born = [cluster.add_pod(pod_manifest("a", f"born-{i}", 1)) for i in range(12)]
    view = reader.sync()

    assert view.delta.relisted
    assert view.delta.pods_of("removed") == {doomed.key}
    assert view.delta.pods_of("added") == {p.key for p in born}
    assert kept.key not in view.delta.pods


def test_two_backends_on_one_store_each_see_what_the_other_did(world: SimulatedWorld) -> None:
    node = world.node()
    other = SimulatedBackend(world.cluster)
    pod = submitted(world, "shared")
    assert pod.key in other.sync().pods
    assert other.bind([PodBinding(pod, node)]).ok
    view = world.backend.sync()
    assert view.pods[pod.key].node_name == node and view.delta.pods[pod.key].kind == "added"


def test_the_cached_facts_always_equal_a_decode_of_the_stored_object() -> None:
    rng = random.Random(7)
    world = SimulatedWorld()
    nodes = [world.node(gpus=8) for _ in range(3)]
    pods: list[PodRef] = []
    for step in range(300):
        choice = rng.random()
        if choice < 0.35:
            pods.append(submitted(world, f"p-{step}", gpus=rng.choice([1, 2, 4]),
                                  command=("sleep", str(rng.randint(10, 900)))))  # fmt: skip
        elif choice < 0.6 and pods:
            world.backend.bind([PodBinding(rng.choice(pods), rng.choice(nodes))])
        elif choice < 0.7 and pods:
            world.backend.evict([rng.choice(pods)], "preempt")
        elif choice < 0.75:
            world.cluster.set_node_ready(rng.choice(nodes), rng.random() < 0.6)
        elif choice < 0.8:
            world.cluster.set_gpu_health(rng.choice(nodes), rng.randrange(8), rng.random() < 0.5)
        else:
            world.clock.advance(rng.uniform(0, 400))
        world.backend.sync()
    with world.cluster.store.transaction() as tx:
        stored = tx.select("Pod") + tx.select("Node")
    assert stored
    for obj in stored:
        decode = api_objects.pod_facts if obj.kind == "Pod" else api_objects.node_facts
        assert obj.decoded() == decode(obj.body), obj.key
    view = world.backend.sync()
    assert set(view.pods) == {PodKey(o.namespace, o.name) for o in stored if o.kind == "Pod"}


def _twin_worlds(seed: int) -> tuple[SimulatedWorld, SimulatedWorld, list[list[tuple[str, str]]]]:
    """Two simulated clusters in the same state (nodes, some lost or with a failed GPU, pods
    waiting or bound already), and random gangs over them: (pod name, node) per member."""
    rng = random.Random(seed)
    worlds = (SimulatedWorld(), SimulatedWorld())
    nodes: list[str] = []
    for _ in range(4):
        gpus = rng.choice([2, 4, 8])
        (name,) = {world.node(gpus=gpus) for world in worlds}  # the same name in both
        nodes.append(name)
    lost, broken = rng.sample(nodes, 2)
    names = [f"p-{i}" for i in range(40)]
    for world in worlds:
        world.cluster.set_node_ready(lost, False)
        world.cluster.set_gpu_health(broken, 0, healthy=False, reason="XID 79")
    shapes = {name: (rng.choice([1, 1, 2, 4]), rng.choice([8, 64, 200])) for name in names}
    picky = set(rng.sample(names, 3))
    for world in worlds:
        for name in names:
            gpus, cpu = shapes[name]
            selector = {"nvidia.com/gpu.product": "NVIDIA-GB200"} if name in picky else {}
            submitted(world, name, gpus=gpus, cpu_milli=cpu * 1000, node_selector=selector)
        world.backend.sync()
    early = [(name, rng.choice(nodes)) for name in rng.sample(names, 6)]
    for world in worlds:  # bound before: in the nodes' loads when the batch starts
        for name, node in early:
            world.backend.bind([PodBinding(PodRef(world.namespace, name), node)])
    gangs: list[list[tuple[str, str]]] = []
    for _ in range(25):
        members = rng.sample(names, rng.choice([1, 1, 2, 3]))
        gangs.append([(name, rng.choice(nodes)) for name in members])
    return worlds[0], worlds[1], gangs


def _pods_as_stored(world: SimulatedWorld) -> dict[str, tuple[object, ...]]:
    with world.cluster.store.transaction() as tx:
        return {
            obj.name: (
                obj.node,
                obj.body.get("status", {}).get("phase"),
                obj.body.get("status", {}).get("reason"),
                obj.body.get("status", {}).get("message"),
                dict(obj.sim.get("devices", {})),
                obj.sim.get("evict_at"),
            )
            for obj in tx.select("Pod")
        }


@pytest.mark.parametrize("seed", range(12))
def test_gangs_bound_in_one_batch_end_as_gangs_bound_one_by_one(seed: int) -> None:
    """``bind_many`` keeps each node's load through its transaction instead of listing the
    node's pods per pod admitted: the kubelets give the same devices, reject the same pods
    (out of GPUs, CPU, pods; a selector the node fails) and leave pods of a lost node waiting
    exactly as gangs bound one at a time do; each gang is still whole or not at all."""
    batch, alone, gangs = _twin_worlds(seed)

    def refs(world: SimulatedWorld, gang: list[tuple[str, str]]) -> list[PodBinding]:
        return [PodBinding(PodRef(world.namespace, name), node) for name, node in gang]

    outcomes = batch.backend.bind_many({f"g{i}": refs(batch, g) for i, g in enumerate(gangs)})
    one_by_one = [alone.backend.bind(refs(alone, gang)) for gang in gangs]

    assert [(o.ok, o.error) for o in outcomes.values()] == [(o.ok, o.error) for o in one_by_one]
    assert _pods_as_stored(batch) == _pods_as_stored(alone)
    phases = [state[1] for state in _pods_as_stored(batch).values()]
    assert "Running" in phases and "Failed" in phases  # both kinds of admission were judged


@pytest.mark.parametrize("seed", range(10))
def test_loads_kept_from_batch_to_batch_admit_as_loads_read_afresh(seed: int) -> None:
    """``bind_many`` keeps the nodes' loads for the next batch, less those of the nodes whose
    pods (created, bound, ended, evicted) or node (lost, a GPU failed) changed in between: the
    kubelets admit, reject and give devices exactly as in a cluster that reads every load
    afresh for each batch."""
    rng = random.Random(seed)
    kept, fresh = SimulatedWorld(), SimulatedWorld()
    worlds = (kept, fresh)
    nodes: list[str] = []
    for _ in range(3):
        gpus = rng.choice([2, 4, 8])
        (name,) = {world.node(gpus=gpus) for world in worlds}  # the same name in both
        nodes.append(name)
    names: list[str] = []
    batches = 0
    for step in range(250):
        choice = rng.random()
        if choice < 0.3:
            names.append(f"p-{step}")
            gpus, runtime = rng.choice([1, 2, 4]), str(rng.randint(10, 900))
            for world in worlds:
                submitted(world, names[-1], gpus=gpus, command=("sleep", runtime))
        elif choice < 0.6 and names:
            gangs = {
                f"g{i}": [(n, rng.choice(nodes)) for n in rng.sample(names, min(len(names), 2))]
                for i in range(rng.randint(1, 3))
            }
            fresh.cluster._loads = {}  # read afresh, as before loads were kept
            outcomes = [
                {
                    key: (outcome.ok, outcome.error)
                    for key, outcome in world.backend.bind_many(
                        {
                            key: [PodBinding(PodRef(world.namespace, n), node) for n, node in gang]
                            for key, gang in gangs.items()
                        }
                    ).items()
                }
                for world in worlds
            ]
            assert outcomes[0] == outcomes[1], step
            assert _pods_as_stored(kept) == _pods_as_stored(fresh), step
            batches += 1
        elif choice < 0.7 and names:
            victim = rng.choice(names)
            for world in worlds:
                world.backend.evict([PodRef(world.namespace, victim)], "preempt")
                if victim.endswith("0"):
                    # made again under the same name (to be bound anywhere)
                    world.backend.sync()
                    submitted(world, victim, gpus=1)
        elif choice < 0.75:
            node, ready = rng.choice(nodes), rng.random() < 0.6
            for world in worlds:
                world.cluster.set_node_ready(node, ready)
        elif choice < 0.8:
            node, gpu, healthy = rng.choice(nodes), rng.randrange(2), rng.random() < 0.5
            for world in worlds:
                world.cluster.set_gpu_health(node, gpu, healthy)
        else:
            seconds = rng.uniform(0, 400)
            for world in worlds:
                world.clock.advance(seconds)
    assert batches > 30
    assert _pods_as_stored(kept) == _pods_as_stored(fresh)


def test_a_batch_reads_only_the_loads_of_nodes_changed_since_the_last(
    world: SimulatedWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    import gpupool.clusters.simulated as simulated

    quiet, busy = world.node(gpus=8), world.node(gpus=8)
    first = [submitted(world, f"first-{i}", gpus=2) for i in range(2)]
    world.backend.bind_many({"a": [PodBinding(first[0], quiet)], "b": [PodBinding(first[1], busy)]})
    read: list[str] = []
    node_load = simulated._node_load

    def counted(tx: object, node: str, leave_out: object = None) -> object:
        read.append(node)
        return node_load(tx, node, leave_out)  # type: ignore[arg-type]

    monkeypatch.setattr(simulated, "_node_load", counted)
    world.backend.evict([first[1]], "preempt")  # the busy node's pods change
    second = [submitted(world, f"second-{i}", gpus=2) for i in range(2)]
    outcomes = world.backend.bind_many(
        {"c": [PodBinding(second[0], quiet)], "d": [PodBinding(second[1], busy)]}
    )

    assert all(outcome.ok for outcome in outcomes.values())
    assert read == [busy]  # the quiet node's load was kept from the first batch
    with world.cluster.store.transaction() as tx:
        devices = {p.name: p.sim.get("devices", {}) for p in tx.select("Pod")}
    assert devices["second-0"] == {"nvidia.com/gpu": [2, 3]}  # beside first-0's [0, 1]
    assert devices["second-1"] == {"nvidia.com/gpu": [0, 1]}  # first-1's, evicted


def test_a_pod_made_again_under_its_name_leaves_its_old_node_s_kept_load(
    world: SimulatedWorld,
) -> None:
    node = world.node(gpus=8)
    whole = submitted(world, "whole", gpus=8)
    assert world.backend.bind_many({"a": [PodBinding(whole, node)]})["a"].ok
    assert phase(world, whole) == "Running"
    world.backend.evict([whole], "preempt")
    submitted(world, "whole", gpus=8)  # made again: the store's change is a pod, not a tombstone
    other = submitted(world, "other", gpus=8)

    assert world.backend.bind_many({"b": [PodBinding(other, node)]})["b"].ok

    assert phase(world, other) == "Running"  # the node's load no longer counts the old "whole"


def test_a_batch_gives_two_gangs_on_one_node_different_devices(world: SimulatedWorld) -> None:
    node = world.node(gpus=8)
    first, second, third = (submitted(world, f"four-{i}", gpus=4) for i in range(3))
    world.backend.sync()

    outcomes = world.backend.bind_many(
        {name: [PodBinding(pod, node)] for name, pod in (("a", first), ("b", second), ("c", third))}
    )

    assert all(outcome.ok for outcome in outcomes.values())  # the binding API does not count
    with world.cluster.store.transaction() as tx:
        devices = {p.name: p.sim.get("devices", {}) for p in tx.select("Pod")}
    assert devices["four-0"] == {"nvidia.com/gpu": [0, 1, 2, 3]}
    assert devices["four-1"] == {"nvidia.com/gpu": [4, 5, 6, 7]}
    assert devices["four-2"] == {}  # rejected by the kubelet: no device left
    assert phase(world, third) == "Failed"


def test_a_scaled_clock_runs_speed_times_faster_from_its_origin() -> None:
    wall = [1000.0]
    clock = ScaledClock(origin=START, wall_origin=1000.0, speed=60.0, wall=lambda: wall[0])
    twin = ScaledClock(origin=START, wall_origin=1000.0, speed=60.0, wall=lambda: wall[0])
    wall[0] += 60.0
    assert clock.now() == twin.now() == START + 3600.0


def test_pod_with_is_dataclasses_replace() -> None:
    # ``_pod_with`` builds the facts through PodFacts' slots' own setters: every field as
    # ``dataclasses.replace`` sets it, equal and hashed alike, and still frozen.
    import dataclasses

    from gpupool.clusters.base import NodeSelectorTerm, PodFacts, ResourceAmounts, Toleration
    from gpupool.clusters.simulated import _pod_with

    facts = PodFacts(
        "ns", "p-0", "uid-1", node_name=None, phase="Pending", labels={"a": "b"},
        annotations={"gpupool.io/queue": "q"}, requests=ResourceAmounts(gpus=2, cpu_milli=500),
        node_selector={"zone": "z1"}, required_node_affinity=(NodeSelectorTerm(),),
        tolerations=(Toleration(key="k"),), owner_kind="Job", owner_name="j", deleting=False,
        created_at=5.0, started_at=None,
    )  # fmt: skip
    changes: list[dict[str, object]] = [
        {},
        {"node_name": "n1"},
        {"node_name": "n1", "phase": "Running", "started_at": 60.0},
        {"phase": "Failed"},
        {field.name: None for field in dataclasses.fields(facts) if field.name != "namespace"},
    ]
    for changed in changes:
        built = _pod_with(facts, **changed)
        expected = dataclasses.replace(facts, **changed)
        assert type(built) is type(expected)
        for field in dataclasses.fields(expected):
            assert getattr(built, field.name) is getattr(expected, field.name)
        assert built == expected
        assert repr(built) == repr(expected)
    plain = PodFacts("ns", "p-1", "uid-2", labels=(), annotations=(), node_selector=())  # type: ignore[arg-type]
    assert plain.requests.mig == {}
    hashable = dataclasses.replace(plain, requests=None)
    assert hash(_pod_with(hashable, phase="Running")) == hash(
        dataclasses.replace(hashable, phase="Running")
    )
    with pytest.raises(dataclasses.FrozenInstanceError):
        built.phase = "Running"  # type: ignore[misc]


def test_stored_objects_evolved_and_written_are_what_the_constructor_builds() -> None:
    # ``evolve`` and the memory store's writes build objects through the slots' own setters:
    # each field as ``StoredObject(...)`` sets it, and the object still frozen.
    import dataclasses

    from gpupool.clusters.simulated_store import StoredObject

    def fields_of(obj: StoredObject) -> list[object]:
        return [getattr(obj, field.name) for field in dataclasses.fields(StoredObject)]

    body = {"metadata": {"name": "p", "namespace": "ns"}, "spec": {}}
    obj = StoredObject("Pod", "ns", "p", body, {"runtime_s": 60}, 3, 90.0, "n1", False, None)
    values = ["Node", "", "n2", {"b": 1}, {}, 9, None, "", True, None]
    everything = dict(zip([f.name for f in dataclasses.fields(StoredObject)], values, strict=True))
    for changes in ({}, {"revision": 4}, {"due_at": None, "node": ""}, everything):
        evolved = obj.evolve(**changes)
        expected = dataclasses.replace(obj, **changes)
        assert type(evolved) is StoredObject
        assert all(a is b for a, b in zip(fields_of(evolved), fields_of(expected), strict=True))
        with pytest.raises(dataclasses.FrozenInstanceError):
            evolved.revision = 1  # type: ignore[misc]
    store = MemoryStore()
    with store.transaction() as tx:
        written = tx.put(obj)
        tx.remove(written)
    stored = store._objects[obj.key]
    assert fields_of(written) == fields_of(
        dataclasses.replace(obj, revision=1, body={**body, "metadata": {**body["metadata"],
                                                                          "resourceVersion": "1"}})
    )  # fmt: skip
    assert fields_of(stored) == fields_of(
        dataclasses.replace(written, revision=2, deleted=True, due_at=None, node="")
    )


@pytest.mark.parametrize("phase", ["Pending", "Running", "Succeeded", "Failed"])
def test_a_pod_is_due_at_its_eviction_else_at_the_end_of_its_run(phase: str) -> None:
    from gpupool.clusters.base import PodFacts
    from gpupool.clusters.simulated import _next_due

    facts = PodFacts("ns", "p", "u", phase=phase)
    for evict_at in (None, 30, 90.5):
        for ends_at in (None, 60, 10.0):
            sim = {"evict_at": evict_at, "ends_at": ends_at}
            due = _next_due(sim, facts)
            if evict_at is not None:
                assert due == float(evict_at)
            elif phase == "Running" and ends_at is not None:
                assert due == float(ends_at)
            else:
                assert due is None
            assert due is None or type(due) is float
    assert _next_due({}, facts) is None
