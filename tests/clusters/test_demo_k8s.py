"""`make demo-k8s` (hack/demo_k8s.sh) starts: on a plane with the demo's nodes (profile
`demo`, as the script starts one), with PostgreSQL, and Celery workers (the loop's queue, the
other tasks) and beat on Redis, the loop runs cycles, the generator's work becomes pods in the
teams' namespaces, the inventory is the plane's nodes, the web server answers, and Ctrl-C
stops every process."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import psycopg
import pytest
import yaml
from kubernetes import client

from hack import k8s_plane

pytestmark = [pytest.mark.k8s, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
DATABASE = "gpupool_demo_smoke"
TIMEOUT = 240.0


def server_urls() -> dict[str, str]:
    """DATABASE_URL and REDIS_URL of the local services (hack/services.sh starts them)."""
    out = subprocess.run(
        ["bash", "hack/services.sh"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)


def fresh_database(server: str) -> str:
    """The smoke test's own database, dropped first so every run starts empty."""
    with psycopg.connect(server, autocommit=True) as connection:
        connection.execute(f'DROP DATABASE IF EXISTS "{DATABASE}" WITH (FORCE)')
    parts = urlsplit(server)
    return parts._replace(path=f"/{DATABASE}").geturl()


def counts(database: str) -> tuple[int, int]:
    """Succeeded cycles and workloads in the demo's database so far (0, 0 before migrate)."""
    try:
        with psycopg.connect(database, connect_timeout=3) as connection:
            cycles = connection.execute(
                "SELECT count(*) FROM control_schedulingcycle WHERE status = 'succeeded'"
            ).fetchone()
            workloads = connection.execute("SELECT count(*) FROM workloads_workload").fetchone()
    except psycopg.Error:
        return 0, 0
    return (cycles[0] if cycles else 0), (workloads[0] if workloads else 0)


def inventory(database: str) -> dict[str, bool]:
    """The inventory's nodes: whether each is gone from the cluster, by name."""
    with psycopg.connect(database, connect_timeout=3) as connection:
        rows = connection.execute("SELECT name, gone_at IS NOT NULL FROM inventory_node")
        return dict(rows.fetchall())


def broken_gpus(database: str) -> dict[str, int]:
    """The inventory's unhealthy GPUs, counted by node."""
    with psycopg.connect(database, connect_timeout=3) as connection:
        rows = connection.execute(
            "SELECT n.name, count(*) FROM inventory_gpu g JOIN inventory_node n ON n.id = "
            "g.node_id WHERE NOT g.healthy GROUP BY n.name"
        )
        return dict(rows.fetchall())


