"""The Kubernetes backend against a real kube-apiserver with KWOK nodes (DESIGN section 4).

The informers list then follow changes, through a forced 410 Gone and an API server restart,
without missing one; gangs are bound whole or not at all; evictions honour disruption budgets;
Events show on the pod; other schedulers' pods count on their nodes. Every wait polls a
condition with a deadline: no bare sleeps.
"""

from __future__ import annotations

import json
import secrets
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from gpupool.clusters.base import (
    Change,
    ClusterView,
    EventRequest,
    NewPod,
    PodBinding,
    PodFacts,
    PodKey,
    PodRef,
)
from gpupool.clusters.kubernetes import KubernetesBackend

pytestmark = pytest.mark.k8s

T = TypeVar("T")
TIMEOUT = 60.0  # seconds; 2 shared cores can be slow
GPU = "nvidia.com/gpu"


def wait_for(what: str, probe: Callable[[], T | None], timeout: float = TIMEOUT) -> T:
    """Poll ``probe`` until it returns something truthy; fail naming ``what`` otherwise."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.1)


class Follower:
    """Syncs a backend and adds up its deltas, so a test sees every change since it began."""

    def __init__(self, backend: KubernetesBackend) -> None:
        self.backend = backend
        self.view: ClusterView = backend.sync()
        self.pods: dict[PodKey, Change[PodFacts]] = {}

    def sync(self) -> ClusterView:
        self.view = self.backend.sync()
        for key, change in self.view.delta.pods.items():
            first = self.pods.get(key)
            self.pods[key] = Change(first.before if first else change.before, change.after)
        return self.view

    def until(self, what: str, probe: Callable[[ClusterView], bool]) -> ClusterView:
        return wait_for(what, lambda: self.sync() if probe(self.sync()) else None)

    def kind(self, key: PodKey) -> str | None:
        change = self.pods.get(key)
        if change is None or change.before == change.after:
            return None
        return change.kind


@pytest.fixture
def core(k8s_api: Any) -> client.CoreV1Api:
    return client.CoreV1Api(k8s_api)


@pytest.fixture
def backend(k8s_scheduler_config: Any) -> Iterator[KubernetesBackend]:
    the_backend = KubernetesBackend(k8s_scheduler_config)
    yield the_backend
    the_backend.close()


def gpu_pod(
    core: client.CoreV1Api,
    namespace: str,
    name: str,
    gpus: int = 1,
    *,
    scheduler: str = "gpupool",
    node: str | None = None,
    labels: dict[str, str] | None = None,
) -> PodRef:
    """Create a pod asking for GPUs; its reference with the uid."""
    resources = {GPU: str(gpus), "cpu": "1", "memory": "1Gi"}
    spec: dict[str, Any] = {
        "schedulerName": scheduler,
        "containers": [
            {"name": "main", "image": "registry.invalid/train:1",
             "resources": {"requests": resources, "limits": resources}}
        ],
    }  # fmt: skip
    if node is not None:
        spec["nodeName"] = node
    body = {
        "metadata": {"name": name, "labels": {"gpupool.io/queue": "train", **(labels or {})}},
        "spec": spec,
    }
    created = json.loads(core.create_namespaced_pod(namespace, body, _preload_content=False).data)
    return PodRef(namespace, name, created["metadata"]["uid"])


def node_of(core: client.CoreV1Api, pod: PodRef) -> str | None:
    """The node a pod is bound to; None when unbound, gone or being deleted."""
    try:
        current = json.loads(
            core.read_namespaced_pod(pod.name, pod.namespace, _preload_content=False).data
        )
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise
    if current["metadata"].get("deletionTimestamp"):
        return None
    return current["spec"].get("nodeName")


def in_view(view: ClusterView, *pods: PodRef) -> bool:
    return all(pod.key in view.pods for pod in pods)


# --- the informers --------------------------------------------------------------------------


def test_the_cache_lists_then_follows_changes(
    backend: KubernetesBackend,
    core: client.CoreV1Api,
    k8s_namespace: str,
    k8s_fake_node: Callable[..., str],
) -> None:
    follower = Follower(backend)
    first = follower.view
    assert first.delta.relisted and first.delta.nodes_of("added") == set(first.nodes)
    still = backend.sync()
    assert still.revision == first.revision or not still.delta.empty

    pod = gpu_pod(core, k8s_namespace, "follow-me")
    follower.until("the new pod", lambda v: in_view(v, pod))
    core.patch_namespaced_pod(pod.name, k8s_namespace, {"metadata": {"labels": {"x": "y"}}})
    follower.until("the label", lambda v: v.pods[pod.key].labels.get("x") == "y")
    node = k8s_fake_node(gpus=4)
    follower.until("the new node", lambda v: node in v.nodes)
    core.delete_namespaced_pod(pod.name, k8s_namespace, grace_period_seconds=0)
    view = follower.until("the pod to go", lambda v: pod.key not in v.pods)

    assert follower.kind(pod.key) is None  # added, changed and removed since: no net change
    assert view.nodes[node].allocatable.gpus == 4
    assert view.revision > first.revision
    assert not view.delta.relisted  # followed by the watch, not re-listed


def test_the_first_list_reads_every_page(
    k8s_scheduler_config: Any, core: client.CoreV1Api, k8s_namespace: str
) -> None:
    pods = [gpu_pod(core, k8s_namespace, f"paged-{i}") for i in range(5)]
    with KubernetesBackend(k8s_scheduler_config, page_size=2) as paged:
        view = paged.sync()
    listed = json.loads(core.list_node(_preload_content=False).data)["items"]
    assert set(view.nodes) >= {node["metadata"]["name"] for node in listed}
    assert in_view(view, *pods)


def test_an_expired_resource_version_is_relisted_without_missing_a_change(
    backend: KubernetesBackend,
    core: client.CoreV1Api,
    k8s_namespace: str,
    k8s_compact_etcd: Callable[[], int],
) -> None:
    doomed = gpu_pod(core, k8s_namespace, "doomed")
    relabelled = gpu_pod(core, k8s_namespace, "relabelled")
    follower = Follower(backend)
    follower.until("the two pods", lambda v: in_view(v, doomed, relabelled))
    pods = backend.informers["pods"]
    pods.stop()
    old_version = pods.resource_version
    relists, expirations = pods.relists, pods.expirations
    # A write the stopped informer never sees, then a compaction past it: the server has
    # forgotten the informer's resourceVersion.
    core.create_namespaced_config_map(
        k8s_namespace, {"metadata": {"name": "moves-etcd-on"}, "data": {}}
    )
    k8s_compact_etcd()
    answer = wait_for(
        "a watch from the old resourceVersion to be answered",
        lambda: _first_watch_event(core, old_version),
    )
    assert answer["type"] == "ERROR" and answer["object"]["code"] == 410

    born = gpu_pod(core, k8s_namespace, "born")
    core.delete_namespaced_pod(doomed.name, k8s_namespace, grace_period_seconds=0)
    core.patch_namespaced_pod(relabelled.name, k8s_namespace, {"metadata": {"labels": {"x": "y"}}})
    pods.start()
    follower.until(
        "the three changes",
        lambda v: (
            in_view(v, born)
            and doomed.key not in v.pods
            and v.pods[relabelled.key].labels.get("x") == "y"
        ),
    )
    assert pods.expirations > expirations and pods.relists > relists
    assert follower.kind(born.key) == "added"
    assert follower.kind(doomed.key) == "removed"
    assert follower.kind(relabelled.key) == "changed"


def _first_watch_event(core: client.CoreV1Api, version: str | None) -> dict[str, Any] | None:
    """The first event of a pods watch from ``version`` (None while the server warms up)."""
    try:
        response = core.list_pod_for_all_namespaces(
            watch=True, resource_version=version, timeout_seconds=5, _preload_content=False
        )
    except ApiException as exc:
        if exc.status == 429:  # the restarted server's watch cache is not ready yet
            return None
        raise
    try:
        for chunk in response.stream(None):
            return dict(json.loads(chunk.split(b"\n")[0]))
    finally:
        response.release_conn()
    return None


def test_the_cache_survives_an_api_server_restart_without_missing_a_change(
    backend: KubernetesBackend,
    core: client.CoreV1Api,
    k8s_namespace: str,
    k8s_restart_apiserver: Callable[[], None],
) -> None:
    before = gpu_pod(core, k8s_namespace, "before")
    follower = Follower(backend)
    follower.until("the first pod", lambda v: in_view(v, before))

    k8s_restart_apiserver()
    after = gpu_pod(core, k8s_namespace, "after")
    core.delete_namespaced_pod(before.name, k8s_namespace, grace_period_seconds=0)
    view = follower.until(
        "the changes made after the restart",
        lambda v: in_view(v, after) and before.key not in v.pods and not v.stale,
    )
    assert follower.kind(after.key) == "added"
    assert follower.kind(before.key) == "removed"
    assert all(informer.connected for informer in backend.informers.values())
    assert len(view.nodes) >= 1


def test_pods_of_another_scheduler_count_on_their_node(
    backend: KubernetesBackend,
    core: client.CoreV1Api,
    k8s_namespace: str,
    k8s_fake_node: Callable[..., str],
) -> None:
    node = k8s_fake_node(gpus=8)
    follower = Follower(backend)
    web = gpu_pod(core, k8s_namespace, "web", gpus=2, scheduler="default-scheduler", node=node)
    view = follower.until("the other scheduler's pod", lambda v: node in v.foreign_usage)
    assert view.foreign_usage[node].gpus == 2
    assert web.key not in view.pods  # not ours: only its usage is kept
    core.delete_namespaced_pod(web.name, k8s_namespace, grace_period_seconds=0)
    view = follower.until("the usage to be freed", lambda v: node not in v.foreign_usage)
    assert node in view.delta.foreign_usage or node not in view.foreign_usage


# --- binding --------------------------------------------------------------------------------


def test_a_gang_is_bound_whole(
    backend: KubernetesBackend,
    core: client.CoreV1Api,
    k8s_namespace: str,
    k8s_fake_node: Callable[..., str],
) -> None:
    node = k8s_fake_node(gpus=8)
    gang = [gpu_pod(core, k8s_namespace, f"gang-{i}", gpus=2) for i in range(4)]
    Follower(backend).until(
        "the gang and the node", lambda v: in_view(v, *gang) and node in v.nodes
    )
    outcome = backend.bind([PodBinding(pod, node) for pod in gang])
    assert outcome.ok and outcome.bound == tuple(gang)
    assert [node_of(core, pod) for pod in gang] == [node] * 4


def test_a_rebind_to_the_same_node_counts_as_done(
    backend: KubernetesBackend,
    core: client.CoreV1Api,
    k8s_namespace: str,
    k8s_fake_node: Callable[..., str],
) -> None:
    node = k8s_fake_node(gpus=8)
    pod = gpu_pod(core, k8s_namespace, "again")
    follower = Follower(backend)
    follower.until("the pod and the node", lambda v: in_view(v, pod) and node in v.nodes)
    assert backend.bind([PodBinding(pod, node)]).ok
    # The cache still says unbound: the API answers 409 and the pod is on that node: done.
    assert backend.bind([PodBinding(pod, node)]).ok
    follower.until("the binding in the cache", lambda v: v.pods[pod.key].node_name == node)
    assert backend.bind([PodBinding(pod, node)]).ok  # known bound: nothing to do
    elsewhere = k8s_fake_node(gpus=8)
    follower.until("the other node", lambda v: elsewhere in v.nodes)
    refused = backend.bind([PodBinding(pod, elsewhere)])
    assert not refused.ok and f"already bound to node {node}" in refused.error


def test_a_gang_whose_second_binding_fails_leaves_no_pod_bound(
    backend: KubernetesBackend,
    core: client.CoreV1Api,
    k8s_namespace: str,
    k8s_fake_node: Callable[..., str],
) -> None:
    node = k8s_fake_node(gpus=8)
    first, second = (gpu_pod(core, k8s_namespace, f"pair-{i}") for i in range(2))
    Follower(backend).until("the pair", lambda v: in_view(v, first, second) and node in v.nodes)
    # Deleted behind the cache's back: the cache still shows it, the API answers 404.
    core.delete_namespaced_pod(second.name, k8s_namespace, grace_period_seconds=0)
    wait_for("the deletion", lambda: node_of(core, second) is None and not _exists(core, second))

    outcome = backend.bind([PodBinding(first, node), PodBinding(second, node)])

    assert not outcome.ok
    assert outcome.failed == second and "no longer exists" in outcome.error
    assert outcome.left_bound == ()
    assert node_of(core, first) is None  # rolled back: evicted, not left bound
    assert set(outcome.rolled_back) <= {first}


def _exists(core: client.CoreV1Api, pod: PodRef) -> bool:
    try:
        core.read_namespaced_pod(pod.name, pod.namespace, _preload_content=False)
    except ApiException as exc:
        if exc.status == 404:
            return False
        raise
    return True


def test_a_gang_for_a_node_that_does_not_exist_binds_nothing(
    backend: KubernetesBackend,
    core: client.CoreV1Api,
    k8s_namespace: str,
    k8s_fake_node: Callable[..., str],
) -> None:
    node = k8s_fake_node(gpus=8)
    first, second = (gpu_pod(core, k8s_namespace, f"lost-{i}") for i in range(2))
    Follower(backend).until("the pods", lambda v: in_view(v, first, second) and node in v.nodes)
    outcome = backend.bind([PodBinding(first, node), PodBinding(second, "no-such-node")])
    assert outcome.failed == second and "node no-such-node does not exist" in outcome.error
    assert outcome.rolled_back == () and outcome.left_bound == ()
    assert (node_of(core, first), node_of(core, second)) == (None, None)
    assert _exists(core, first) and _exists(core, second)  # nothing bound, nothing removed


# --- eviction -------------------------------------------------------------------------------


def test_a_change_of_our_pods_ends_the_wait_for_one(
    backend: KubernetesBackend,
    core: client.CoreV1Api,
    k8s_namespace: str,
    k8s_fake_node: Callable[..., str],
) -> None:
    node = k8s_fake_node(gpus=8)
    follower = Follower(backend)
    follower.until("the node", lambda v: node in v.nodes)
    # Other tests' pods may still be going away: wait until a sync is followed by quiet.
    wait_for("a quiet cluster", lambda: not (backend.sync() and backend.wait_for_change(1.0)))
    web = gpu_pod(core, k8s_namespace, "web", scheduler="default-scheduler", node=node)
    assert not backend.wait_for_change(1.0)  # another scheduler's pod: not ours to wait for

    started = time.monotonic()
    pod = gpu_pod(core, k8s_namespace, "new")
    assert backend.wait_for_change(30.0)
    assert time.monotonic() - started < 30.0
    view = follower.until("the pod in the cache", lambda v: in_view(v, pod))
    assert web.key not in view.pods


def test_new_pods_of_ours_waiting_for_a_node_are_arrivals_until_the_next_sync(
    backend: KubernetesBackend,
    core: client.CoreV1Api,
    k8s_namespace: str,
    k8s_fake_node: Callable[..., str],
) -> None:
    """``arrivals``: what ends the loop's batching window early. Only our pods made without
    a node count: another scheduler's pod, or one of ours being bound, does not."""
    node = k8s_fake_node(gpus=8)
    follower = Follower(backend)
    follower.until("the node", lambda v: node in v.nodes)
    wait_for("a quiet cluster", lambda: not (backend.sync() and backend.wait_for_change(1.0)))
    assert backend.arrivals().count == 0
    gpu_pod(core, k8s_namespace, "theirs", scheduler="default-scheduler", node=node)
    before = time.monotonic()
    first = gpu_pod(core, k8s_namespace, "first")
    second = gpu_pod(core, k8s_namespace, "second")
    arrived = wait_for("the arrivals", lambda: backend.arrivals().count == 2 and backend.arrivals())
    assert before <= arrived.first <= arrived.last <= time.monotonic()
    assert 0.0 < arrived.since <= before  # counted from the last sync (the stream's pace)
    assert arrived.mean_gap == arrived.last - arrived.first
    follower.until("the pods in the cache", lambda v: in_view(v, first, second))
    assert backend.arrivals().count == 0  # the sync took them
    assert backend.bind([PodBinding(first, node)]).ok
    follower.until("the binding in the cache", lambda v: v.pods[first.key].node_name == node)
    assert backend.arrivals().count == 0  # a pod bound is no arrival


