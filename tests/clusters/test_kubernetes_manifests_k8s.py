"""deploy/kubernetes against a real kube-apiserver: the base that ``kubectl kustomize`` renders
is accepted, object by object, by the local plane's API server (created with ``dryRun=All``
and strict field validation: its schemas, field names, probes and selectors).

It lives beside the plane's fixtures (tests/clusters/conftest.py: one plane per session);
tests/deploy/test_kubernetes_manifests.py checks the same files without a cluster. The base's
namespace is made for real under a name of this test's own (other tests use ``gpupool`` for
the scheduler's service account and the names of rbac.yaml's cluster-wide objects) and
deleted afterwards; those objects are checked under names of its own.
"""

from __future__ import annotations

import copy
import os
import secrets
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic import DynamicClient

from hack import k8s_plane

pytestmark = pytest.mark.k8s

KUBE = Path(__file__).resolve().parents[2] / "deploy" / "kubernetes"
NAMESPACE = "gpupool"
WEB = "gpupool-web"


def kubectl_of(plane: Any) -> Path:
    """The kubectl built with the plane's binaries."""
    return Path(plane.assets or k8s_plane.find_assets()) / "kubectl"


def render(kubectl: Path, folder: Path = KUBE) -> list[dict[str, Any]]:
    """The objects ``kubectl kustomize`` renders from a kustomization's folder (the base's by
    default)."""
    result = subprocess.run(
        [str(kubectl), "kustomize", str(folder)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return [document for document in yaml.safe_load_all(result.stdout) if document]


def moved(document: dict[str, Any], suffix: str) -> dict[str, Any]:
    """The object in this test's own namespace, ``t-manifests-<suffix>``, instead of the
    base's; a cluster-wide object (ClusterRole, ClusterRoleBinding) under a name of its own
    (``<name>-<suffix>``, and so the role it binds), as other tests make the base's."""
    document = copy.deepcopy(document)
    metadata = document["metadata"]
    namespace = f"t-manifests-{suffix}"
    if document["kind"] == "Namespace":
        assert metadata["name"] == NAMESPACE
        metadata["name"] = namespace
    elif "namespace" in metadata:
        assert metadata["namespace"] == NAMESPACE, metadata
        metadata["namespace"] = namespace
    else:
        metadata["name"] = f"{metadata['name']}-{suffix}"
    for subject in document.get("subjects", []):
        if subject.get("namespace") == NAMESPACE:
            subject["namespace"] = namespace
    if document.get("roleRef", {}).get("kind") == "ClusterRole":
        document["roleRef"]["name"] = f"{document['roleRef']['name']}-{suffix}"
    return document


def dry_run(dynamic: DynamicClient, document: dict[str, Any]) -> Any:
    """Create ``document`` with ``dryRun=All`` and strict field validation: the API server
    decodes, defaults, validates and admits it as it would for ``kubectl apply``, and stores
    nothing."""
    resource = dynamic.resources.get(api_version=document["apiVersion"], kind=document["kind"])
    return resource.create(
        body=document,
        namespace=document["metadata"].get("namespace"),
        dry_run="All",
        query_params=[("fieldValidation", "Strict")],
    )


@pytest.fixture
def base(k8s_plane_info: Any) -> list[dict[str, Any]]:
    return render(kubectl_of(k8s_plane_info))


@pytest.fixture
def suffix(k8s_api: Any, base: list[dict[str, Any]]) -> Iterator[str]:
    """A suffix of this test's own; the base's Namespace is created for real under the name
    it gives (``moved``), and deleted afterwards."""
    suffix = secrets.token_hex(3)
    (document,) = [d for d in base if d["kind"] == "Namespace"]
    core: Any = client.CoreV1Api(k8s_api)  # raw JSON in and out
    namespace = core.create_namespace(moved(document, suffix)).metadata.name
    try:
        yield suffix
    finally:
        core.delete_namespace(namespace)


def test_the_api_server_accepts_every_object_of_the_base(
    k8s_api: Any, base: list[dict[str, Any]], suffix: str
) -> None:
    """Every object of the base, and the example Secret, passes the API server's decoding
    (no unknown or duplicate field), defaults, validation and admission."""
    dynamic: Any = DynamicClient(k8s_api)  # type: ignore[no-untyped-call]
    kinds = {(d["kind"], d["metadata"]["name"]) for d in base}
    assert {
        ("ConfigMap", "gpupool-config"),
        ("Job", "gpupool-migrate"),
        ("Service", "gpupool-web"),
        *{("Deployment", f"gpupool-{role}") for role in ("web", "scheduler", "worker", "beat")},
    } <= kinds
    checked = []
    for document in base:
        if document["kind"] == "Namespace":
            continue  # made for real by the fixture
        sent = moved(document, suffix)
        answer = dry_run(dynamic, sent)
        assert answer.metadata.name == sent["metadata"]["name"]
        checked.append(document["kind"])
    # The example Secret is not in the base, but operators copy it: it is valid too.
    (secret,) = [d for d in yaml.safe_load_all((KUBE / "secret.example.yaml").read_text()) if d]
    dry_run(dynamic, moved(secret, suffix))
    # Dry run stored nothing.
    assert client.AppsV1Api(k8s_api).list_namespaced_deployment(f"t-manifests-{suffix}").items == []
    assert len(checked) == len(base) - 1


def test_the_dry_run_refuses_a_misspelt_field(
    k8s_api: Any, base: list[dict[str, Any]], suffix: str
) -> None:
    """The check is live: a field the schema lacks, or a probe without a port, is refused."""
    dynamic: Any = DynamicClient(k8s_api)  # type: ignore[no-untyped-call]
    (web,) = [d for d in base if d["kind"] == "Deployment" and d["metadata"]["name"] == WEB]
    misspelt = moved(web, suffix)
    (container,) = misspelt["spec"]["template"]["spec"]["containers"]
    container["readinesProbe"] = container.pop("readinessProbe")
    with pytest.raises(ApiException) as refused:
        dry_run(dynamic, misspelt)
    assert refused.value.status == 400
    assert "readinesProbe" in str(refused.value.body)
    portless = moved(web, suffix)
    (container,) = portless["spec"]["template"]["spec"]["containers"]
    del container["livenessProbe"]["httpGet"]["port"]
    with pytest.raises(ApiException) as refused:
        dry_run(dynamic, portless)
    assert refused.value.status == 422
    assert "livenessProbe.httpGet.port" in str(refused.value.body)


def test_an_overlay_sets_the_image_of_every_container(k8s_plane_info: Any, tmp_path: Path) -> None:
    """The kustomization's ``images:`` entry is what an overlay changes: every container, the
    init containers too, then runs the operator's image."""
    overlay = {
        "resources": [os.path.relpath(KUBE, tmp_path)],  # kustomize takes no absolute path
        "images": [{"name": "gpupool", "newName": "registry.example.org/gpupool", "newTag": "1.2"}],
    }
    (tmp_path / "kustomization.yaml").write_text(yaml.safe_dump(overlay))
    images = set()
    for document in render(kubectl_of(k8s_plane_info), tmp_path):
        if document["kind"] in ("Deployment", "Job"):
            spec = document["spec"]["template"]["spec"]
            images |= {c["image"] for c in spec["containers"] + spec.get("initContainers", [])}
    assert images == {"registry.example.org/gpupool:1.2"}
