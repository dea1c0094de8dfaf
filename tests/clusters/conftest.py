"""Fixtures for tests against the local Kubernetes control plane (tests marked ``k8s``).

The session starts one plane with kwokctl (etcd, kube-apiserver, kube-controller-manager,
kube-scheduler and KWOK with the ``default`` node profile) and always stops it, or reuses the
local plane that ``KUBECONFIG`` names (e.g. ``make k8s-up`` then
``KUBECONFIG=.k8s/kubeconfig pytest -m k8s``). Each test gets its own namespace. Missing
binaries fail the tests; they never skip.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # hack/ is a folder of the checkout, not an installed package
    sys.path.insert(0, str(ROOT))

from hack import k8s_plane  # noqa: E402

LOCAL_HOSTS = {"127.0.0.1", "localhost", "::1"}
PLANE_FIXTURES = {
    "k8s_plane_info",
    "k8s_api",
    "k8s_namespace",
    "k8s_fake_node",
    "k8s_restart_apiserver",
    "k8s_compact_etcd",
    "k8s_scheduler_kubeconfig",
    "k8s_scheduler_config",
}


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test that uses the plane `k8s`, so `-m "not k8s"` never starts one."""
    for item in items:
        if PLANE_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.k8s)


@dataclass
class K8sPlane:
    """The plane the session's tests talk to."""

    kubeconfig: Path
    server: str
    started_here: bool
    assets: Path | None
    profile: str
    plane: k8s_plane.Plane | None  # None: a plane this checkout did not start (no restarts)


def _server_of(kubeconfig: Path) -> str:
    config = yaml.safe_load(kubeconfig.read_text()) or {}
    current = config.get("current-context")
    contexts = {c["name"]: c["context"] for c in config.get("contexts", [])}
    clusters = {c["name"]: c["cluster"] for c in config.get("clusters", [])}
    try:
        return str(clusters[contexts[current]["cluster"]]["server"])
    except KeyError as exc:
        raise pytest.fail.Exception(f"{kubeconfig}: no server for its current context") from exc


def _profile() -> str:
    return os.environ.get("GPUPOOL_K8S_PROFILE", "default")


def _assets_or_none() -> Path | None:
    try:
        return k8s_plane.find_assets()
    except k8s_plane.PlaneError:
        return None


@pytest.fixture(scope="session")
def k8s_plane_info(tmp_path_factory: pytest.TempPathFactory) -> Iterator[K8sPlane]:
    """Start the local plane once per session (or reuse $KUBECONFIG's) and always stop it."""
    given = os.environ.get("KUBECONFIG")
    if given:
        kubeconfig = Path(given.split(os.pathsep)[0]).resolve()
        if not kubeconfig.is_file():
            pytest.fail(f"KUBECONFIG={given} does not exist (start a plane with `make k8s-up`)")
        server = _server_of(kubeconfig)
        host = urlparse(server).hostname or ""
        if host not in LOCAL_HOSTS and os.environ.get("GPUPOOL_K8S_ALLOW_REMOTE") != "1":
            pytest.fail(
                f"KUBECONFIG points at {server}, not a local plane: the k8s tests create and "
                "delete namespaces, pods and leases. Unset KUBECONFIG to let the tests start "
                "their own plane, or set GPUPOOL_K8S_ALLOW_REMOTE=1 if you mean it."
            )
        plane = k8s_plane.Plane.serving(kubeconfig)
        profile = plane.state.profile if plane and plane.state else _profile()
        yield K8sPlane(kubeconfig, server, False, _assets_or_none(), profile, plane)
        return
    try:
        assets = k8s_plane.find_assets()
    except k8s_plane.PlaneError as exc:
        missing = str(exc)
    else:
        missing = ""
    if missing:  # fail (never skip): CI must really run these tests
        pytest.fail(f"cannot start the local Kubernetes plane: {missing}", pytrace=False)
    plane = k8s_plane.Plane(tmp_path_factory.mktemp("k8s-plane"), assets, tie_to_parent=True)
    failure = None
    try:
        state = plane.up(profile=_profile(), controllers=True, scheduler=True)
    except k8s_plane.PlaneError as exc:  # up() has already stopped what it started
        failure = str(exc)
    if failure is not None:
        pytest.fail(f"the local Kubernetes plane did not start: {failure}", pytrace=False)
    try:
        yield K8sPlane(Path(state.kubeconfig), state.server, True, assets, state.profile, plane)
    finally:
        plane.down()