class BindCounter:
    """Counts the backend's ``pods/binding`` requests as they go to the real API server: how
    many, when each started, and the most in flight at once (the backend's client wrapped,
    the server untouched)."""

    def __init__(self, backend: KubernetesBackend) -> None:
        backend.sync()  # the informers started: their lists and watches are not counted
        # The HTTP pool under the backend's client: a request reaches it once the client
        # limit let it start.
        pool: Any = backend._api.rest_client.pool_manager
        self._request = pool.request
        pool.request = self._counted
        self._lock = threading.Lock()
        self.started: list[float] = []
        self.in_flight = 0
        self.most_in_flight = 0

    def _counted(self, method: str, url: str, *args: Any, **kwargs: Any) -> Any:
        if not url.split("?")[0].endswith("/binding"):
            return self._request(method, url, *args, **kwargs)
        with self._lock:
            self.started.append(time.monotonic())
            self.in_flight += 1
            self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            return self._request(method, url, *args, **kwargs)
        finally:
            with self._lock:
                self.in_flight -= 1


def test_the_first_sync_opens_the_bind_workers_connections_before_the_bindings(
    k8s_api: Any,
    k8s_scheduler_config: Any,
    core: client.CoreV1Api,
    k8s_namespace: str,
    k8s_fake_node: Callable[..., str],
) -> None:
    """A burst's first bindings find their connections open: the first sync has the bind
    workers' connections opened (``_warm_connections``), so binding as many pods at once
    as there are workers opens no new connection, no TLS handshake each."""
    node = k8s_fake_node(gpus=6)
    pods = [gpu_pod(core, k8s_namespace, f"warm-{i}") for i in range(6)]
    with KubernetesBackend(k8s_scheduler_config, bind_workers=6) as backend:
        Follower(backend).until("the pods", lambda v: in_view(v, *pods) and node in v.nodes)
        assert backend.connections_warm(30.0) == 6  # six held at once: six connections
        pool = backend._api.rest_client.pool_manager.connection_from_url(k8s_api.configuration.host)
        connections = pool.num_connections
        outcomes = backend.bind_many({p.name: [PodBinding(p, node)] for p in pods})
        opened = pool.num_connections - connections

    assert all(outcome.ok for outcome in outcomes.values())
    assert opened == 0


