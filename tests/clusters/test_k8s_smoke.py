"""Smoke tests: the Kubernetes behaviour gpupool relies on, against a real kube-apiserver.

Each test proves one piece of DESIGN.md section 4 on the local plane that kwokctl runs (etcd +
kube-apiserver + kube-controller-manager + kube-scheduler + KWOK fake GPU nodes), or one thing
the plane promises the other tests (its node profile, an API server restart, etcd compaction).
"""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest
from kubernetes import client, watch
from kubernetes.client.rest import ApiException

from hack import k8s_plane

pytestmark = pytest.mark.k8s

T = TypeVar("T")
GPU = "nvidia.com/gpu"
TIMEOUT = 60.0  # seconds; 2 shared cores can be slow


def wait_for(what: str, probe: Callable[[], T | None], timeout: float = TIMEOUT) -> T:
    """Poll ``probe`` until it returns something truthy; fail naming ``what`` otherwise."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.2)


def gpu_pod(name: str, gpus: int, labels: dict[str, str] | None = None) -> client.V1Pod:
    """A pod for gpupool's scheduler asking for whole GPUs."""
    resources = {GPU: str(gpus), "cpu": "1", "memory": "1Gi"}
    return client.V1Pod(
        metadata=client.V1ObjectMeta(
            name=name, labels={"gpupool.io/queue": "research", **(labels or {})}
        ),
        spec=client.V1PodSpec(
            scheduler_name="gpupool",
            containers=[
                client.V1Container(
                    name="main",
                    image="registry.invalid/train:1",
                    resources=client.V1ResourceRequirements(requests=resources, limits=resources),
                )
            ],
        ),
    )


def bind(core: client.CoreV1Api, namespace: str, pod: str, node: str) -> None:
    """Bind a pod through the pods/binding subresource, as gpupool admits pods."""
    body = client.V1Binding(
        metadata=client.V1ObjectMeta(name=pod),
        target=client.V1ObjectReference(api_version="v1", kind="Node", name=node),
    )
    # The answer is a Status, which the generated client cannot read back as a V1Binding.
    response = core.create_namespaced_pod_binding(pod, namespace, body, _preload_content=False)
    assert response.status == 201, response.data


def phase(core: client.CoreV1Api, namespace: str, pod: str) -> str | None:
    """The pod's phase, or None once it is gone."""
    try:
        return str(core.read_namespaced_pod(pod, namespace).status.phase)
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise


def running_pod(core: client.CoreV1Api, namespace: str, name: str, node: str, **kw: Any) -> None:
    """Create a gpupool pod, bind it to ``node`` and wait until KWOK reports it Running."""
    core.create_namespaced_pod(namespace, gpu_pod(name, **{"gpus": 1, **kw}))
    bind(core, namespace, name, node)
    wait_for(f"{name} Running", lambda: phase(core, namespace, name) == "Running")


def gone(core: client.CoreV1Api, namespace: str, pod: str) -> bool:
    """Whether the pod no longer exists."""
    return phase(core, namespace, pod) is None


def evict(core: client.CoreV1Api, namespace: str, pod: str) -> None:
    """Evict through the policy/v1 Eviction API (honours PodDisruptionBudgets)."""
    body = client.V1Eviction(metadata=client.V1ObjectMeta(name=pod, namespace=namespace))
    core.create_namespaced_pod_eviction(pod, namespace, body)


@pytest.fixture
def core(k8s_api: Any) -> client.CoreV1Api:
    """The core/v1 API."""
    return client.CoreV1Api(k8s_api)


@pytest.fixture
def h100_node(core: client.CoreV1Api) -> str:
    """The name of one 8-GPU H100 fake node."""
    nodes = core.list_node(label_selector="nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3").items
    assert nodes, "the node profile has no H100 nodes"
    return str(sorted(n.metadata.name for n in nodes)[0])


