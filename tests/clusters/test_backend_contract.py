"""One contract, two backends: what the control loop may rely on from any ``ClusterBackend``.

Every test runs on the simulated cluster (in memory, virtual clock: everywhere, in a blink)
and on the local Kubernetes plane (marked ``k8s``), through the same ``World`` interface
(``cluster_worlds.py``): gangs bound whole or not at all, evictions under disruption budgets,
other schedulers' pods as occupied capacity, deltas, Events, cordoned and NotReady nodes,
pods created and deleted through gpupool.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from typing import Any

import pytest
from cluster_worlds import EVERY_BACKEND, KubernetesWorld, SimulatedWorld, World, open_world

from gpupool.clusters.base import (
    ClusterView,
    EventRequest,
    NewPod,
    PodBinding,
    PodKey,
    PodRef,
)
from gpupool.clusters.inventory import exclusion


@pytest.fixture(params=EVERY_BACKEND)
def world(request: pytest.FixtureRequest) -> Iterator[World]:
    """The contract's backends (``cluster_worlds.EVERY_BACKEND``)."""
    yield from open_world(request)


def in_view(view: ClusterView, *pods: PodRef) -> bool:
    return all(pod.key in view.pods for pod in pods)


def another_backend(world: World) -> Any:
    """A second backend on the same cluster (a restarted process: no memory of the first)."""
    if isinstance(world, SimulatedWorld):
        from gpupool.clusters.simulated import SimulatedBackend

        return SimulatedBackend(world.cluster)
    from gpupool.clusters.kubernetes import KubernetesBackend

    assert isinstance(world, KubernetesWorld)
    return KubernetesBackend(world.scheduler)


# --- the cache and its deltas ---------------------------------------------------------------


def test_the_first_sync_lists_everything_as_added_then_only_changes_follow(world: World) -> None:
    node = world.node(gpus=4)
    pod = world.pod("listed")
    first = world.until("the node and the pod", lambda v: node in v.nodes and in_view(v, pod))
    if first.delta.relisted:  # the backend's very first sync: everything is new
        assert node in first.delta.nodes_of("added") and pod.key in first.delta.pods_of("added")
    assert first.nodes[node].allocatable.gpus == 4
    assert first.pods[pod.key].uid == pod.uid

    again = world.backend.sync()
    assert pod.key not in again.delta.pods and node not in again.delta.nodes

    world.delete_behind(pod)
    gone = world.until("the pod to go", lambda v: pod.key not in v.pods)
    change = gone.delta.pods.get(pod.key)
    if change is not None:  # the last facts come with a removal
        assert change.kind == "removed" and change.before is not None
        assert change.before.uid == pod.uid
    assert gone.revision > first.revision


def test_a_pod_created_and_deleted_between_two_syncs_is_no_change(world: World) -> None:
    world.backend.sync()
    fleeting = world.pod("fleeting")
    world.delete_behind(fleeting)
    settled = world.pod("settled")
    view = world.until("the second pod", lambda v: in_view(v, settled))
    assert fleeting.key not in view.pods and fleeting.key not in view.delta.pods


def test_pods_of_another_scheduler_count_as_occupied_capacity_on_their_node(
    world: World,
) -> None:
    node = world.node(gpus=8)
    world.backend.sync()
    web = world.pod("web", gpus=2, scheduler="default-scheduler", node=node)
    view = world.until("the other scheduler's pod", lambda v: node in v.foreign_usage)
    assert view.foreign_usage[node].gpus == 2
    assert web.key not in view.pods  # not ours: only its usage is kept
    world.delete_behind(web)
    view = world.until("the usage to be freed", lambda v: node not in v.foreign_usage)
    assert node in view.delta.foreign_usage or node not in view.foreign_usage