def test_under_a_client_limit_half_the_burst_is_warmed_at_most(k8s_scheduler_config: Any) -> None:
    """The warming's requests wait for the limit's tokens as any request does: with a burst
    of 4, two connections, so the first bindings still find tokens in the bucket."""
    with KubernetesBackend(k8s_scheduler_config, bind_workers=6, qps=5.0, burst=4) as backend:
        backend.sync()
        assert backend.connections_warm(30.0) == 2


def test_many_gangs_are_bound_at_once_and_a_failing_gang_is_still_rolled_back(
    k8s_api: Any,
    k8s_scheduler_config: Any,
    core: client.CoreV1Api,
    k8s_namespace: str,
    k8s_fake_node: Callable[..., str],
) -> None:
    nodes = [k8s_fake_node(gpus=8) for _ in range(3)]
    singles = [gpu_pod(core, k8s_namespace, f"one-{i}") for i in range(16)]
    gang = [gpu_pod(core, k8s_namespace, f"gang-{i}") for i in range(4)]
    broken = [gpu_pod(core, k8s_namespace, f"broken-{i}") for i in range(4)]
    with KubernetesBackend(k8s_scheduler_config, bind_workers=6) as backend:
        Follower(backend).until(
            "the pods and nodes",
            lambda v: in_view(v, *singles, *gang, *broken) and set(nodes) <= set(v.nodes),
        )
        counter = BindCounter(backend)
        # Deleted behind the cache's back: the cache still shows it, the API answers 404.
        core.delete_namespaced_pod(broken[3].name, k8s_namespace, grace_period_seconds=0)
        wait_for("the deletion", lambda: not _exists(core, broken[3]))
        gangs = {f"one-{i}": [PodBinding(p, nodes[i % 2])] for i, p in enumerate(singles)}
        gangs["gang"] = [PodBinding(p, nodes[2]) for p in gang]
        gangs["broken"] = [PodBinding(p, nodes[2]) for p in broken]
        backend.connections_warm(30.0)  # the first sync's warming done: counted before
        pool = backend._api.rest_client.pool_manager.connection_from_url(k8s_api.configuration.host)
        connections = pool.num_connections

        outcomes = backend.bind_many(gangs)
        # Every answer was read, so its connection went back to the pool: a connection per
        # bind worker at most, not a new TLS connection per binding.
        assert pool.num_connections - connections <= 6 + 1  # and the rolling-back thread

    assert all(outcomes[k].ok for k in gangs if k != "broken")
    assert [node_of(core, p) for p in singles] == [nodes[i % 2] for i in range(16)]
    assert [node_of(core, p) for p in gang] == [nodes[2]] * 4
    failed = outcomes["broken"]
    assert not failed.ok and failed.failed == broken[3] and "no longer exists" in failed.error
    assert failed.left_bound == () and set(failed.rolled_back) <= set(broken[:3])
    assert [node_of(core, p) for p in broken[:3]] == [None] * 3  # rolled back, none left bound
    # The 20 good members and up to four of the broken gang went out together, at most as
    # many at once as there are bind workers.
    assert 20 < len(counter.started) <= 24
    assert 1 < counter.most_in_flight <= 6


