"""deploy/kubernetes, checked without a cluster: the files, the roles' commands against
docs/operations.md and docker-compose.yml, the variables against gpupool/settings.py.

tests/clusters/test_kubernetes_manifests_k8s.py renders the base with kustomize and has a real
kube-apiserver validate every object (server-side dry run).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml
from deployment_files import (
    REQUIRED,
    ROOT,
    image_command,
    image_uid,
    role_commands,
    run_with_settings,
    settings_reads,
)
from django.urls import resolve

KUBE = ROOT / "deploy" / "kubernetes"
KUSTOMIZATION = "kustomization.yaml"
EXAMPLE_SECRET = "secret.example.yaml"
NAMESPACE = "gpupool"
IMAGE = "gpupool:latest"
# What only the Secret may hold (secret.example.yaml), never the ConfigMap.
SECRET_KEYS = {"SECRET_KEY", "DATABASE_URL", "REDIS_URL", "EMAIL_HOST_PASSWORD"}
# The roles that run alone: one pod, replaced (never rolled) on an update.
SINGLE = ("scheduler", "beat")
# Each pod's writable scratch (gunicorn's heartbeat files, beat's schedule file): an emptyDir.
SCRATCH = "/tmp"  # noqa: S108 - a path inside the pods, checked to be a volume of their own


def documents(path: Path) -> list[dict[str, Any]]:
    """The YAML documents of one file (empty ones left out)."""
    return [document for document in yaml.safe_load_all(path.read_text()) if document]


def kustomization() -> dict[str, Any]:
    kustomization: dict[str, Any] = documents(KUBE / KUSTOMIZATION)[0]
    return kustomization


def base() -> dict[tuple[str, str], dict[str, Any]]:
    """The objects of the files the kustomization lists, by (kind, name)."""
    objects = {}
    for name in kustomization()["resources"]:
        for document in documents(KUBE / name):
            objects[(document["kind"], document["metadata"]["name"])] = document
    return objects


def pod_template(role: str) -> dict[str, Any]:
    """The pod template of a role: the Job's for migrate, the Deployment's for the others."""
    kind = "Job" if role == "migrate" else "Deployment"
    template: dict[str, Any] = base()[(kind, f"gpupool-{role}")]["spec"]["template"]
    return template


def container(role: str) -> dict[str, Any]:
    """The role's own container (named after the role)."""
    containers = pod_template(role)["spec"]["containers"]
    assert [c["name"] for c in containers] == [role]
    found: dict[str, Any] = containers[0]
    return found


def compose_commands() -> dict[str, list[str]]:
    services = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]
    return {role: services[role]["command"] for role in role_commands()}


def config() -> dict[str, str]:
    data: dict[str, str] = base()[("ConfigMap", "gpupool-config")]["data"]
    return data


def example_secret() -> dict[str, str]:
    secret = documents(KUBE / EXAMPLE_SECRET)[0]
    assert (secret["kind"], secret["metadata"]["name"]) == ("Secret", "gpupool-secrets")
    data: dict[str, str] = secret["stringData"]
    return data


def test_every_file_is_kubernetes_objects() -> None:
    """Each YAML file parses, and each document is an object with a kind and a name."""
    files = sorted(KUBE.glob("*.yaml"))
    assert len(files) > 2
    for path in files:
        if path.name == KUSTOMIZATION:
            continue
        for document in documents(path):
            assert {"apiVersion", "kind", "metadata"} <= set(document), path.name
            assert document["metadata"].get("name"), path.name


def test_the_kustomization_lists_every_manifest_but_the_example_secret() -> None:
    """A new file is not forgotten, and the example secret is never applied with the base."""
    listed = kustomization()["resources"]
    assert len(listed) == len(set(listed))
    on_disk = {path.name for path in KUBE.glob("*.yaml")} | {p.name for p in KUBE.glob("*.yml")}
    assert set(listed) == on_disk - {KUSTOMIZATION, EXAMPLE_SECRET}
    assert EXAMPLE_SECRET in on_disk
    assert kustomization()["namespace"] == NAMESPACE
    assert ("Namespace", NAMESPACE) in base()
    for (kind, name), document in base().items():
        # what names a namespace names gpupool's (kustomize would set it anyway)
        assert document["metadata"].get("namespace", NAMESPACE) == NAMESPACE, (kind, name)


