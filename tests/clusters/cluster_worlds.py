"""Two worlds for one contract: a cluster each backend runs on, driven the same way.

A ``World`` holds a backend (what the control loop uses) and does what happens *around*
gpupool on a cluster: somebody creates pods with kubectl (ours, other schedulers', bound or
not), deletes a pod behind the cache's back, sets a PodDisruptionBudget, cordons a node or
loses it (NotReady). ``KubernetesWorld`` does it through the API of the local plane;
``SimulatedWorld`` through the simulated cluster's explicit methods. The contract tests
(``test_backend_contract.py``) are written once against this interface.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Protocol, TypeVar

import pytest

from gpupool.clusters.base import ClusterBackend, ClusterView, JobKey, PodRef
from gpupool.clusters.node_profiles import gpu_node_manifest
from gpupool.clusters.simulated import SimulatedBackend, SimulatedCluster, VirtualClock
from gpupool.clusters.simulated_store import MemoryStore

T = TypeVar("T")
GPU = "nvidia.com/gpu"
START = 1_795_946_400.0  # 2026-11-29T10:00:00Z


def pod_manifest(
    namespace: str,
    name: str,
    gpus: int,
    *,
    scheduler: str = "gpupool",
    node: str | None = None,
    labels: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A pod as ``kubectl create`` would send it: one container asking GPUs, 1 CPU, 1 GiB."""
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
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {"gpupool.io/queue": "train", **(labels or {})},
        },
        "spec": spec,
    }


class World(Protocol):
    """A cluster with a backend on it, and the hands of everybody else who touches it."""

    backend: ClusterBackend
    namespace: str

    def until(self, what: str, probe: Callable[[ClusterView], bool]) -> ClusterView:
        """Sync until ``probe(view)`` holds (at once on the simulated cluster)."""
        ...

    def eventually(self, what: str, probe: Callable[[], T | None]) -> T:
        """Poll ``probe`` until it is truthy."""
        ...

    def node(self, gpus: int = 8) -> str:
        """A fresh Ready H100 node of ``gpus`` GPUs, only this test's."""
        ...

    def node_to_lose(self, gpus: int = 8) -> str:
        """A fresh Ready node whose readiness ``set_ready`` may change."""
        ...

    def pod(
        self,
        name: str,
        gpus: int = 1,
        *,
        scheduler: str = "gpupool",
        node: str | None = None,
        labels: Mapping[str, str] | None = None,
    ) -> PodRef:
        """Create a pod (with kubectl); bound at once if ``node`` is given."""
        ...

    def delete_behind(self, pod: PodRef) -> None:
        """Delete a pod without telling the backend."""
        ...

    def budget(self, name: str, match_labels: Mapping[str, str], min_available: int) -> None:
        """A PodDisruptionBudget, observed by the cluster before this returns."""
        ...

    def node_of(self, pod: PodRef) -> str | None:
        """The node the cluster has the pod on (None: unbound, gone or being deleted)."""
        ...

    def exists(self, pod: PodRef) -> bool:
        """Whether the cluster still has the pod."""
        ...

    def events_of(self, pod: PodRef) -> list[Mapping[str, Any]]:
        """The Events about the pod, as ``kubectl describe pod`` lists them."""
        ...

    def set_ready(self, node: str, ready: bool) -> None:
        """The node's kubelet stops (or resumes) reporting: NotReady (or Ready)."""
        ...

    def cordon(self, node: str, cordoned: bool = True) -> None:
        """``kubectl cordon`` (or uncordon)."""
        ...

    def job(
        self, name: str, *, scheduler: str = "gpupool", backoff_limit: int = 0
    ) -> JobKey | None:
        """A batch/v1 Job of one pod (None: the cluster has no Jobs, as the simulated one)."""
        ...

    def fail_pod(self, pod: PodRef) -> None:
        """The pod ends Failed, as its kubelet would report a container that exited 1."""
        ...