def test_bindings_keep_to_the_client_rate_limit(
    k8s_scheduler_config: Any,
    core: client.CoreV1Api,
    k8s_namespace: str,
    k8s_fake_node: Callable[..., str],
) -> None:
    qps, burst, count = 10.0, 2, 16
    node = k8s_fake_node(gpus=count)
    pods = [gpu_pod(core, k8s_namespace, f"paced-{i}") for i in range(count)]
    with KubernetesBackend(k8s_scheduler_config, qps=qps, burst=burst) as backend:
        Follower(backend).until("the pods", lambda v: in_view(v, *pods) and node in v.nodes)
        counter = BindCounter(backend)
        started = time.monotonic()
        outcomes = backend.bind_many({p.name: [PodBinding(p, node)] for p in pods})
        took = time.monotonic() - started

    assert all(outcome.ok for outcome in outcomes.values())
    assert [node_of(core, p) for p in pods] == [node] * count
    assert len(counter.started) == count
    # A bucket of `burst` tokens at most, refilled at `qps`: the last of `count` requests
    # cannot start before (count - burst) / qps.
    floor = (count - burst) / qps
    assert counter.started[-1] - started >= floor - 0.05
    assert took >= floor - 0.05


def test_the_allowance_says_what_the_client_limit_has_left(
    k8s_scheduler_config: Any,
    core: client.CoreV1Api,
    k8s_namespace: str,
    k8s_fake_node: Callable[..., str],
) -> None:
    """``allowance``: what the loop's pacing asks before it lets new pods wait. The bucket is
    full once the informers are idle, and bindings draw it down by one request each."""
    qps, burst, count = 5.0, 20, 10
    node = k8s_fake_node(gpus=count)
    pods = [gpu_pod(core, k8s_namespace, f"allowed-{i}") for i in range(count)]
    with KubernetesBackend(k8s_scheduler_config, qps=qps, burst=burst) as backend:
        Follower(backend).until("the pods", lambda v: in_view(v, *pods) and node in v.nodes)
        full = wait_for(
            "a full bucket",
            lambda: (a := backend.allowance()) is not None and a.full_at <= time.monotonic() and a,
        )
        assert (full.rate, full.burst) == (qps, burst)
        outcomes = backend.bind_many({p.name: [PodBinding(p, node)] for p in pods})
        after = backend.allowance()
        now = time.monotonic()

    assert all(outcome.ok for outcome in outcomes.values())
    assert after is not None
    # Ten requests out of twenty (the watches may have taken one more meanwhile): about two
    # seconds of refill at five a second, less what refilled while they went.
    assert now + 1.0 < after.full_at <= now + (count + 2) / qps