def test_every_role_of_the_operations_table_is_in_the_base() -> None:
    """migrate is a Job; web, scheduler, worker and beat are Deployments; web has a Service."""
    objects = base()
    roles = set(role_commands())
    assert roles == {"migrate", "web", "scheduler", "worker", "beat"}
    assert ("Job", "gpupool-migrate") in objects
    deployments = {name for kind, name in objects if kind == "Deployment"}
    assert deployments == {f"gpupool-{role}" for role in roles - {"migrate"}}
    for name in deployments:
        spec = objects[("Deployment", name)]["spec"]
        selector = spec["selector"]["matchLabels"]
        assert selector.items() <= spec["template"]["metadata"]["labels"].items(), name
    service = objects[("Service", "gpupool-web")]["spec"]
    assert (
        service["selector"]
        == objects[("Deployment", "gpupool-web")]["spec"]["selector"]["matchLabels"]
    )


def test_each_role_runs_the_command_of_the_operations_table_and_of_compose() -> None:
    """Each container's command is compose's for the role (the table's, with the same options
    after it); web's is the image's own."""
    table, compose = role_commands(), compose_commands()
    for role, command in table.items():
        assert container(role)["command"] == compose[role], role
        assert container(role)["command"][: len(command)] == command, role
        assert "args" not in container(role), role
    assert container("web")["command"] == image_command()


def test_the_scheduler_and_beat_run_alone_and_only_the_scheduler_talks_to_the_cluster() -> None:
    """One pod each, Recreate; the scheduler's service account is in the base (rbac.yaml),
    the others mount no token."""
    objects = base()
    for role in SINGLE:
        spec = objects[("Deployment", f"gpupool-{role}")]["spec"]
        assert spec["replicas"] == 1, role
        assert spec["strategy"] == {"type": "Recreate"}, role
    scheduler = pod_template("scheduler")["spec"]
    assert scheduler["serviceAccountName"] == "gpupool-scheduler"
    assert ("ServiceAccount", "gpupool-scheduler") in objects
    assert scheduler.get("automountServiceAccountToken", True) is True
    for role in ("migrate", "web", "worker", "beat"):
        spec = pod_template(role)["spec"]
        assert "serviceAccountName" not in spec, role
        assert spec["automountServiceAccountToken"] is False, role


def test_every_pod_runs_as_the_images_user_on_a_read_only_root() -> None:
    """Non-root as the Dockerfile's uid, no privileges, a read-only root with /tmp an
    emptyDir (beat's schedule file is there), requests, the image, the ConfigMap and Secret."""
    for role in role_commands():
        spec = pod_template(role)["spec"]
        assert spec["securityContext"]["runAsNonRoot"] is True, role
        assert spec["securityContext"]["runAsUser"] == image_uid(), role
        volumes = {v["name"]: v for v in spec["volumes"]}
        for each in spec.get("initContainers", []) + spec["containers"]:
            where = f"{role}/{each['name']}"
            security = each["securityContext"]
            assert security["readOnlyRootFilesystem"] is True, where
            assert security["allowPrivilegeEscalation"] is False, where
            assert security["capabilities"]["drop"] == ["ALL"], where
            assert each["image"] == IMAGE, where
            assert set(each["resources"]["requests"]) == {"cpu", "memory"}, where
            assert each["envFrom"] == [
                {"configMapRef": {"name": "gpupool-config"}},
                {"secretRef": {"name": "gpupool-secrets"}},
            ], where
            assert "env" not in each, where  # every pod reads the same variables
            mounts = {m["mountPath"]: m["name"] for m in each["volumeMounts"]}
            assert "emptyDir" in volumes[mounts[SCRATCH]], where
    beat = container("beat")["command"]
    schedule = Path(beat[beat.index("--schedule") + 1])
    beat_mounts = [Path(m["mountPath"]) for m in container("beat")["volumeMounts"]]
    assert any(schedule.is_relative_to(mount) for mount in beat_mounts), schedule
    images = {image["name"]: image for image in kustomization()["images"]}
    assert IMAGE.split(":")[0] in images  # where an overlay sets its registry and tag


def test_the_deployments_start_after_the_migrations() -> None:
    """Each Deployment's pods first wait until `migrate --check` finds nothing to apply."""
    migrate = role_commands()["migrate"]
    for role in ("web", "scheduler", "worker", "beat"):
        (init,) = pod_template(role)["spec"]["initContainers"]
        script = init["command"][-1]
        assert init["command"][:2] == ["sh", "-c"], role
        assert re.match(rf"until {' '.join(migrate[:3])} --check\b", script), script