def test_a_cordoned_node_and_a_not_ready_node_show_in_their_facts(world: World) -> None:
    cordoned = world.node()
    lost = world.node_to_lose()
    world.until("the nodes", lambda v: cordoned in v.nodes and lost in v.nodes)

    world.cordon(cordoned)
    world.set_ready(lost, False)
    changed: set[str] = set()  # the two changes may reach two syncs: each is in one's delta

    def both_changed(v: ClusterView) -> bool:
        changed.update(v.delta.nodes)
        return v.nodes[cordoned].unschedulable and not v.nodes[lost].ready

    view = world.until("the cordon and the lost node", both_changed)
    assert exclusion(view.nodes[cordoned]) == "cordoned"
    assert exclusion(view.nodes[lost]) in (
        "not Ready",
        "tainted node.kubernetes.io/unreachable:NoSchedule",
    )
    assert {cordoned, lost} <= changed

    world.cordon(cordoned, False)
    world.set_ready(lost, True)
    view = world.until(
        "both back",
        lambda v: not v.nodes[cordoned].unschedulable and v.nodes[lost].ready,
    )
    assert exclusion(view.nodes[cordoned]) is None and exclusion(view.nodes[lost]) is None


# --- binding --------------------------------------------------------------------------------


def test_a_gang_is_bound_whole_and_its_pods_run(world: World) -> None:
    node = world.node(gpus=8)
    gang = [world.pod(f"gang-{i}", gpus=2) for i in range(4)]
    world.until("the gang and the node", lambda v: in_view(v, *gang) and node in v.nodes)

    outcome = world.backend.bind([PodBinding(pod, node) for pod in gang])

    assert outcome.ok and outcome.bound == tuple(gang)
    assert [world.node_of(pod) for pod in gang] == [node] * 4
    view = world.until(
        "the gang running",
        lambda v: all(v.pods[p.key].phase == "Running" for p in gang),
    )
    assert all(view.pods[p.key].node_name == node for p in gang)
    assert all(view.pods[p.key].started_at is not None for p in gang)


def test_a_rebind_to_the_same_node_counts_as_done_and_another_node_is_refused(
    world: World,
) -> None:
    node = world.node(gpus=8)
    elsewhere = world.node(gpus=8)
    pod = world.pod("again")
    world.until("the pod and the nodes", lambda v: in_view(v, pod) and elsewhere in v.nodes)
    assert world.backend.bind([PodBinding(pod, node)]).ok
    assert world.backend.bind([PodBinding(pod, node)]).ok  # whatever the cache says yet
    world.until("the binding in the cache", lambda v: v.pods[pod.key].node_name == node)
    assert world.backend.bind([PodBinding(pod, node)]).ok

    refused = world.backend.bind([PodBinding(pod, elsewhere)])

    assert not refused.ok and f"already bound to node {node}" in refused.error
    assert world.node_of(pod) == node


def test_a_gang_whose_member_is_gone_leaves_no_pod_bound(world: World) -> None:
    node = world.node(gpus=8)
    first, second = (world.pod(f"pair-{i}") for i in range(2))
    world.until("the pair", lambda v: in_view(v, first, second) and node in v.nodes)
    world.delete_behind(second)  # the cache still shows it

    outcome = world.backend.bind([PodBinding(first, node), PodBinding(second, node)])

    assert not outcome.ok
    assert outcome.failed == second and "no longer exists" in outcome.error
    assert outcome.left_bound == ()
    assert set(outcome.rolled_back) <= {first}
    assert world.node_of(first) is None  # never bound, or rolled back


def test_a_gang_for_a_node_that_does_not_exist_binds_nothing(world: World) -> None:
    node = world.node(gpus=8)
    first, second = (world.pod(f"lost-{i}") for i in range(2))
    world.until("the pods", lambda v: in_view(v, first, second) and node in v.nodes)

    outcome = world.backend.bind([PodBinding(first, node), PodBinding(second, "no-such-node")])

    assert outcome.failed == second and "node no-such-node does not exist" in outcome.error
    assert outcome.rolled_back == () and outcome.left_bound == ()
    assert (world.node_of(first), world.node_of(second)) == (None, None)
    assert world.exists(first) and world.exists(second)  # nothing bound, nothing removed