@pytest.fixture(scope="session")
def k8s_api(k8s_plane_info: K8sPlane) -> Iterator[Any]:
    """A kubernetes.client.ApiClient with the plane's admin credentials."""
    from kubernetes import config

    api_client = config.new_client_from_config(config_file=str(k8s_plane_info.kubeconfig))
    yield api_client
    api_client.close()


@pytest.fixture(scope="session")
def k8s_scheduler_kubeconfig(
    k8s_plane_info: K8sPlane, tmp_path_factory: pytest.TempPathFactory
) -> Path:
    """A kubeconfig with the identity deploy/kubernetes/rbac.yaml gives the scheduler
    (``k8s_plane.scheduler_kubeconfig``: the manifest applied as it is, and a token of its
    ServiceAccount). The plane authorizes by RBAC, so a backend built from this kubeconfig can
    do exactly what an installed gpupool can: a call the role lacks fails the test that makes
    it, and the test harness itself (making nodes and pods as users do) keeps the admin's.
    """
    out = tmp_path_factory.mktemp("k8s-scheduler") / "kubeconfig"
    return k8s_plane.scheduler_kubeconfig(k8s_plane_info.kubeconfig, out)


@pytest.fixture(scope="session")
def k8s_scheduler_config(k8s_scheduler_kubeconfig: Path) -> Any:
    """A kubernetes.client.Configuration with the identity of ``k8s_scheduler_kubeconfig``."""
    from kubernetes import client, config

    configuration = client.Configuration()
    config.load_kube_config(
        config_file=str(k8s_scheduler_kubeconfig), client_configuration=configuration
    )
    return configuration