def web_answers(port: int) -> bool:
    """Whether the demo's web server serves its login page."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/admin/login/", timeout=3) as page:
            return bool(page.status == 200)
    except OSError:
        return False


def gpupool_pods(api: Any) -> list[dict[str, Any]]:
    """Pods gpupool created, in any namespace, as JSON."""
    answer = client.CoreV1Api(api).list_pod_for_all_namespaces(
        label_selector="app.kubernetes.io/managed-by=gpupool", _preload_content=False
    )
    return list(json.loads(answer.data)["items"])


@pytest.fixture
def demo_plane(k8s_plane_info: Any, tmp_path: Path) -> Iterator[tuple[Path, Any]]:
    """A plane of the test's own with the demo's 64 nodes (the session's has other nodes,
    which the demo's quotas do not fit): its kubeconfig and an API client."""
    from kubernetes import config

    if k8s_plane_info.assets is None:
        pytest.fail("the local plane's binaries are not built (`make k8s-build`)")
    plane = k8s_plane.Plane(tmp_path / "plane", k8s_plane_info.assets, tie_to_parent=True)
    try:
        state = plane.up(profile="demo", controllers=True, scheduler=True)
        api = config.new_client_from_config(config_file=state.kubeconfig)
        try:
            yield Path(state.kubeconfig), api
        finally:
            api.close()
    finally:
        plane.down()


def loop_kubeconfigs(group: int) -> set[str]:
    """The GPUPOOL_KUBECONFIG of every Celery process in the process group ``group``."""
    found = set()
    for proc in Path("/proc").iterdir():
        try:
            if not proc.name.isdigit() or os.getpgid(int(proc.name)) != group:
                continue
            if b"celery" not in (proc / "cmdline").read_bytes():
                continue
            environ = (proc / "environ").read_bytes().split(b"\0")
        except (OSError, ProcessLookupError):  # gone meanwhile
            continue
        for entry in environ:
            if entry.startswith(b"GPUPOOL_KUBECONFIG="):
                found.add(entry.split(b"=", 1)[1].decode())
    return found


def test_the_kubernetes_demo_starts_runs_the_loop_on_celery_and_stops_on_ctrl_c(
    demo_plane: tuple[Path, Any], tmp_path: Path
) -> None:
    kubeconfig, k8s_api = demo_plane
    urls = server_urls()
    database = fresh_database(urls["DATABASE_URL"])
    (port,) = k8s_plane.free_ports(("web",)).values()
    env = {
        **os.environ,
        "DEMO_KUBECONFIG": str(kubeconfig),
        "DEMO_DATABASE_URL": database,
        "DEMO_REDIS_URL": urls["REDIS_URL"].rsplit("/", 1)[0] + "/6",
        "DEMO_ARGS": f"--port {port}",
        "GPUPOOL_CYCLE_INTERVAL_S": "2",
    }
    log = tmp_path / "demo-k8s.log"
    with log.open("wb") as out:
        demo = subprocess.Popen(
            ["bash", "hack/demo_k8s.sh"], cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + TIMEOUT
        seen: dict[str, bool] = {}
        while time.monotonic() < deadline and demo.poll() is None:
            cycles, workloads = counts(database)
            seen["cycles"] = cycles >= 2
            seen["workloads"] = workloads >= 1
            seen["web"] = web_answers(port)
            seen["pods"] = any(
                p["metadata"]["namespace"] in {"nlp", "vision", "speech", "search", "ads", "recsys"}
                for p in gpupool_pods(k8s_api)
            )
            if all(seen.values()):
                break
            time.sleep(2)
        assert demo.poll() is None, f"the demo exited early:\n{log.read_text()[-3000:]}"
        assert all(seen.values()), f"not seen in time: {seen}\n{log.read_text()[-3000:]}"
        # The inventory is the plane's nodes, none other: seed-demo read them from the
        # plane, not from the simulated cluster's profile (whose nodes the first cycle
        # would have marked gone).
        plane_nodes = {n.metadata.name for n in client.CoreV1Api(k8s_api).list_node().items}
        assert inventory(database) == dict.fromkeys(plane_nodes, False)
        # The demo's two broken GPUs: left out of allocatable by the script, marked by the loop.
        assert broken_gpus(database) == {"h100-07": 1, "h100-23": 1}
        # The loop talks to the plane as the service account of deploy/kubernetes/rbac.yaml,
        # as an installed gpupool does (the admin's kubeconfig only set the plane up).
        scheduler = kubeconfig.parent / "scheduler-kubeconfig"
        user = yaml.safe_load(scheduler.read_text())["users"][0]
        assert user["name"] == "gpupool-scheduler" and user["user"]["token"]
        assert loop_kubeconfigs(demo.pid) == {str(scheduler)}
        os.killpg(demo.pid, signal.SIGINT)  # Ctrl-C reaches the terminal's whole group
        assert demo.wait(60) == 0, log.read_text()[-3000:]
        assert "demo: stopped" in log.read_text()
        with pytest.raises(ProcessLookupError):  # nothing of the group is left
            os.killpg(demo.pid, 0)
    finally:
        if demo.poll() is None:
            os.killpg(demo.pid, signal.SIGKILL)
            demo.wait()
        core = client.CoreV1Api(k8s_api)
        for pod in gpupool_pods(k8s_api):
            core.delete_namespaced_pod(
                pod["metadata"]["name"], pod["metadata"]["namespace"], grace_period_seconds=0
            )