def test_many_gangs_bind_each_whole_and_a_failing_one_leaves_the_others_bound(
    world: World,
) -> None:
    node = world.node(gpus=8)
    singles = [world.pod(f"one-{i}") for i in range(4)]
    pair = [world.pod(f"pair-{i}") for i in range(2)]
    broken = [world.pod(f"broken-{i}") for i in range(2)]
    world.until(
        "the pods and the node", lambda v: in_view(v, *singles, *pair, *broken) and node in v.nodes
    )
    world.delete_behind(broken[1])  # the cache still shows it
    gangs = {f"single-{i}": [PodBinding(pod, node)] for i, pod in enumerate(singles)}
    gangs["pair"] = [PodBinding(pod, node) for pod in pair]
    gangs["broken"] = [PodBinding(pod, node) for pod in broken]

    outcomes = world.backend.bind_many(gangs)

    assert list(outcomes) == list(gangs)
    assert all(outcomes[key].ok for key in gangs if key != "broken")
    assert [world.node_of(pod) for pod in [*singles, *pair]] == [node] * 6
    failed = outcomes["broken"]
    assert not failed.ok and failed.failed == broken[1] and "no longer exists" in failed.error
    assert failed.left_bound == () and set(failed.rolled_back) <= {broken[0]}
    assert world.node_of(broken[0]) is None  # never bound, or rolled back
    assert world.backend.bind_many({}) == {}


# --- eviction -------------------------------------------------------------------------------


def test_an_eviction_a_budget_refuses_aborts_the_victim_set(world: World) -> None:
    node = world.node(gpus=8)
    guarded = world.pod("guarded", node=node, labels={"app": "serving"})
    free = world.pod("free", node=node, labels={"app": "batch"})
    world.eventually("the pods running", lambda: world.node_of(guarded) and world.node_of(free))
    world.budget("serving", {"app": "serving"}, min_available=1)
    world.until("both pods", lambda v: in_view(v, guarded, free))

    outcome = world.backend.evict([free, guarded], reason="reclaim for team-b")

    statuses = {r.pod.name: r.status for r in outcome.results}
    assert statuses == {"guarded": "refused", "free": "skipped"}
    assert "disruption budget" in outcome.refused[0].message
    assert not outcome.complete
    assert world.node_of(free) == node and world.node_of(guarded) == node


def test_an_evicted_pod_leaves_says_why_and_a_second_eviction_finds_it_gone(
    world: World,
) -> None:
    node = world.node(gpus=8)
    victim = world.pod("victim", node=node)
    world.eventually("the pod bound", lambda: world.node_of(victim))
    world.until("the pod", lambda v: in_view(v, victim))

    outcome = world.backend.evict([victim], reason="reclaim for team-b")

    assert [r.status for r in outcome.results] == ["evicted"] and outcome.complete
    world.until("the victim to go", lambda v: victim.key not in v.pods)
    reasons = {e["reason"]: e["message"] for e in world.events_of(victim)}
    assert reasons.get("Preempted") == "evicted by gpupool: reclaim for team-b"
    again = world.backend.evict([victim], reason="again")
    assert [r.status for r in again.results] == ["gone"] and again.complete


# --- events, create and delete --------------------------------------------------------------


def test_an_event_shows_on_the_pod_and_repeats_are_counted_not_added(world: World) -> None:
    pod = world.pod("waiting")
    message = "quota: queue train has 0 of 8 h100 GPUs free (asked 8)"
    assert world.backend.record_event(pod, "Pending", message) == "created"
    assert world.backend.record_event(pod, "Pending", message) == "unchanged"
    restarted = another_backend(world)
    try:
        assert restarted.record_event(pod, "Pending", message) == "updated"
    finally:
        restarted.close()

    (event,) = world.events_of(pod)
    assert (event["reason"], event["message"], event["count"]) == ("Pending", message, 2)
    assert event["source"]["component"] == "gpupool"
    assert event["involvedObject"]["uid"] == pod.uid
    assert world.backend.record_event(pod, "Pending", "behind: position 3") == "created"
    assert len(world.events_of(pod)) == 2


