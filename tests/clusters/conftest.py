"""Fixtures for tests against the local Kubernetes control plane (tests marked ``k8s``).

The session starts one plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler and
KWOK with the ``default`` node profile) and always stops it, or reuses the local plane that
``KUBECONFIG`` names (e.g. ``make k8s-up`` then ``KUBECONFIG=.k8s/kubeconfig pytest -m k8s``).
Each test gets its own namespace. Missing binaries fail the tests; they never skip.
"""

from __future__ import annotations

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
PLANE_FIXTURES = {"k8s_plane_info", "k8s_api", "k8s_namespace", "k8s_fake_node"}


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


def _server_of(kubeconfig: Path) -> str:
    config = yaml.safe_load(kubeconfig.read_text()) or {}
    current = config.get("current-context")
    contexts = {c["name"]: c["context"] for c in config.get("contexts", [])}
    clusters = {c["name"]: c["cluster"] for c in config.get("clusters", [])}
    try:
        return str(clusters[contexts[current]["cluster"]]["server"])
    except KeyError as exc:
        raise pytest.fail.Exception(f"{kubeconfig}: no server for its current context") from exc


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
        yield K8sPlane(kubeconfig, server, started_here=False, assets=_assets_or_none())
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
        state = plane.up(
            profile=os.environ.get("GPUPOOL_K8S_PROFILE", "default"),
            controllers=True,
            scheduler=True,
        )
    except k8s_plane.PlaneError as exc:  # up() has already stopped what it started
        failure = str(exc)
    if failure is not None:
        pytest.fail(f"the local Kubernetes plane did not start: {failure}", pytrace=False)
    try:
        yield K8sPlane(Path(state.kubeconfig), state.server, started_here=True, assets=assets)
    finally:
        plane.down()


@pytest.fixture(scope="session")
def k8s_api(k8s_plane_info: K8sPlane) -> Iterator[Any]:
    """A kubernetes.client.ApiClient with the plane's admin credentials."""
    from kubernetes import config

    api_client = config.new_client_from_config(config_file=str(k8s_plane_info.kubeconfig))
    yield api_client
    api_client.close()


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