def test_an_eviction_under_a_budget_is_refused_for_the_pod_it_protects(
    backend: KubernetesBackend,
    core: client.CoreV1Api,
    k8s_api: Any,
    k8s_namespace: str,
    k8s_fake_node: Callable[..., str],
) -> None:
    node = k8s_fake_node(gpus=8)
    guarded = gpu_pod(core, k8s_namespace, "guarded", node=node, labels={"app": "serving"})
    free = gpu_pod(core, k8s_namespace, "free", node=node, labels={"app": "batch"})
    budget = {
        "metadata": {"name": "serving"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "serving"}}},
    }
    policy = client.PolicyV1Api(k8s_api)
    policy.create_namespaced_pod_disruption_budget(k8s_namespace, budget)
    wait_for(
        "the budget to be observed with the pod healthy",
        lambda: _budget_settled(policy, k8s_namespace),
    )
    Follower(backend).until("both pods", lambda v: in_view(v, guarded, free))

    outcome = backend.evict([free, guarded], reason="reclaim for team-b")

    statuses = {r.pod.name: r.status for r in outcome.results}
    assert statuses == {"guarded": "refused", "free": "skipped"}  # the set is aborted
    assert "disruption budget" in outcome.refused[0].message
    assert not outcome.complete
    assert node_of(core, free) == node and node_of(core, guarded) == node

    alone = backend.evict([free], reason="reclaim for team-b")
    assert [r.status for r in alone.results] == ["evicted"]
    assert alone.complete
    wait_for("the evicted pod to go", lambda: not _exists(core, free))
    gone = backend.evict([free], reason="again")
    assert [r.status for r in gone.results] == ["gone"]