def test_many_events_at_once_each_as_one_would_be_in_order(world: World) -> None:
    first, second = world.pod("first"), world.pod("second")
    told = [
        EventRequest(first, "Waiting", "behind: position 1"),
        EventRequest(second, "Waiting", "behind: position 2"),
        EventRequest(first, "Waiting", "behind: position 1"),
        EventRequest(second, "FailedScheduling", "unknown queue", "Warning"),
    ]
    assert world.backend.record_events(told) == ["created", "created", "unchanged", "created"]
    assert [(e["reason"], e["message"], e["count"]) for e in world.events_of(first)] == [
        ("Waiting", "behind: position 1", 1)
    ]
    assert sorted((e["reason"], e["type"]) for e in world.events_of(second)) == [
        ("FailedScheduling", "Warning"),
        ("Waiting", "Normal"),
    ]


def test_pods_created_through_gpupool_are_labelled_and_deleted_idempotently(
    world: World,
) -> None:
    name = f"sub-{secrets.token_hex(2)}"
    new = NewPod(
        world.namespace,
        name,
        image="registry.invalid/train:1",
        labels={"gpupool.io/queue": "train", "gpupool.io/workload": "sub"},
        annotations={"gpupool.io/min-member": "1"},
        gpus=2,
        cpu_milli=500,
        memory_mib=2048,
    )
    created = world.backend.create_pods([new])
    assert [r.status for r in created.results] == ["created"]
    assert created.results[0].pod.uid
    assert [r.status for r in world.backend.create_pods([new]).results] == ["exists"]
    key = PodKey(world.namespace, name)
    view = world.until("the created pod", lambda v: key in v.pods)
    facts = view.pods[key]
    assert facts.labels["app.kubernetes.io/managed-by"] == "gpupool"
    assert facts.annotations["gpupool.io/min-member"] == "1"
    assert (facts.requests.gpus, facts.requests.cpu_milli, facts.requests.memory_mib) == (
        2,
        500,
        2048,
    )
    assert facts.phase == "Pending" and facts.node_name is None

    ref = created.results[0].pod
    assert [r.status for r in world.backend.delete_pods([ref], "cancelled").results] == ["deleted"]
    world.until("the deletion", lambda v: key not in v.pods)
    assert [r.status for r in world.backend.delete_pods([ref], "cancelled").results] == ["gone"]


# --- the Jobs of gpupool's pods --------------------------------------------------------------


def test_a_jobs_facts_follow_its_pods_to_the_jobs_verdict(world: World) -> None:
    """The loop decides how a Job's work ends from the Job's facts (issue 14): a Job shows
    while it is active, with its verdict and reason once the controller gives it, and leaves
    the view when deleted; a Job whose pods are another scheduler's never shows. A backend
    without Jobs (the simulated cluster) shows none, and its pods have no Job: their phases
    alone say how work ends."""
    job = world.job("contract-job", backoff_limit=0)
    if job is None:
        pod = world.pod("no-job")
        view = world.until("the pod", lambda v: in_view(v, pod))
        assert not view.jobs and not view.delta.jobs
        assert all(facts.job is None for facts in view.pods.values())
        return
    other = world.job("contract-other", scheduler="default-scheduler")
    assert other is not None
    view = world.until(
        "the Job and its pod",
        lambda v: job in v.jobs and any(p.job == job for p in v.pods.values()),
    )
    assert view.jobs[job].state == "active" and view.jobs[job].uid
    assert view.jobs[job].workload == "contract-job"  # its template's gpupool.io/workload
    assert other not in view.jobs
    pod = next(p for p in view.pods.values() if p.job == job)
    world.fail_pod(pod.ref)
    ended = world.until("the Job's verdict", lambda v: v.jobs[job].state == "failed")
    facts = ended.jobs[job]
    assert (facts.reason, facts.failed) == ("BackoffLimitExceeded", 1)
    change = ended.delta.jobs[job]
    assert change.after == facts and change.before is not None
    assert other not in ended.delta.jobs
    from kubernetes import client

    assert isinstance(world, KubernetesWorld)
    client.BatchV1Api(world.core.api_client).delete_namespaced_job(
        job.name, job.namespace, propagation_policy="Background"
    )
    gone = world.until("the Job to leave the view", lambda v: job not in v.jobs)
    assert gone.delta.jobs[job].after is None