def test_the_profile_nodes_are_ready_as_the_profile_describes_them(
    core: client.CoreV1Api, k8s_plane_info: Any
) -> None:
    """kwokctl made every node of the profile, Ready, with our labels and allocatable."""
    nodes = {n.metadata.name: n for n in core.list_node(label_selector="type=kwok").items}
    wanted = k8s_plane.node_manifests(k8s_plane.load_profile(k8s_plane_info.profile))
    assert wanted, "the profile has no nodes"
    for manifest in wanted:
        name = manifest["metadata"]["name"]
        assert name in nodes, f"{name} missing; the plane has {sorted(nodes)[:5]}..."
        node = nodes[name]
        ready = [c.status for c in node.status.conditions or [] if c.type == "Ready"]
        assert ready == ["True"], f"{name} not Ready: {ready}"
        assert not node.spec.unschedulable
        assert manifest["metadata"]["labels"].items() <= node.metadata.labels.items(), name
        assert node.status.allocatable == manifest["status"]["allocatable"], name


def test_fake_gpu_nodes_advertise_the_gpus_their_labels_promise(core: client.CoreV1Api) -> None:
    """Whole GPUs = count x time-slicing replicas (0 under MIG); racks share one clique."""
    nodes = core.list_node(label_selector="nvidia.com/gpu.present=true").items
    assert nodes, "no fake GPU nodes"
    cliques: dict[str, list[int]] = defaultdict(list)
    products = set()
    for node in nodes:
        labels = node.metadata.labels
        gpus = int(node.status.allocatable[GPU])
        whole = 0 if labels.get("nvidia.com/mig.strategy") == "mixed" else 1
        expected = (
            whole
            * int(labels["nvidia.com/gpu.count"])
            * int(labels.get("nvidia.com/gpu.replicas", "1"))
        )
        assert gpus == expected, node.metadata.name
        products.add(labels["nvidia.com/gpu.product"])
        if "nvidia.com/gpu.clique" in labels:
            cliques[labels["nvidia.com/gpu.clique"]].append(gpus)
    assert {
        "NVIDIA-H100-80GB-HBM3",
        "NVIDIA-GB200",
        "NVIDIA-L40S-SHARED",
        "NVIDIA-A100-SXM4-80GB",
    } <= products
    assert cliques, "no GB200 rack"
    for clique, gpus_per_node in cliques.items():  # GB200 NVL72: 18 nodes x 4 GPUs
        assert gpus_per_node == [4] * 18, clique
    h100 = [n for n in nodes if "H100" in n.metadata.labels["nvidia.com/gpu.product"]]
    assert all(int(n.status.allocatable[GPU]) == 8 for n in h100)
    assert not any("nvidia.com/gpu.clique" in n.metadata.labels for n in h100)


def test_a_mig_node_offers_its_slices_instead_of_whole_gpus(core: client.CoreV1Api) -> None:
    """8 A100-80GB in NVIDIA's all-balanced layout: 2 x 1g.10gb, 2g.20gb and 3g.40gb per GPU."""
    nodes = core.list_node(label_selector="nvidia.com/mig.config=all-balanced").items
    assert nodes, "the profile has no MIG node"
    for node in nodes:
        labels, allocatable = node.metadata.labels, node.status.allocatable
        assert labels["nvidia.com/gpu.product"] == "NVIDIA-A100-SXM4-80GB"
        assert labels["nvidia.com/mig.strategy"] == "mixed"
        assert allocatable[GPU] == "0"
        assert allocatable["nvidia.com/mig-1g.10gb"] == "16"
        assert allocatable["nvidia.com/mig-2g.20gb"] == "8"
        assert allocatable["nvidia.com/mig-3g.40gb"] == "8"
        assert labels["nvidia.com/mig-3g.40gb.count"] == "8"