def _budget_settled(policy: client.PolicyV1Api, namespace: str) -> bool:
    pdb = json.loads(
        policy.read_namespaced_pod_disruption_budget(
            "serving", namespace, _preload_content=False
        ).data
    )
    status = pdb.get("status") or {}
    return bool(
        status.get("observedGeneration", 0) >= pdb["metadata"]["generation"]
        and status.get("currentHealthy") == 1
        and status.get("disruptionsAllowed") == 0
    )


# --- events, create and delete --------------------------------------------------------------


def test_record_event_shows_in_the_pods_events_and_repeats_are_counted_not_added(
    backend: KubernetesBackend,
    core: client.CoreV1Api,
    k8s_scheduler_config: Any,
    k8s_namespace: str,
) -> None:
    pod = gpu_pod(core, k8s_namespace, "waiting")
    message = "quota: queue train has 0 of 8 h100 GPUs free (asked 8)"
    assert backend.record_event(pod, "Pending", message) == "created"
    assert backend.record_event(pod, "Pending", message) == "unchanged"  # no API call
    with KubernetesBackend(k8s_scheduler_config) as restarted:  # no memory of the first
        assert restarted.record_event(pod, "Pending", message) == "updated"

    events = _events_of(core, pod)  # what `kubectl describe pod` lists
    assert len(events) == 1
    (event,) = events
    assert (event["reason"], event["message"], event["count"]) == ("Pending", message, 2)
    assert event["source"]["component"] == "gpupool"
    assert event["reportingComponent"] == "gpupool"
    assert event["involvedObject"]["uid"] == pod.uid

    assert backend.record_event(pod, "Pending", "behind: position 3", "Normal") == "created"
    assert len(_events_of(core, pod)) == 2