def wait_for(what: str, probe: Callable[[], T | None], timeout: float) -> T:
    """Poll ``probe`` until truthy; fail naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.1)


def database_store(clock: VirtualClock, **options: Any) -> Any:
    """A ``DatabaseStore`` on a fresh state row (the test needs the ``db`` fixture)."""
    from gpupool.simcluster.models import SimulatedClusterState
    from gpupool.simcluster.store import DatabaseStore

    state = SimulatedClusterState.objects.create(
        clock_origin=clock.now(), wall_origin=clock.now(), speed=1.0
    )
    return DatabaseStore(state.pk, clock, **options)


class SimulatedWorld:
    """The simulated cluster on a virtual clock, in memory or in the database (the demo's
    store); nothing needs waiting for."""

    def __init__(self, namespace: str = "team-a", *, database: bool = False) -> None:
        self.clock = VirtualClock(START)
        self.cluster = SimulatedCluster(
            database_store(self.clock) if database else MemoryStore(), self.clock
        )
        self.backend: SimulatedBackend = SimulatedBackend(self.cluster)
        self.namespace = namespace
        self._nodes = 0

    def until(self, what: str, probe: Callable[[ClusterView], bool]) -> ClusterView:
        view = self.backend.sync()
        if not probe(view):
            pytest.fail(f"the simulated cluster does not show {what}")
        return view

    def eventually(self, what: str, probe: Callable[[], T | None]) -> T:
        value = probe()
        if not value:
            pytest.fail(f"the simulated cluster does not show {what}")
        return value

    def job(
        self, name: str, *, scheduler: str = "gpupool", backoff_limit: int = 0
    ) -> JobKey | None:
        return None  # its pods are made by gpupool or by hand: no Job controller, no Jobs

    def fail_pod(self, pod: PodRef) -> None:
        raise AssertionError("the simulated cluster ends pods by itself")

    def node(self, gpus: int = 8) -> str:
        self._nodes += 1
        name = f"t-node-{self._nodes}"
        group = {"kind": "hgx", "prefix": "t-node", "gpus": gpus,
                 "product": "NVIDIA-H100-80GB-HBM3"}  # fmt: skip
        self.cluster.add_nodes([gpu_node_manifest(name, group)])
        return name

    def node_to_lose(self, gpus: int = 8) -> str:
        return self.node(gpus)

    def pod(
        self,
        name: str,
        gpus: int = 1,
        *,
        scheduler: str = "gpupool",
        node: str | None = None,
        labels: Mapping[str, str] | None = None,
    ) -> PodRef:
        manifest = pod_manifest(
            self.namespace, name, gpus, scheduler=scheduler, node=node, labels=labels
        )
        return self.cluster.add_pod(manifest)

    def delete_behind(self, pod: PodRef) -> None:
        self.cluster.delete_pods([pod], "deleted with kubectl")

    def budget(self, name: str, match_labels: Mapping[str, str], min_available: int) -> None:
        self.cluster.add_disruption_budget(
            self.namespace, name, match_labels, min_available=min_available
        )

    def _facts(self, pod: PodRef) -> Any:
        return next((p for p in self.cluster.pods() if p.key == pod.key), None)

    def node_of(self, pod: PodRef) -> str | None:
        facts = self._facts(pod)
        return None if facts is None or facts.deleting else facts.node_name

    def exists(self, pod: PodRef) -> bool:
        return self._facts(pod) is not None

    def events_of(self, pod: PodRef) -> list[Mapping[str, Any]]:
        return self.cluster.events_of(pod)

    def set_ready(self, node: str, ready: bool) -> None:
        self.cluster.set_node_ready(node, ready)

    def cordon(self, node: str, cordoned: bool = True) -> None:
        self.cluster.cordon(node, cordoned)


class KubernetesWorld:
    """The local plane (kube-apiserver, etcd, KWOK): real objects, real waiting."""

    TIMEOUT = 60.0  # seconds; 2 shared cores can be slow

    def __init__(
        self, api: Any, namespace: str, fake_node: Callable[..., str], scheduler: Any
    ) -> None:
        """``api``: the admin's client, which the world acts with as users and the cluster
        do; ``scheduler``: the Configuration of the scheduler's identity, which the backend
        under test uses (``k8s_scheduler_config``: what deploy/kubernetes/rbac.yaml grants)."""
        from kubernetes import client

        from gpupool.clusters.kubernetes import KubernetesBackend

        self.core = client.CoreV1Api(api)
        self.policy = client.PolicyV1Api(api)
        self.scheduler = scheduler
        self.backend: ClusterBackend = KubernetesBackend(scheduler)
        self.namespace = namespace
        self._fake_node = fake_node
        self._unmanaged: list[str] = []
        self._jobs: list[str] = []

    def close(self) -> None:
        """Close the backend, delete the Jobs and the nodes made here without KWOK."""
        from kubernetes import client

        self.backend.close()
        from kubernetes.client.exceptions import ApiException

        for job in self._jobs:
            try:
                client.BatchV1Api(self.core.api_client).delete_namespaced_job(
                    job, self.namespace, propagation_policy="Background"
                )
            except ApiException as exc:
                if exc.status != 404:  # the test deleted it already
                    raise
        for name in self._unmanaged:
            self.core.delete_node(name)

    def until(self, what: str, probe: Callable[[ClusterView], bool]) -> ClusterView:
        def check() -> ClusterView | None:
            view = self.backend.sync()
            return view if probe(view) else None

        return wait_for(what, check, self.TIMEOUT)

    def eventually(self, what: str, probe: Callable[[], T | None]) -> T:
        return wait_for(what, probe, self.TIMEOUT)

    def node(self, gpus: int = 8) -> str:
        return self._fake_node(gpus=gpus)

    def node_to_lose(self, gpus: int = 8) -> str:
        """A Ready node that KWOK leaves alone (its heartbeat would make it Ready again)."""
        name = f"t-node-{secrets.token_hex(4)}"
        group = {"kind": "hgx", "prefix": "t-node", "gpus": gpus,
                 "product": "NVIDIA-H100-80GB-HBM3"}  # fmt: skip
        manifest = gpu_node_manifest(name, group)
        manifest["metadata"]["annotations"] = {}
        manifest["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
        self.core.create_node(manifest)
        self._unmanaged.append(name)
        return name

    def pod(
        self,
        name: str,
        gpus: int = 1,
        *,
        scheduler: str = "gpupool",
        node: str | None = None,
        labels: Mapping[str, str] | None = None,
    ) -> PodRef:
        body = pod_manifest(
            self.namespace, name, gpus, scheduler=scheduler, node=node, labels=labels
        )
        answer = self.core.create_namespaced_pod(self.namespace, body, _preload_content=False)
        return PodRef(self.namespace, name, json.loads(answer.data)["metadata"]["uid"])

    def job(
        self, name: str, *, scheduler: str = "gpupool", backoff_limit: int = 0
    ) -> JobKey | None:
        from kubernetes import client

        labels = {"gpupool.io/workload": name}
        pod = pod_manifest(self.namespace, name, 1, scheduler=scheduler, labels=labels)
        template = {
            "metadata": {
                "labels": pod["metadata"]["labels"],
                # KWOK's stock pod-complete stage would end the Job's pod: not for an hour
                # (its delay waits no longer than its jitter-delay, 5 s unless set: both set).
                "annotations": {
                    "pod-complete.stage.kwok.x-k8s.io/delay": "3600s",
                    "pod-complete.stage.kwok.x-k8s.io/jitter-delay": "3600s",
                },
            },
            "spec": {**pod["spec"], "restartPolicy": "Never"},
        }
        body = {
            "metadata": {"name": name},
            "spec": {"backoffLimit": backoff_limit, "template": template},
        }
        client.BatchV1Api(self.core.api_client).create_namespaced_job(self.namespace, body)
        self._jobs.append(name)
        return JobKey(self.namespace, name)

    def fail_pod(self, pod: PodRef) -> None:
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        terminated = {"exitCode": 1, "reason": "Error", "startedAt": now, "finishedAt": now}
        status = {
            "phase": "Failed",
            "containerStatuses": [
                {
                    "name": "main",
                    "image": "registry.k8s.io/pause:3.10",
                    "imageID": "",
                    "ready": False,
                    "restartCount": 0,
                    "state": {"terminated": terminated},
                }
            ],
        }
        self.core.patch_namespaced_pod_status(pod.name, pod.namespace, {"status": status})

    def delete_behind(self, pod: PodRef) -> None:
        self.core.delete_namespaced_pod(pod.name, pod.namespace, grace_period_seconds=0)
        wait_for("the deletion", lambda: not self.exists(pod), self.TIMEOUT)

    def budget(self, name: str, match_labels: Mapping[str, str], min_available: int) -> None:
        body = {
            "metadata": {"name": name},
            "spec": {
                "minAvailable": min_available,
                "selector": {"matchLabels": dict(match_labels)},
            },
        }
        self.policy.create_namespaced_pod_disruption_budget(self.namespace, body)

        def settled() -> bool:
            pdb = json.loads(
                self.policy.read_namespaced_pod_disruption_budget(
                    name, self.namespace, _preload_content=False
                ).data
            )
            status = pdb.get("status") or {}
            return bool(
                status.get("observedGeneration", 0) >= pdb["metadata"]["generation"]
                and status.get("currentHealthy", 0) >= min_available
            )

        wait_for("the budget to be observed", settled, self.TIMEOUT)

    def _read(self, pod: PodRef) -> dict[str, Any] | None:
        from kubernetes.client.exceptions import ApiException

        try:
            answer = self.core.read_namespaced_pod(pod.name, pod.namespace, _preload_content=False)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        return dict(json.loads(answer.data))

    def node_of(self, pod: PodRef) -> str | None:
        current = self._read(pod)
        if current is None or current["metadata"].get("deletionTimestamp"):
            return None
        return current["spec"].get("nodeName")

    def exists(self, pod: PodRef) -> bool:
        return self._read(pod) is not None

    def events_of(self, pod: PodRef) -> list[Mapping[str, Any]]:
        selector = (
            f"involvedObject.name={pod.name},involvedObject.namespace={pod.namespace},"
            f"involvedObject.uid={pod.uid}"
        )
        answer = self.core.list_namespaced_event(
            pod.namespace, field_selector=selector, _preload_content=False
        )
        return list(json.loads(answer.data)["items"])

    def set_ready(self, node: str, ready: bool) -> None:
        if node not in self._unmanaged:
            raise ValueError("KWOK keeps its nodes Ready: use node_to_lose() for this")
        condition = {"type": "Ready", "status": "True" if ready else "Unknown",
                     "reason": "KubeletReady" if ready else "NodeStatusUnknown"}  # fmt: skip
        self.core.patch_node_status(node, {"status": {"conditions": [condition]}})

    def cordon(self, node: str, cordoned: bool = True) -> None:
        self.core.patch_node(node, {"spec": {"unschedulable": cordoned or None}})


# The contract suites' backends: the simulated cluster in memory, then kept in the database as
# the demo keeps it, then the local plane (``k8s``), each test with a namespace of its own.
EVERY_BACKEND = [
    "simulated",
    pytest.param("simulated-in-the-database", marks=pytest.mark.django_db),
    pytest.param("kubernetes", marks=pytest.mark.k8s),
]


def open_world(request: pytest.FixtureRequest) -> Iterator[World]:
    """The world of a ``params=EVERY_BACKEND`` fixture's ``request``, closed after its test."""
    if request.param.startswith("simulated"):
        yield SimulatedWorld(database=request.param != "simulated")
        return
    kubernetes = KubernetesWorld(
        request.getfixturevalue("k8s_api"),
        request.getfixturevalue("k8s_namespace"),
        request.getfixturevalue("k8s_fake_node"),
        request.getfixturevalue("k8s_scheduler_config"),
    )
    try:
        yield kubernetes
    finally:
        kubernetes.close()