@pytest.fixture
def k8s_namespace(k8s_api: Any, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh namespace for one test, deleted (with its pods) afterwards."""
    from kubernetes import client

    core = client.CoreV1Api(k8s_api)
    slug = re.sub(r"[^a-z0-9]+", "-", request.node.name.lower()).strip("-")[:40].strip("-")
    name = f"t-{slug}-{secrets.token_hex(3)}"
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    try:
        yield name
    finally:
        # Pods go first and at once (KWOK removes them); without the namespace controller
        # the namespace would otherwise stay Terminating.
        core.delete_collection_namespaced_pod(name, grace_period_seconds=0)
        core.delete_namespace(name)


@pytest.fixture
def k8s_fake_node(k8s_api: Any, k8s_plane_info: K8sPlane) -> Iterator[Callable[..., str]]:
    """Create extra KWOK GPU nodes for one test (Ready on return); deleted afterwards.

    ``k8s_fake_node(gpus=8, product="NVIDIA-H100-80GB-HBM3", kind="hgx", clique=None)``.
    """
    from kubernetes import client

    core = client.CoreV1Api(k8s_api)
    created: list[str] = []

    def make(
        gpus: int = 8,
        product: str = "NVIDIA-H100-80GB-HBM3",
        kind: str = "hgx",
        clique: str | None = None,
        **group: Any,
    ) -> str:
        name = f"t-node-{secrets.token_hex(4)}"
        group = {"kind": kind, "prefix": "t-node", "gpus": gpus, "product": product, **group}
        core.create_node(k8s_plane.gpu_node_manifest(name, group, clique=clique))
        created.append(name)
        k8s_plane.wait_nodes_ready(k8s_plane_info.kubeconfig, {name}, timeout=60)
        return name

    yield make
    for name in created:
        core.delete_node(name)


def _plane_of(info: K8sPlane) -> k8s_plane.Plane:
    if info.plane is None:
        pytest.fail(
            f"{info.kubeconfig} is not a plane started by `make k8s-up` or by the tests, so "
            "they cannot restart its parts: unset KUBECONFIG to let the tests start their own",
            pytrace=False,
        )
    return info.plane


def _wait_plane_recovered(kubeconfig: Path, timeout: float) -> None:
    """Wait until the plane serves the tests again after an API server restart.

    /readyz passes before the watch caches are filled (watches are answered 429 until then),
    and KWOK and the controllers reconnect after their own back-off: wait for a watch to be
    served, a probe pod bound to a KWOK node to run, and a probe budget to be observed.
    """
    import json
    import time

    from kubernetes import client, config
    from kubernetes.client.exceptions import ApiException

    api_client = config.new_client_from_config(config_file=str(kubeconfig))
    core, policy = client.CoreV1Api(api_client), client.PolicyV1Api(api_client)
    deadline = time.monotonic() + timeout

    def until(what: str, probe: Callable[[], bool]) -> None:
        while not probe():
            if time.monotonic() > deadline:
                pytest.fail(f"the plane did not recover from the API server restart: {what}")
            time.sleep(0.2)

    def watch_served(list_call: Callable[..., Any]) -> bool:
        try:
            answer = list_call(
                watch=True, resource_version="0", timeout_seconds=1, _preload_content=False
            )
        except ApiException as exc:
            if exc.status in (429, 500, 503):
                return False
            raise
        answer.release_conn()
        return True

    def read(call: Callable[..., Any], *args: str) -> dict[str, Any]:
        return dict(json.loads(call(*args, _preload_content=False).data))

    def probe_phase(namespace: str) -> str | None:
        return read(core.read_namespaced_pod, "probe", namespace)["status"].get("phase")

    def budget_healthy(namespace: str) -> bool:
        pdb = read(policy.read_namespaced_pod_disruption_budget, "probe", namespace)
        return bool((pdb.get("status") or {}).get("currentHealthy") == 1)

    namespace = f"restart-probe-{secrets.token_hex(3)}"
    try:
        until(
            "watches served",
            lambda: all(map(watch_served, (core.list_pod_for_all_namespaces, core.list_node))),
        )
        nodes = read(core.list_node)["items"]
        kwok_node = next(
            n["metadata"]["name"]
            for n in nodes
            if (n["metadata"].get("annotations") or {}).get(k8s_plane.KWOK_NODE_ANNOTATION)
            == "fake"
        )
        core.create_namespace({"metadata": {"name": namespace}})
        probe = {
            "metadata": {"name": "probe", "labels": {"app": "probe"}},
            "spec": {"nodeName": kwok_node, "containers": [{"name": "c", "image": "x"}]},
        }
        core.create_namespaced_pod(namespace, probe)
        selector = {"matchLabels": {"app": "probe"}}
        budget = {"metadata": {"name": "probe"}, "spec": {"minAvailable": 1, "selector": selector}}
        policy.create_namespaced_pod_disruption_budget(namespace, budget)
        until("KWOK runs a probe pod", lambda: probe_phase(namespace) == "Running")
        until("the disruption controller observes a budget", lambda: budget_healthy(namespace))
    finally:
        with contextlib.suppress(ApiException):
            core.delete_collection_namespaced_pod(namespace, grace_period_seconds=0)
            core.delete_namespace(namespace)
        api_client.close()


@pytest.fixture(scope="session")
def k8s_restart_apiserver(k8s_plane_info: K8sPlane) -> Callable[..., None]:
    """``restart(down_for=0.0)`` restarts the plane's kube-apiserver mid-test.

    The process is killed (as a crash), stays down ``down_for`` seconds and is started again
    by kwokctl with the same flags; the call returns once the plane serves the tests again
    (``/readyz``, watches, KWOK and the controllers: ``_wait_plane_recovered``). etcd keeps
    every object; watches and connections open before it are broken. Pods and nodes are
    served from etcd, so a watch of them resumes across the restart; for other resources the
    new watch cache forgets older resourceVersions (410 Gone).
    """
    plane = _plane_of(k8s_plane_info)

    def restart(down_for: float = 0.0) -> None:
        plane.restart_apiserver(down_for=down_for)
        _wait_plane_recovered(k8s_plane_info.kubeconfig, timeout=120)

    return restart


@pytest.fixture(scope="session")
def k8s_compact_etcd(k8s_plane_info: K8sPlane) -> Callable[[], int]:
    """Compact etcd past every revision issued so far: ``k8s_compact_etcd() -> revision``.

    Afterwards a watch of pods or nodes from an older resourceVersion answers 410 Gone (the
    plane serves both from etcd, see hack/k8s_plane.py WATCH_CACHE_SIZES); watches already
    open go on.
    """
    return _plane_of(k8s_plane_info).compact_etcd