def test_record_events_sends_many_at_once_in_order_and_the_same_one_once(
    backend: KubernetesBackend,
    core: client.CoreV1Api,
    k8s_namespace: str,
) -> None:
    pods = [gpu_pod(core, k8s_namespace, f"waiting-{i}") for i in range(6)]
    threads: set[str] = set()
    create = backend._core.create_namespaced_event

    def spied(*args: Any, **kwargs: Any) -> Any:  # the real request; which thread sent it
        threads.add(threading.current_thread().name)
        return create(*args, **kwargs)

    backend._core.create_namespaced_event = spied
    events = [EventRequest(pod, "Waiting", f"behind: position {i}") for i, pod in enumerate(pods)]
    outcomes = backend.record_events([*events, events[0]])

    assert outcomes == ["created"] * 6 + ["unchanged"]  # in order; the repeat not sent
    assert threads and all(name.startswith("gpupool-bind") for name in threads)
    for i, pod in enumerate(pods):
        (event,) = _events_of(core, pod)
        assert (event["reason"], event["message"], event["count"]) == (
            "Waiting",
            f"behind: position {i}",
            1,
        )
    assert backend.record_events(events[:2]) == ["unchanged", "unchanged"]
    assert backend.record_events([]) == []


def _events_of(core: client.CoreV1Api, pod: PodRef) -> list[dict[str, Any]]:
    selector = (
        f"involvedObject.name={pod.name},involvedObject.namespace={pod.namespace},"
        f"involvedObject.uid={pod.uid}"
    )
    answer = core.list_namespaced_event(
        pod.namespace, field_selector=selector, _preload_content=False
    )
    return list(json.loads(answer.data)["items"])