def test_kubectl_get_nodes_with_the_admin_kubeconfig(k8s_plane_info: Any) -> None:
    """`KUBECONFIG=<kubeconfig> kubectl get nodes` works as a new user would try it."""
    assets = k8s_plane_info.assets
    assert assets is not None, "no kubectl: build the binaries with `make k8s-build`"
    result = subprocess.run(
        [str(assets / "kubectl"), "get", "nodes", "-l", "type=kwok", "--no-headers"],
        env={**os.environ, "KUBECONFIG": str(k8s_plane_info.kubeconfig)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines and all(" Ready " in f" {line} " for line in lines), result.stdout


def test_gpupool_pod_stays_pending_until_bound_then_runs(
    core: client.CoreV1Api, k8s_namespace: str, h100_node: str
) -> None:
    """kube-scheduler ignores schedulerName gpupool; a Binding places the pod; KWOK runs it."""
    core.create_namespaced_pod(k8s_namespace, gpu_pod("trainer-0", gpus=8))
    time.sleep(3)  # give kube-scheduler (running in this plane) the chance to misbehave
    pod = core.read_namespaced_pod("trainer-0", k8s_namespace)
    assert pod.status.phase == "Pending"
    assert pod.spec.node_name is None

    bind(core, k8s_namespace, "trainer-0", h100_node)
    wait_for("trainer-0 Running", lambda: phase(core, k8s_namespace, "trainer-0") == "Running")
    pod = core.read_namespaced_pod("trainer-0", k8s_namespace)
    assert pod.spec.node_name == h100_node
    assert {c.type: c.status for c in pod.status.conditions}["Ready"] == "True"
    assert pod.status.pod_ip

    with pytest.raises(ApiException) as exc_info:  # a bound pod cannot be bound again
        bind(core, k8s_namespace, "trainer-0", h100_node)
    assert exc_info.value.status == 409


def test_a_binding_skips_capacity_checks(
    core: client.CoreV1Api, k8s_namespace: str, h100_node: str
) -> None:
    """Only gpupool prevents over-commit: binding 16 GPUs onto an 8-GPU node is accepted."""
    running_pod(core, k8s_namespace, "too-big", h100_node, gpus=16)


def test_eviction_removes_the_pod(
    core: client.CoreV1Api, k8s_namespace: str, h100_node: str
) -> None:
    """A policy/v1 eviction deletes a running pod (KWOK finishes the deletion)."""
    running_pod(core, k8s_namespace, "victim", h100_node)
    evict(core, k8s_namespace, "victim")
    wait_for("the evicted pod to disappear", lambda: gone(core, k8s_namespace, "victim"))


def test_pod_disruption_budget_makes_eviction_answer_429(
    k8s_api: Any, core: client.CoreV1Api, k8s_namespace: str, h100_node: str
) -> None:
    """With minAvailable 1 of 2 pods, the first eviction passes and the second gets 429."""
    policy = client.PolicyV1Api(k8s_api)
    for name in ("worker-a", "worker-b"):
        running_pod(core, k8s_namespace, name, h100_node, labels={"gpupool.io/workload": "w1"})
    policy.create_namespaced_pod_disruption_budget(
        k8s_namespace,
        client.V1PodDisruptionBudget(
            metadata=client.V1ObjectMeta(name="w1"),
            spec=client.V1PodDisruptionBudgetSpec(
                min_available=1,
                selector=client.V1LabelSelector(match_labels={"gpupool.io/workload": "w1"}),
            ),
        ),
    )

    def one_disruption_allowed() -> bool:
        status = policy.read_namespaced_pod_disruption_budget("w1", k8s_namespace).status
        return bool(status and status.current_healthy == 2 and status.disruptions_allowed == 1)

    wait_for(
        "the disruption controller (kube-controller-manager) to count the budget",
        one_disruption_allowed,
    )
    evict(core, k8s_namespace, "worker-a")
    with pytest.raises(ApiException) as exc_info:
        evict(core, k8s_namespace, "worker-b")
    assert exc_info.value.status == 429, exc_info.value.body
    assert "disruption budget" in exc_info.value.body
    wait_for("worker-a to disappear", lambda: gone(core, k8s_namespace, "worker-a"))
    assert phase(core, k8s_namespace, "worker-b") == "Running"


def test_a_lease_can_be_taken_and_renewed(k8s_api: Any, k8s_namespace: str) -> None:
    """Leader election on a coordination/v1 Lease: take, renew, and lose a stale write (409)."""
    leases = client.CoordinationV1Api(k8s_api)
    now = dt.datetime.now(dt.UTC)
    taken = leases.create_namespaced_lease(
        k8s_namespace,
        client.V1Lease(
            metadata=client.V1ObjectMeta(name="gpupool-scheduler"),
            spec=client.V1LeaseSpec(
                holder_identity="replica-a",
                lease_duration_seconds=15,
                acquire_time=now,
                renew_time=now,
                lease_transitions=0,
            ),
        ),
    )
    stale_version = taken.metadata.resource_version

    taken.spec.renew_time = now + dt.timedelta(seconds=5)
    renewed = leases.replace_namespaced_lease("gpupool-scheduler", k8s_namespace, taken)
    assert renewed.metadata.resource_version != stale_version
    assert renewed.spec.holder_identity == "replica-a"
    assert renewed.spec.renew_time == now + dt.timedelta(seconds=5)

    # A rival that read the lease before the renewal must not be able to take it over.
    rival = leases.read_namespaced_lease("gpupool-scheduler", k8s_namespace)
    rival.metadata.resource_version = stale_version
    rival.spec.holder_identity = "replica-b"
    with pytest.raises(ApiException) as exc_info:
        leases.replace_namespaced_lease("gpupool-scheduler", k8s_namespace, rival)
    assert exc_info.value.status == 409
    held = leases.read_namespaced_lease("gpupool-scheduler", k8s_namespace)
    assert held.spec.holder_identity == "replica-a"


def test_a_watch_resumes_from_a_resource_version(
    core: client.CoreV1Api, k8s_namespace: str
) -> None:
    """Watching from a resourceVersion replays exactly the changes made after it."""
    first = core.create_namespaced_pod(k8s_namespace, gpu_pod("first", gpus=1))
    resume_from = first.metadata.resource_version
    core.create_namespaced_pod(k8s_namespace, gpu_pod("second", gpus=1))
    core.patch_namespaced_pod(
        "first", k8s_namespace, {"metadata": {"annotations": {"gpupool.io/explanation": "quota"}}}
    )

    seen: list[tuple[str, str]] = []
    stream = watch.Watch()
    for event in stream.stream(
        core.list_namespaced_pod,
        k8s_namespace,
        resource_version=resume_from,
        timeout_seconds=20,
    ):
        seen.append((event["type"], event["object"].metadata.name))
        if len(seen) == 2:
            stream.stop()
    assert seen == [("ADDED", "second"), ("MODIFIED", "first")]


def test_cordon_sticks_and_a_node_released_by_kwok_can_be_made_not_ready(
    core: client.CoreV1Api, k8s_fake_node: Callable[..., str]
) -> None:
    """gpupool excludes cordoned and NotReady nodes; tests can produce both on KWOK nodes.

    KWOK's node-initialize stage turns any managed node that is not Ready back to Ready, so a
    test first takes the node away from KWOK (annotation no longer ``fake``), then writes the
    NotReady condition itself.
    """
    name = k8s_fake_node(gpus=8)
    core.patch_node(name, {"spec": {"unschedulable": True}})
    time.sleep(2)  # KWOK keeps working on the node meanwhile
    assert core.read_node(name).spec.unschedulable is True

    core.patch_node(name, {"metadata": {"annotations": {"kwok.x-k8s.io/node": "released"}}})
    now = dt.datetime.now(dt.UTC).isoformat().replace("+00:00", "Z")
    not_ready = {
        "type": "Ready",
        "status": "False",
        "reason": "KubeletNotReady",
        "message": "test: GPU node lost",
        "lastHeartbeatTime": now,
        "lastTransitionTime": now,
    }
    core.patch_node_status(name, {"status": {"conditions": [not_ready]}})
    time.sleep(3)  # long enough for KWOK to have reverted it, were it still managing the node
    ready = [c for c in core.read_node(name).status.conditions if c.type == "Ready"]
    assert [(c.status, c.message) for c in ready] == [("False", "test: GPU node lost")]


def test_an_event_explains_a_pending_pod(core: client.CoreV1Api, k8s_namespace: str) -> None:
    """gpupool records why a pod waits as an Event on it, as `kubectl describe pod` shows."""
    pod = core.create_namespaced_pod(k8s_namespace, gpu_pod("waiting", gpus=8))
    now = dt.datetime.now(dt.UTC)
    core.create_namespaced_event(
        k8s_namespace,
        client.CoreV1Event(
            metadata=client.V1ObjectMeta(generate_name="waiting."),
            involved_object=client.V1ObjectReference(
                api_version="v1",
                kind="Pod",
                name="waiting",
                namespace=k8s_namespace,
                uid=pod.metadata.uid,
            ),
            type="Normal",
            reason="QuotaExceeded",
            message="queue research: h100 asks 8, 0 of 16 left under deserved",
            source=client.V1EventSource(component="gpupool"),
            reporting_component="gpupool",
            reporting_instance="gpupool-0",
            first_timestamp=now,
            last_timestamp=now,
            count=1,
        ),
    )
    events = core.list_namespaced_event(
        k8s_namespace, field_selector=f"involvedObject.uid={pod.metadata.uid}"
    ).items
    assert [(e.reason, e.source.component) for e in events] == [("QuotaExceeded", "gpupool")]


def test_the_api_server_restarts_with_every_object_and_the_plane_keeps_working(
    core: client.CoreV1Api,
    k8s_namespace: str,
    h100_node: str,
    k8s_restart_apiserver: Callable[..., None],
    k8s_plane_info: Any,
) -> None:
    """After a restart the objects are there, bindings work, and KWOK runs the bound pods."""
    running_pod(core, k8s_namespace, "before", h100_node)
    core.create_namespaced_pod(k8s_namespace, gpu_pod("waiting", gpus=1))
    workdir = Path(k8s_plane_info.plane.state.workdir)

    def pids() -> dict[str, int]:
        return {c.name: c.pid for c in k8s_plane.running_components(workdir)}

    before = pids()
    k8s_restart_apiserver(down_for=1.0)
    after = pids()

    assert after["kube-apiserver"] != before.pop("kube-apiserver")
    after.pop("kube-apiserver")
    assert after == before  # the other components rode it out
    assert phase(core, k8s_namespace, "before") == "Running"
    bind(core, k8s_namespace, "waiting", h100_node)
    wait_for(
        "KWOK to run a pod bound after the restart",
        lambda: phase(core, k8s_namespace, "waiting") == "Running",
    )


def test_etcd_compaction_makes_an_older_resource_version_gone(
    core: client.CoreV1Api, k8s_namespace: str, k8s_compact_etcd: Callable[[], int]
) -> None:
    """A watch from before the compaction answers 410; a watch already open goes on."""
    created = core.create_namespaced_pod(k8s_namespace, gpu_pod("watched", gpus=1))
    old_version = created.metadata.resource_version

    def note(value: str) -> None:
        body = {"metadata": {"annotations": {"gpupool.io/explanation": value}}}
        core.patch_namespaced_pod("watched", k8s_namespace, body)

    note("first")
    open_watch = watch.Watch()
    events = open_watch.stream(
        core.list_namespaced_pod, k8s_namespace, resource_version=old_version, timeout_seconds=30
    )
    assert next(events)["type"] == "MODIFIED"  # the watch is open and served

    revision = k8s_compact_etcd()
    assert revision > int(old_version)
    note("second")
    event = next(events)
    assert event["object"].metadata.annotations["gpupool.io/explanation"] == "second"
    open_watch.stop()

    with pytest.raises(ApiException) as exc_info:
        for _ in watch.Watch().stream(
            core.list_namespaced_pod,
            k8s_namespace,
            resource_version=old_version,
            timeout_seconds=10,
        ):
            pass
    assert exc_info.value.status == 410


def test_a_node_set_scales_up_and_back_keeping_its_oldest_nodes(
    core: client.CoreV1Api, k8s_plane_info: Any
) -> None:
    """`kwokctl scale` adds the next numbered node, Ready; shrinking removes the newest."""
    plane = k8s_plane_info.plane
    if plane is None:
        pytest.fail("needs a plane started by `make k8s-up` or by the tests", pytrace=False)
    node_set = next(s for s in k8s_plane.node_sets(k8s_plane.load_profile(plane.state.profile)))
    selector = f"kwok.x-k8s.io/kwokctl-scale={node_set.name}"

    def names() -> list[str]:
        return sorted(n.metadata.name for n in core.list_node(label_selector=selector).items)

    original = names()
    assert original == [node_set.node_name(i) for i in range(node_set.replicas)]
    try:
        plane.scale(node_set.name, node_set.replicas + 1)
        assert names() == [*original, node_set.node_name(node_set.replicas)]
    finally:
        plane.scale(node_set.name, node_set.replicas)
    assert names() == original