def test_the_web_probes_ask_healthz_on_the_port_gunicorn_binds() -> None:
    """Readiness and liveness GET /healthz on gunicorn's port, with a Host that Django allows;
    the Service sends its port 8000 there."""
    web = container("web")
    command = web["command"]
    port = int(command[command.index("--bind") + 1].rsplit(":", 1)[1])
    ports = {p["name"]: p["containerPort"] for p in web["ports"]}
    allowed = config()["ALLOWED_HOSTS"].split(",")
    for kind in ("readinessProbe", "livenessProbe"):
        probe = web[kind]["httpGet"]
        assert resolve(probe["path"]).url_name == "healthz", kind
        assert ports[probe["port"]] == port, kind
        host = {h["name"]: h["value"] for h in probe["httpHeaders"]}["Host"]
        assert host in allowed, kind
    (service_port,) = base()[("Service", "gpupool-web")]["spec"]["ports"]
    assert service_port["port"] == 8000
    assert ports[service_port["targetPort"]] == port


def test_the_celery_probes_ping_the_node_name_each_worker_runs_as() -> None:
    for role in ("scheduler", "worker"):
        command = container(role)["command"]
        node = command[command.index("--hostname") + 1] if "--hostname" in command else "celery@%h"
        probe = container(role)["livenessProbe"]["exec"]["command"]
        assert probe[:2] == ["sh", "-c"], role  # $HOSTNAME is the shell's
        assert f"--destination {node.replace('%h', '$HOSTNAME')} " in probe[2], role


def test_the_configmap_and_the_example_secret_set_variables_that_settings_read() -> None:
    """Production's variables are set (the kubeconfig excepted: in a pod the scheduler uses
    its service account), each one is read by settings.py, and secrets only in the Secret."""
    read = settings_reads()
    configured, secret = set(config()), set(example_secret())
    assert configured <= read, f"{configured - read} are never read"
    assert secret <= read, f"{secret - read} are never read"
    assert configured | secret >= REQUIRED - {"GPUPOOL_KUBECONFIG"}
    assert not configured & SECRET_KEYS
    assert secret <= SECRET_KEYS
    assert not {"GPUPOOL_KUBECONFIG", "KUBECONFIG"} & (configured | secret)
    assert config()["GPUPOOL_CLUSTER"] == "kubernetes"
    assert all(isinstance(value, str) for value in config().values())  # YAML 0 is not "0"


def test_in_a_pod_the_scheduler_takes_the_in_cluster_configuration() -> None:
    """With the ConfigMap's and the example Secret's variables and a pod's
    KUBERNETES_SERVICE_HOST, settings are production's and the Kubernetes backend loads the
    in-cluster configuration (not a kubeconfig)."""
    environment = {
        **config(),
        **example_secret(),
        "KUBERNETES_SERVICE_HOST": "10.96.0.1",
        "KUBERNETES_SERVICE_PORT": "443",
    }
    probe = (
        "import json\n"
        "from django.conf import settings as s\n"
        "from kubernetes import config\n"
        "from gpupool.control.backends import backend_from_settings\n"
        "class Loaded(Exception): pass\n"
        "def loader(name):\n"
        "    def load(*args, **kwargs): raise Loaded(name)\n"
        "    return load\n"
        "config.load_incluster_config = loader('in-cluster')\n"
        "config.load_kube_config = loader('kubeconfig')\n"
        "try:\n"
        "    backend_from_settings()\n"
        "except Loaded as loaded:\n"
        "    how = str(loaded)\n"
        "d = s.DATABASES['default']\n"
        "print(json.dumps([s.DEBUG, d['ENGINE'], s.CELERY_TASK_ALWAYS_EAGER, "
        "s.GPUPOOL_CLUSTER, s.GPUPOOL_KUBECONFIG, how]))\n"
    )
    debug, engine, eager, cluster, kubeconfig, how = json.loads(
        run_with_settings(environment, probe)
    )
    assert (debug, engine, eager) == (False, "django.db.backends.postgresql", False)
    assert (cluster, kubeconfig, how) == ("kubernetes", "", "in-cluster")