def test_pods_created_through_gpupool_are_labelled_and_deleted_idempotently(
    backend: KubernetesBackend, k8s_namespace: str
) -> None:
    name = f"sub-{secrets.token_hex(2)}"
    new = NewPod(
        k8s_namespace,
        name,
        image="registry.invalid/train:1",
        labels={"gpupool.io/queue": "train", "gpupool.io/workload": "sub"},
        annotations={"gpupool.io/min-member": "1"},
        gpus=2,
        cpu_milli=500,
        memory_mib=2048,
    )
    created = backend.create_pods([new])
    assert [r.status for r in created.results] == ["created"]
    assert [r.status for r in backend.create_pods([new]).results] == ["exists"]
    follower = Follower(backend)
    view = follower.until("the created pod", lambda v: PodKey(k8s_namespace, name) in v.pods)
    facts = view.pods[PodKey(k8s_namespace, name)]
    assert facts.labels["app.kubernetes.io/managed-by"] == "gpupool"
    assert (facts.requests.gpus, facts.requests.cpu_milli, facts.requests.memory_mib) == (
        2,
        500,
        2048,
    )
    ref = created.results[0].pod
    assert [r.status for r in backend.delete_pods([ref], "cancelled").results] == ["deleted"]
    follower.until("the deletion", lambda v: PodKey(k8s_namespace, name) not in v.pods)
    assert [r.status for r in backend.delete_pods([ref], "cancelled").results] == ["gone"]
