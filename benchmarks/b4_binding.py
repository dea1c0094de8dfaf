"""Benchmark B4: binding throughput against the local kube-apiserver with KWOK nodes.

    make k8s-up K8S_UP_ARGS="--profile b4 --no-scheduler"   # 500 x 8-GPU KWOK nodes
    DATABASE_URL=postgres://.../gpupool_b4 .venv/bin/python benchmarks/b4_binding.py --json

Two kinds of run, each on an empty namespace and a pool that fits it (../shared/BENCHMARKS.md):

- ``single``: ``--pods`` (3,600) one-GPU pods, bound by gpupool (``manage.py gpupool loop``:
  the control loop on the Kubernetes backend, in a process of its own on this database, paced
  as deployed -- a cycle when pods arrive, batched, ``GPUPOOL_CYCLE_BATCH_S`` -- or with
  ``--loop-interval 0`` cycles back to back, as before 2026-12-02's round 5) and, in a run of
  its own, by kube-scheduler (the plane's binary, started here with a configuration file);
- ``gangs``: ``--gangs`` (400) gangs of ``--gang-size`` (8) one-GPU pods, bound by gpupool
  alone (kube-scheduler has no gangs). Every pod's node is checked at the end, and a gang
  counts as whole only if all its members are bound, none was bound before its last member
  existed, and no bound pod was ever removed (a rolled-back partial binding).

Both binders get the same client-side limit: ``--qps``/``--burst`` are the Kubernetes
backend's ``qps``/``burst`` (a token bucket over every request it starts) and
kube-scheduler's ``clientConnection.qps``/``burst`` (what ``--kube-api-qps``/``--kube-api-burst``
set). The pods are the same for both but for ``schedulerName``, created by ``--creators``
threads of this process in a seeded order (gang members interleaved, so gangs arrive in
pieces). Time runs from the first creation to the last binding, as a watch of bound pods in
the namespace sees it (in a process of its own, so the creators never delay its stamps);
pods/s is the pods over that. The runs alternate between the binders; medians over
``--runs``. Each run also reports the CPU seconds of the binder's process (``binder_cpu_s``)
and of this one (``bench_cpu_s``: the creators, and the watch's process). The gpupool
runs need an empty PostgreSQL database (``manage.py migrate`` done), which they flush after
each run. Prints JSON with ``--json``.
"""

from __future__ import annotations

import argparse
import bisect
import contextlib
import json
import math
import os
import random
import resource
import secrets
import ssl
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

H100_PRODUCT = "NVIDIA-H100-80GB-HBM3"  # the b4 profile's nodes (hack/k8s-testenv/profiles)
NAMESPACE = "b4-bench"
CURVE_S = (0.25, 0.5, 1.0, 1.5, 2.0, 3.0, 5.0, 10.0, 20.0, 30.0)  # created_and_bound_by_s
QUEUE = "bench"
GPUPOOL = "gpupool"
KUBE_SCHEDULER = "kube-scheduler"
WATCH_TIMEOUT_S = 20  # the watch of bound pods is opened again after this
WATCH_CHILD = "--watch-bound"  # this script as the watch process of ``BoundWatch``
CLEAR_RETRY_S = 30.0  # the deletion of the pods is asked again after this while some remain


@dataclass(frozen=True)
class Setup:
    """What every run of one invocation shares."""

    kubeconfig: Path
    namespace: str = NAMESPACE
    product: str = H100_PRODUCT
    qps: float = 100.0
    burst: int = 200
    creators: int = 8
    keep_alive: bool = False  # creators reuse their connections, as a controller's client does
    seed: int = 4
    timeout_s: float = 900.0
    kube_scheduler_name: str = "default-scheduler"
    cycle_log: bool = False  # each gpupool cycle's phases and counts in the JSON
    profile_loop: Path | None = None  # cProfile the gpupool loop's process into this file
    loop_interval: float | None = None  # ``gpupool loop --interval``; None: its setting


@dataclass
class RunResult:
    """One run: how many pods, how long, and what was bound where."""

    binder: str
    kind: str
    pods: int
    seconds: float = 0.0
    create_s: float = 0.0
    first_bind_s: float = 0.0
    bound: int = 0
    removed_while_bound: int = 0
    gangs: int = 0
    gangs_whole: int = 0
    gangs_bound_early: int = 0
    binder_cpu_s: float = 0.0
    binder_window_cpu_s: float = 0.0  # from the first creation to the last binding
    # The PostgreSQL server processes serving the binder's connections, in the same window.
    database_window_cpu_s: float = 0.0
    bench_cpu_s: float = 0.0
    watch_cpu_s: float = 0.0  # the watch process's, within bench_cpu_s (not reported apart)
    cycles: int = 0
    bind_errors: int = 0
    phase_s: dict[str, float] = field(default_factory=dict)
    load: list[float] = field(default_factory=list)  # the 1-minute load average, every 5 s
    cycle_log: list[dict[str, Any]] = field(default_factory=list)  # gpupool: each cycle
    started_wall: float = 0.0  # the first creation, on the wall clock (the cycles' times)
    qps: float = 0.0
    burst: int = 0
    # How many pods had been created and bound that many seconds after the first creation.
    curve: dict[str, tuple[int, int]] = field(default_factory=dict)
    # The turns a full bucket lost by then (seconds of the limit), replayed from the bindings.
    lost: dict[str, float] = field(default_factory=dict)

    @property
    def pods_per_s(self) -> float:
        """Pods over the seconds from the first creation to the last binding."""
        return self.pods / self.seconds if self.seconds > 0 else 0.0

    def as_json(self) -> dict[str, Any]:
        """The run as JSON data."""
        data: dict[str, Any] = {
            "binder": self.binder,
            "pods": self.pods,
            "bound": self.bound,
            "seconds": round(self.seconds, 3),
            "pods_per_s": round(self.pods_per_s, 1),
            "create_s": round(self.create_s, 3),
            "first_bind_s": round(self.first_bind_s, 3),
            "removed_while_bound": self.removed_while_bound,
            "binder_cpu_s": round(self.binder_cpu_s, 1),
            "binder_cpu_ms_per_pod": round(1000 * self.binder_cpu_s / self.pods, 2)
            if self.pods
            else 0.0,
            "binder_window_cpu_s": round(self.binder_window_cpu_s, 1),
            "binder_window_cpu_ms_per_pod": round(1000 * self.binder_window_cpu_s / self.pods, 2)
            if self.pods
            else 0.0,
            "database_window_cpu_s": round(self.database_window_cpu_s, 2),
            "binder_and_database_window_cpu_ms_per_pod": round(
                1000 * (self.binder_window_cpu_s + self.database_window_cpu_s) / self.pods, 2
            )
            if self.pods
            else 0.0,
            "last_bind_after_last_creation_s": round(self.seconds - self.create_s, 3),
            # The client limit's allowance left unused: the seconds over the least that
            # ``pods`` requests take at ``qps`` with a full bucket of ``burst`` at the first
            # creation (both binders' limiters sit full then).
            "unused_allowance_s": round(self.seconds - max(self.pods - self.burst, 0) / self.qps, 3)
            if self.qps
            else None,
            "created_and_bound_by_s": {k: list(v) for k, v in self.curve.items()},
            "allowance_lost_by_s": {k: round(v, 3) for k, v in self.lost.items()},
            "load_1m": {
                "median": round(statistics.median(self.load), 1) if self.load else None,
                "min": min(self.load, default=None),
                "max": max(self.load, default=None),
            },
            "bench_cpu_s": round(self.bench_cpu_s, 1),
        }
        if self.kind == "gangs":
            data |= {
                "gangs": self.gangs,
                "gangs_whole": self.gangs_whole,
                "gangs_bound_before_complete": self.gangs_bound_early,
            }
        if self.binder == GPUPOOL:
            data |= {
                "cycles": self.cycles,
                "bind_errors": self.bind_errors,
                "phase_s": {k: round(v, 3) for k, v in sorted(self.phase_s.items())},
            }
            if self.cycle_log:
                data["cycle_log"] = self.cycle_log
        return data


# --- the cluster side ---------------------------------------------------------------------


def api_client(kubeconfig: Path, pool: int = 32) -> Any:
    """A client of the plane with room for ``pool`` connections."""
    from kubernetes import client, config

    configuration = client.Configuration()
    config.load_kube_config(config_file=str(kubeconfig), client_configuration=configuration)
    configuration.connection_pool_maxsize = pool
    return client.ApiClient(configuration)


def pod_manifest(
    name: str, binder: str, setup: Setup, gang: str | None = None, gang_size: int = 1
) -> dict[str, Any]:
    """A one-GPU pause pod for ``binder``, on the pool's product; a gang member if ``gang``."""
    labels = {"app": "b4"}
    annotations: dict[str, str] = {}
    spec: dict[str, Any] = {
        "nodeSelector": {"nvidia.com/gpu.product": setup.product},
        "containers": [
            {
                "name": "main",
                "image": "registry.k8s.io/pause:3.10",
                "resources": {
                    "limits": {"nvidia.com/gpu": "1"},
                    "requests": {"nvidia.com/gpu": "1"},
                },
            }
        ],
    }
    if binder == GPUPOOL:
        spec["schedulerName"] = "gpupool"
        labels["gpupool.io/queue"] = QUEUE
        if gang is not None:
            labels["gpupool.io/workload"] = gang
            annotations["gpupool.io/min-member"] = str(gang_size)
    else:
        spec["schedulerName"] = setup.kube_scheduler_name
    if gang is not None:
        labels["b4-gang"] = gang
    metadata = {"name": name, "labels": labels, "annotations": annotations}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


def manifests(binder: str, kind: str, count: int, gang_size: int, setup: Setup) -> list[Any]:
    """The run's pods in their seeded creation order (gang members interleaved)."""
    if kind == "single":
        pods = [pod_manifest(f"pod-{i:05d}", binder, setup) for i in range(count)]
    else:
        pods = [
            pod_manifest(f"gang-{g:04d}-{m}", binder, setup, f"gang-{g:04d}", gang_size)
            for g in range(count)
            for m in range(gang_size)
        ]
    random.Random(setup.seed).shuffle(pods)
    return pods


class BoundWatch:
    """Watches the namespace's bound pods: when each was first seen bound, and removals.

    The watch runs in a process of its own (this script with ``WATCH_CHILD``), which stamps
    each event as its chunk arrives (``time.monotonic()``: the machine's clock, the same in
    both processes) and hands the stamps over a pipe. In this process it shared the
    interpreter with the creating threads and saw the first bindings of a burst up to
    0.17 s after the API server had answered them (docs/benchmarks.md B4, 2026-12-05, third
    session): the first second's figures were partly the harness's own lag."""

    def __init__(self, kubeconfig: Path, namespace: str) -> None:
        self.bound_at: dict[str, float] = {}
        self.removed = 0
        self.cpu_s = 0.0  # the watch process's CPU, once closed
        command = [sys.executable, str(Path(__file__).resolve()), WATCH_CHILD]
        self._process = subprocess.Popen(
            [*command, str(kubeconfig), namespace], stdout=subprocess.PIPE, text=True
        )
        assert self._process.stdout is not None
        self._lines = self._process.stdout
        ready = self._lines.readline().strip()
        if ready != "watching":
            self._process.kill()
            self._process.wait()
            raise RuntimeError(f"the watch of bound pods did not start (it said {ready!r})")
        self._reader = threading.Thread(target=self._read, name="b4-watch", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self._lines:
            kind, *rest = line.split()
            if kind == "bound":
                name, at = rest
                self.bound_at.setdefault(name, float(at))
            elif kind == "removed":
                self.removed += 1

    def close(self) -> None:
        """Stop the watch process, once every stamp it sent has been read; its CPU is what
        waiting for it adds to this process's children's (no other child ends meanwhile:
        the binder's process is waited for after the watch is closed)."""
        children = cpu_s(resource.RUSAGE_CHILDREN)
        self._process.terminate()
        try:
            self._process.wait(10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        self.cpu_s = cpu_s(resource.RUSAGE_CHILDREN) - children
        self._reader.join(10)
        self._lines.close()


def watch_bound(kubeconfig: Path, namespace: str) -> int:
    """The watch process of ``BoundWatch``: says ``watching`` once its watch of the
    namespace's bound pods is open, then ``bound NAME T`` the first time it sees each pod
    bound (``T``: ``time.monotonic()`` when the event's chunk arrived) and ``removed`` for each
    bound pod deleted, until it is terminated. A dropped watch resumes from the last version
    seen; after a 410 (the version was compacted away) the bound pods are listed, those not
    seen yet stamped then (a little late, never lost)."""
    from kubernetes import client

    core = client.CoreV1Api(api_client(kubeconfig, pool=2))
    out = sys.stdout
    seen: set[str] = set()

    def relist() -> str:
        listed = json.loads(
            core.list_namespaced_pod(
                namespace, field_selector="spec.nodeName!=", _preload_content=False
            ).data
        )
        now = time.monotonic()
        for pod in listed["items"]:
            name = pod["metadata"]["name"]
            if name not in seen:
                seen.add(name)
                out.write(f"bound {name} {now:.6f}\n")
        out.flush()
        return str(listed["metadata"]["resourceVersion"])

    # Watched from the namespace's version now: pods bound before are not this run's.
    version = str(
        json.loads(core.list_namespaced_pod(namespace, limit=1, _preload_content=False).data)[
            "metadata"
        ]["resourceVersion"]
    )
    announced = False
    while True:
        try:
            response = core.list_namespaced_pod(
                namespace,
                watch=True,
                field_selector="spec.nodeName!=",
                resource_version=version,
                timeout_seconds=WATCH_TIMEOUT_S,
                _preload_content=False,
            )
            if not announced:
                out.write("watching\n")
                out.flush()
                announced = True
            buffer = b""
            for chunk in response.stream(65536):
                now = time.monotonic()
                buffer += chunk
                *lines, buffer = buffer.split(b"\n")
                for line in lines:
                    if not line.strip():
                        continue
                    event = json.loads(line)
                    pod = event.get("object") or {}
                    if event.get("type") == "ERROR":  # a Status; 410: the version expired
                        if pod.get("code") == 410:
                            version = relist()
                        continue
                    metadata = pod.get("metadata") or {}
                    version = metadata.get("resourceVersion", version)
                    name = metadata.get("name")
                    if event.get("type") == "DELETED":
                        out.write("removed\n")
                    elif name and name not in seen:
                        seen.add(name)
                        out.write(f"bound {name} {now:.6f}\n")
                out.flush()
        except Exception as exc:  # a dropped watch resumes from the last version seen
            if getattr(exc, "status", None) == 410:
                with contextlib.suppress(Exception):
                    version = relist()
            time.sleep(0.2)


def ensure_namespace(api: Any, namespace: str) -> None:
    """Create the namespace if it is not there."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    try:
        client.CoreV1Api(api).create_namespace({"metadata": {"name": namespace}})
    except ApiException as exc:
        if exc.status != 409:
            raise


def clear_pods(api: Any, namespace: str, timeout_s: float = 900.0) -> None:
    """Delete every pod of the namespace and wait until they are gone. The deletion is asked
    again every ``CLEAR_RETRY_S`` while pods remain: with thousands of pods the server's
    request can end (a 504, or the connection closed) before it has deleted them all."""
    from kubernetes import client

    core = client.CoreV1Api(api)
    deadline = time.monotonic() + timeout_s
    asked = -math.inf
    while time.monotonic() < deadline:
        answer = core.list_namespaced_pod(namespace, limit=1, _preload_content=False)
        if not json.loads(answer.data)["items"]:
            return
        if time.monotonic() - asked >= CLEAR_RETRY_S:
            asked = time.monotonic()
            try:
                core.delete_collection_namespaced_pod(
                    namespace, grace_period_seconds=0, _request_timeout=CLEAR_RETRY_S
                )
            except Exception as exc:  # it goes on server-side, or the next ask picks it up
                print(f"b4: deleting the pods: {exc!r}"[:200], file=sys.stderr, flush=True)
        time.sleep(0.5)
    raise RuntimeError(f"the pods of {namespace} were not gone after {timeout_s:.0f} s")


def pods_now(api: Any, namespace: str) -> list[dict[str, Any]]:
    """Every pod of the namespace, as JSON."""
    from kubernetes import client

    answer = client.CoreV1Api(api).list_namespaced_pod(namespace, _preload_content=False)
    return list(json.loads(answer.data)["items"])


def create_all(
    api: Any, namespace: str, pods: list[Any], creators: int, *, keep_alive: bool = False
) -> dict[str, float]:
    """Create the pods with ``creators`` threads; when each creation was answered. By default
    as ``kubectl create`` does, one TLS connection a pod (the answer is not read, so its
    connection is never reused); with ``keep_alive`` as a controller's client does, each
    answer read and its connection handed back to the pool for the next creation."""
    from kubernetes import client

    core = client.CoreV1Api(api)
    created: dict[str, float] = {}

    def create(pod: Any) -> None:
        answer = core.create_namespaced_pod(namespace, pod, _preload_content=False)
        if keep_alive:
            answer.read()
            answer.release_conn()
        created[pod["metadata"]["name"]] = time.monotonic()

    with ThreadPoolExecutor(creators, thread_name_prefix="b4-create") as pool:
        for future in [pool.submit(create, p) for p in pods]:
            future.result()
    return created


# --- the binders ------------------------------------------------------------------------------


def kube_scheduler_config(setup: Setup, folder: Path) -> Path:
    """A KubeSchedulerConfiguration: the plane's kubeconfig, the QPS limit, no election."""
    path = folder / "kube-scheduler.yaml"
    path.write_text(
        json.dumps(
            {
                "apiVersion": "kubescheduler.config.k8s.io/v1",
                "kind": "KubeSchedulerConfiguration",
                "clientConnection": {
                    "kubeconfig": str(setup.kubeconfig),
                    "qps": setup.qps,
                    "burst": setup.burst,
                },
                "leaderElection": {"leaderElect": False},
                "profiles": [{"schedulerName": setup.kube_scheduler_name}],
            }
        )
    )
    return path


@contextlib.contextmanager
def kube_scheduler(setup: Setup) -> Iterator[subprocess.Popen[bytes]]:
    """The plane's kube-scheduler binary, running with the limit until the block ends."""
    from hack import k8s_plane

    binary = k8s_plane.find_assets() / "kube-scheduler"
    (port,) = k8s_plane.free_ports(("kube-scheduler",)).values()
    with tempfile.TemporaryDirectory(prefix="b4-scheduler-") as folder:
        config = kube_scheduler_config(setup, Path(folder))
        log_path = Path(folder) / "kube-scheduler.log"
        log = log_path.open("wb")
        command = [
            str(binary),
            f"--config={config}",
            f"--authentication-kubeconfig={setup.kubeconfig}",
            f"--authorization-kubeconfig={setup.kubeconfig}",
            "--bind-address=127.0.0.1",
            f"--secure-port={port}",
        ]
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        try:
            wait_ready(f"https://127.0.0.1:{port}/readyz", process, log_path)
            yield process
        finally:
            process.terminate()
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            log.close()


def wait_ready(url: str, process: subprocess.Popen[bytes], log: Path, timeout: float = 60) -> None:
    """Wait until ``url`` answers 200 (its certificate is self-signed)."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"kube-scheduler exited: {log.read_text()[-2000:]}")
        with (
            contextlib.suppress(OSError),
            urllib.request.urlopen(url, context=context, timeout=2) as answer,  # noqa: S310
        ):
            if answer.status == 200:
                return
        time.sleep(0.2)
    raise RuntimeError(f"kube-scheduler not ready after {timeout:.0f} s")


def seed_pool(namespace: str, product: str, gpus: int) -> None:
    """The database's side: a flavor on the product, a tenant owning the namespace, a queue."""
    from gpupool.inventory.actions import do_save_flavor
    from gpupool.inventory.models import Flavor
    from gpupool.quotas.actions import do_save_priority_class, do_save_queue, do_set_queue_quota
    from gpupool.quotas.models import PriorityClass, Queue
    from gpupool.tenancy.actions import do_save_tenant
    from gpupool.tenancy.models import Tenant

    flavor = do_save_flavor(
        Flavor(
            name="b4-gpu",
            gpu_memory_gb=80,
            hourly_price=Decimal("2.5"),
            node_labels={"nvidia.com/gpu.product": product},
        ),
        acting_user=None,
    )
    do_save_priority_class(PriorityClass(name="normal", value=0, default=True), acting_user=None)
    root = do_save_queue(Queue(name="root"), acting_user=None)
    tenant = do_save_tenant(
        Tenant(name=QUEUE, organization="b4"), namespaces=(namespace,), acting_user=None
    )
    queue = do_save_queue(Queue(name=QUEUE, parent=root, tenant=tenant), acting_user=None)
    do_set_queue_quota(queue, flavor, guarantee=0, deserved=gpus, capability=gpus, acting_user=None)


def flush_database() -> None:
    """Empty every table (the run's rows), keeping the schema."""
    from django.core.management import call_command

    call_command("flush", interactive=False, verbosity=0)


def cpu_s(who: int) -> float:
    """User and system CPU seconds of this process or of its children waited for."""
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


def run_once(binder: str, kind: str, count: int, gang_size: int, setup: Setup) -> RunResult:
    """One run on an empty namespace: create, bind, check, clean up."""
    api = api_client(setup.kubeconfig, pool=setup.creators + 8)
    ensure_namespace(api, setup.namespace)
    clear_pods(api, setup.namespace)
    pods = manifests(binder, kind, count, gang_size, setup)
    result = RunResult(binder, kind, len(pods), qps=setup.qps, burst=setup.burst)
    print(f"b4: {kind} run of {len(pods)} pods by {binder}", file=sys.stderr, flush=True)
    try:
        children, itself = cpu_s(resource.RUSAGE_CHILDREN), cpu_s(resource.RUSAGE_SELF)
        if binder == GPUPOOL:
            _bind_with_gpupool(api, pods, setup, result)
        else:
            with kube_scheduler(setup) as process:
                _bind(api, pods, setup, result, lambda done: done.wait(0.05), process.pid)
        # The binder's process has ended (and was waited for): its CPU, start to stop.
        # The watch's process was one of this one's children: its CPU is the benchmark's.
        result.binder_cpu_s = cpu_s(resource.RUSAGE_CHILDREN) - children - result.watch_cpu_s
        result.bench_cpu_s = cpu_s(resource.RUSAGE_SELF) - itself + result.watch_cpu_s
        _check(api, setup.namespace, pods, result)
        print(f"b4: {json.dumps(result.as_json())}", file=sys.stderr, flush=True)
    finally:
        clear_pods(api, setup.namespace)
        if binder == GPUPOOL:
            flush_database()
        api.close()
    return result


@contextlib.contextmanager
def gpupool_loop(setup: Setup, log_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    """``manage.py gpupool loop`` in a process of its own (as kube-scheduler is,
    and as a deployment runs it), on the Kubernetes backend with the limit, on this database;
    stopped with SIGTERM (between two cycles) when the block ends."""
    environment = {
        **os.environ,
        "GPUPOOL_CLUSTER": "kubernetes",
        "GPUPOOL_KUBECONFIG": str(setup.kubeconfig),
        "GPUPOOL_KUBE_API_QPS": str(setup.qps),
        "GPUPOOL_KUBE_API_BURST": str(setup.burst),
        "DATABASE_URL": database_url(),
        "REDIS_URL": "",
        # As a deployment runs it: DEBUG off (which asks for a secret key of its own).
        "DEBUG": "0",
        "SECRET_KEY": secrets.token_urlsafe(32),
        "GPUPOOL_APPLY_PIPELINE": "1",  # bindings in flight while the next cycle plans
    }
    command = [sys.executable, str(ROOT / "manage.py"), "gpupool", "loop"]
    if setup.loop_interval is not None:
        command += ["--interval", str(setup.loop_interval)]
    if setup.profile_loop is not None:  # slows the loop: for where the time goes, not figures
        command[1:1] = ["-m", "cProfile", "-o", str(setup.profile_loop)]
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            command, cwd=ROOT, env=environment, stdout=log, stderr=subprocess.STDOUT
        )
        try:
            yield process
        finally:
            process.terminate()
            try:
                process.wait(120)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def database_url() -> str:
    """The URL of the database this process uses (a test's own too), for the loop's process."""
    from urllib.parse import quote

    from django.db import connection

    if connection.vendor != "postgresql":
        raise RuntimeError("B4 runs gpupool on PostgreSQL (its loop is a process of its own)")
    db = connection.settings_dict
    credentials = f"{quote(db['USER'] or '', safe='')}:{quote(db['PASSWORD'] or '', safe='')}"
    return f"postgres://{credentials}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


def wait_first_cycle(process: subprocess.Popen[bytes], log: Path, timeout: float = 300) -> None:
    """Wait for the loop's first successful cycle: the inventory is in (as kube-scheduler's
    informers have synced before it schedules)."""
    from gpupool.control.choices import CycleStatus
    from gpupool.control.models import SchedulingCycle

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the gpupool loop exited: {log.read_text()[-2000:]}")
        if SchedulingCycle.objects.filter(status=CycleStatus.SUCCEEDED).exists():
            return
        time.sleep(0.2)
    raise RuntimeError(f"no gpupool cycle succeeded in {timeout:.0f} s: {log.read_text()[-2000:]}")


def _bind_with_gpupool(api: Any, pods: list[Any], setup: Setup, result: RunResult) -> None:
    from gpupool.control.choices import CycleStatus
    from gpupool.control.models import SchedulingCycle

    seed_pool(setup.namespace, setup.product, len(pods))
    with tempfile.TemporaryDirectory(prefix="b4-gpupool-") as folder:
        log = Path(folder) / "loop.log"
        with gpupool_loop(setup, log) as process:
            wait_first_cycle(process, log)
            first = SchedulingCycle.objects.order_by("id").values_list("id", flat=True).last()
            _bind(api, pods, setup, result, lambda done: done.wait(0.05), process.pid)
        cycles = SchedulingCycle.objects.filter(id__gt=first or 0)
        failed = cycles.filter(status=CycleStatus.FAILED).values_list("error", flat=True)
        if failed:
            raise RuntimeError(f"a gpupool cycle failed: {failed[0].splitlines()[0]}")
        phases: Counter[str] = Counter()
        for cycle in cycles.filter(status=CycleStatus.SUCCEEDED).order_by("id"):
            result.cycles += 1
            if setup.cycle_log:
                result.cycle_log.append(
                    {
                        "started_at": cycle.started_at.isoformat(),
                        "at_s": round(cycle.started_at.timestamp() - result.started_wall, 3),
                        "phase_s": {
                            "sync": round(cycle.sync_s or 0.0, 3),
                            "snapshot": round(cycle.snapshot_s or 0.0, 3),
                            "plan": round(cycle.plan_s or 0.0, 3),
                            "record": round(cycle.record_s or 0.0, 3),
                            "apply": round(cycle.apply_s or 0.0, 3),
                            "apply_wait": round(cycle.outcome.get("apply_wait_s", 0.0), 3),
                        },
                        "cpu_s": round(cycle.outcome.get("cpu_s", 0.0), 4),
                        "counts": cycle.outcome.get("counts", {}),
                    }
                )
            result.bind_errors += int(cycle.outcome.get("counts", {}).get("bind_errors", 0))
            phases.update(
                {
                    "sync": cycle.sync_s,
                    "snapshot": cycle.snapshot_s,
                    "plan": cycle.plan_s,
                    "record": cycle.record_s,
                    "apply": cycle.apply_s,
                    "apply_wait": cycle.outcome.get("apply_wait_s", 0.0),
                }
            )
        result.phase_s = dict(phases)


def process_cpu_s(pid: int) -> float:
    """User and system CPU seconds of a running process so far (Linux ``/proc``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def wait_settled(pid: int, quiet_s: float = 0.5, timeout: float = 30.0) -> None:
    """Wait until the binder is idle -- under 5% of a core over ``quiet_s`` -- as a binder
    meeting a burst after a quiet spell would be: gpupool's loop rolls usage up and
    refreshes its estimates after its first cycle, kube-scheduler warms up after it is ready."""
    deadline = time.monotonic() + timeout
    before = process_cpu_s(pid)
    while time.monotonic() < deadline:
        time.sleep(quiet_s)
        now = process_cpu_s(pid)
        if now - before < 0.05 * quiet_s:
            return
        before = now


class DatabaseCpu:
    """The CPU seconds of the PostgreSQL server processes serving this database for anyone
    but this process (the binder's connections), from ``start`` to ``stop``: each backend's
    ``/proc`` figures sampled every ``every_s`` (one that appears counts from its start, one
    that ends counts to its last sample). Background processes shared by every database (WAL
    writer, checkpointer) are left out. Needs the server on this machine; else 0."""

    def __init__(self, every_s: float = 1.0) -> None:
        self.every_s = every_s
        self._first: dict[int, float] = {}
        self._last: dict[int, float] = {}
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None
        self._ours = 0  # the backend of the thread that starts it

    def _sample(self, first: bool) -> None:
        from django.db import connection

        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
                " AND pid <> pg_backend_pid() AND pid <> %s",
                [self._ours],
            )
            pids = [pid for (pid,) in cursor.fetchall()]
        for pid in pids:
            try:
                now = process_cpu_s(pid)
            except (OSError, IndexError, ValueError):
                continue
            self._first.setdefault(pid, now if first else 0.0)
            self._last[pid] = now

    def _run(self) -> None:
        from django.db import connection

        try:
            while not self._stopped.wait(self.every_s):
                self._sample(first=False)
            self._sample(first=False)
        finally:
            connection.close()  # this thread's own

    def start(self) -> None:
        """Take the backends' figures now and sample them until ``stop``."""
        from django.db import connection

        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            (self._ours,) = cursor.fetchone()
        self._run_once_in_thread(first=True)
        self._thread = threading.Thread(target=self._run, name="b4-database-cpu", daemon=True)
        self._thread.start()

    def _run_once_in_thread(self, *, first: bool) -> None:
        from django.db import connection

        def once() -> None:
            try:
                self._sample(first)
            finally:
                connection.close()

        thread = threading.Thread(target=once, name="b4-database-cpu-start")
        thread.start()
        thread.join()

    def stop(self) -> float:
        """Stop sampling (after a last sample); the CPU seconds in between."""
        self._stopped.set()
        if self._thread is not None:
            self._thread.join(30.0)
        return sum(self._last[pid] - self._first[pid] for pid in self._last)


def _bind(
    api: Any, pods: list[Any], setup: Setup, result: RunResult, step: Any, binder_pid: int
) -> None:
    """Create the pods while ``step`` runs the binder, until all are bound; time it, and the
    binder's CPU from the first creation to the last binding seen."""
    watch = BoundWatch(setup.kubeconfig, setup.namespace)
    created: dict[str, float] = {}
    done = threading.Event()
    failure: list[BaseException] = []

    def create() -> None:
        try:
            created.update(
                create_all(api, setup.namespace, pods, setup.creators, keep_alive=setup.keep_alive)
            )
        except BaseException as exc:
            failure.append(exc)
        finally:
            done.set()

    def sample_load() -> None:
        while not stopped.wait(5.0):
            result.load.append(round(os.getloadavg()[0], 2))

    stopped = threading.Event()
    wait_settled(binder_pid)
    database = DatabaseCpu()
    database.start()
    cpu_before = process_cpu_s(binder_pid)
    started = time.monotonic()
    result.started_wall = time.time()
    result.load.append(round(os.getloadavg()[0], 2))
    sampler = threading.Thread(target=sample_load, name="b4-load", daemon=True)
    sampler.start()
    creator = threading.Thread(target=create, name="b4-creators")
    creator.start()
    deadline = started + setup.timeout_s
    try:
        while len(watch.bound_at) < len(pods) and time.monotonic() < deadline and not failure:
            step(done)
        creator.join()
        if failure:
            raise failure[0]
        while len(watch.bound_at) < len(pods) and time.monotonic() < deadline:
            time.sleep(0.05)  # the watch is a moment behind the last binding
        result.binder_window_cpu_s = process_cpu_s(binder_pid) - cpu_before
    finally:
        result.database_window_cpu_s = database.stop()
        stopped.set()
        watch.close()
    result.load.append(round(os.getloadavg()[0], 2))
    bound = sorted(watch.bound_at.values())
    result.bound = len(bound)
    result.seconds = (bound[-1] if bound else time.monotonic()) - started
    result.first_bind_s = (bound[0] - started) if bound else 0.0
    result.create_s = max(created.values(), default=started) - started
    made = sorted(created.values())
    for mark in CURVE_S:
        result.curve[f"{mark:g}"] = (
            bisect.bisect_right(made, started + mark),
            bisect.bisect_right(bound, started + mark),
        )
    if result.qps:
        lost = allowance_lost([b - started for b in bound], result.qps, result.burst)
        result.lost = {f"{mark:g}": lost(mark) for mark in (*CURVE_S, math.inf)}
    result.removed_while_bound = watch.removed
    result.watch_cpu_s = watch.cpu_s
    if result.kind == "gangs":
        _gang_timing(pods, created, watch.bound_at, result)


def allowance_lost(bound: list[float], qps: float, burst: int) -> Any:
    """The client bucket replayed over the bindings (seconds after the first creation, in
    order; each one a token at the time the watch saw it, a little after its request): how
    many seconds of its turns a full bucket had lost by a moment, as a function of it.
    The bucket is full at 0. Where the run's ``unused_allowance_s`` went: lost at the
    start (before the bindings drew the bucket down), in the middle (a stall of the binder
    long enough to fill it again), or not lost but late (the last bindings' own latency)."""
    marks: list[tuple[float, float]] = [(0.0, 0.0)]  # (time, seconds lost by then)
    tokens, last, lost = float(burst), 0.0, 0.0
    for at in bound:
        tokens += (at - last) * qps
        if tokens > burst:
            lost += (tokens - burst) / qps
            tokens = float(burst)
            marks.append((at, lost))
        tokens -= 1.0
        last = at

    def by(moment: float) -> float:
        index = bisect.bisect_right(marks, (moment, math.inf)) - 1
        before_at, before = marks[index]
        following = marks[index + 1] if index + 1 < len(marks) else None
        if following is None or moment <= before_at:
            return before
        # The bucket was full for the last (following - before) seconds up to the next
        # binding, losing a second of turns a second.
        full_from = following[0] - (following[1] - before)
        return before + max(0.0, moment - full_from)

    return by


def _gang_timing(
    pods: list[Any], created: dict[str, float], bound_at: dict[str, float], result: RunResult
) -> None:
    """Count gangs whose first binding came before their last member existed."""
    members: dict[str, list[str]] = {}
    for pod in pods:
        members.setdefault(pod["metadata"]["labels"]["b4-gang"], []).append(pod["metadata"]["name"])
    for names in members.values():
        first_bound = min((bound_at[n] for n in names if n in bound_at), default=None)
        if first_bound is not None and first_bound < max(created.get(n, 0.0) for n in names):
            result.gangs_bound_early += 1


def _check(api: Any, namespace: str, pods: list[Any], result: RunResult) -> None:
    """Every pod's node at the end: all bound, and for gangs every gang whole."""
    nodes = {p["metadata"]["name"]: p["spec"].get("nodeName") for p in pods_now(api, namespace)}
    result.bound = sum(1 for p in pods if nodes.get(p["metadata"]["name"]))
    if result.kind != "gangs":
        return
    gangs: dict[str, list[str | None]] = {}
    for pod in pods:
        gang = pod["metadata"]["labels"]["b4-gang"]
        gangs.setdefault(gang, []).append(nodes.get(pod["metadata"]["name"]))
    result.gangs = len(gangs)
    result.gangs_whole = sum(1 for members in gangs.values() if all(members))


# --- the benchmark ----------------------------------------------------------------------------


def summary(runs: list[RunResult]) -> dict[str, Any]:
    """Medians of a binder's runs, and the runs."""
    return {
        "runs": [r.as_json() for r in runs],
        "median_pods_per_s": round(statistics.median(r.pods_per_s for r in runs), 1),
        "median_seconds": round(statistics.median(r.seconds for r in runs), 3),
    }


def benchmark(
    setup: Setup, runs: int, pods: int, gangs: int, gang_size: int, which: set[str]
) -> dict[str, Any]:
    """B4's runs, alternating binders, and the verdict."""
    single: dict[str, list[RunResult]] = {GPUPOOL: [], KUBE_SCHEDULER: []}
    gang_runs: list[RunResult] = []
    for _ in range(runs):
        for binder in (GPUPOOL, KUBE_SCHEDULER):
            if f"single-{binder}" in which:
                single[binder].append(run_once(binder, "single", pods, 1, setup))
        if "gangs" in which:
            gang_runs.append(run_once(GPUPOOL, "gangs", gangs, gang_size, setup))
    report: dict[str, Any] = {
        "benchmark": "B4",
        "seed": setup.seed,
        "qps": setup.qps,
        "burst": setup.burst,
        "creators": setup.creators,
        "keep_alive": setup.keep_alive,
        "product": setup.product,
        "nodes": count_nodes(setup),
    }
    if single[GPUPOOL] or single[KUBE_SCHEDULER]:
        report["single"] = {b: summary(r) for b, r in single.items() if r}
    if single[GPUPOOL] and single[KUBE_SCHEDULER]:
        ours = report["single"][GPUPOOL]["median_pods_per_s"]
        theirs = report["single"][KUBE_SCHEDULER]["median_pods_per_s"]
        report["single_target_met"] = ours >= theirs
    if gang_runs:
        report["gangs"] = summary(gang_runs)
        report["gangs_all_whole"] = all(
            r.gangs_whole == r.gangs and not r.gangs_bound_early and not r.removed_while_bound
            for r in gang_runs
        )
    return report


def count_nodes(setup: Setup) -> dict[str, int]:
    """The plane's nodes of the pool's product and their GPUs."""
    from kubernetes import client

    api = api_client(setup.kubeconfig, pool=2)
    try:
        answer = client.CoreV1Api(api).list_node(
            label_selector=f"nvidia.com/gpu.product={setup.product}", _preload_content=False
        )
        nodes = json.loads(answer.data)["items"]
    finally:
        api.close()
    gpus = sum(int(n["status"]["allocatable"].get("nvidia.com/gpu", "0")) for n in nodes)
    return {"nodes": len(nodes), "gpus": gpus}


def main(argv: list[str] | None = None) -> int:
    """Entry point: set Django up, run B4, print the report (or, as ``WATCH_CHILD``, be the
    watch process of ``BoundWatch``)."""
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == [WATCH_CHILD] and len(argv) == 3:
        return watch_bound(Path(argv[1]), argv[2])
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kubeconfig", type=Path, default=ROOT / ".k8s" / "kubeconfig")
    parser.add_argument("--runs", type=int, default=3, help="runs of each kind (3)")
    parser.add_argument("--pods", type=int, default=3600, help="one-GPU pods of run 1 (3600)")
    parser.add_argument("--gangs", type=int, default=400, help="gangs of run 2 (400)")
    parser.add_argument("--gang-size", type=int, default=8, help="pods per gang (8)")
    parser.add_argument("--qps", type=float, default=100.0, help="client QPS of both (100)")
    parser.add_argument("--burst", type=int, default=200, help="client burst of both (200)")
    parser.add_argument("--creators", type=int, default=8, help="pod-creating threads (8)")
    parser.add_argument(
        "--keep-alive",
        action="store_true",
        help="creators reuse their connections (a controller's client) instead of one TLS "
        "connection a pod (kubectl's)",
    )
    parser.add_argument("--seed", type=int, default=4, help="creation order seed (4)")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per run (900)")
    parser.add_argument(
        "--only",
        default="single-gpupool,single-kube-scheduler,gangs",
        help="comma-separated subset of single-gpupool, single-kube-scheduler, gangs",
    )
    parser.add_argument("--json", action="store_true", help="print JSON (default: a summary)")
    parser.add_argument(
        "--cycle-log", action="store_true", help="each gpupool cycle's phases and counts too"
    )
    parser.add_argument(
        "--profile-loop",
        type=Path,
        help="cProfile the gpupool loop's process into this file (slows it: not for figures)",
    )
    parser.add_argument(
        "--loop-interval",
        type=float,
        help="the gpupool loop's --interval (default: its settings; 0: cycles back to back)",
    )
    args = parser.parse_args(argv)

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gpupool.settings")
    import django

    django.setup()
    from django.core.management import call_command

    from gpupool.workloads.models import Workload

    call_command("migrate", verbosity=0)
    if Workload.objects.exists():
        print("b4: the database has workloads; use an empty one", file=sys.stderr)
        return 2
    setup = Setup(
        kubeconfig=args.kubeconfig.resolve(),
        qps=args.qps,
        burst=args.burst,
        creators=args.creators,
        keep_alive=args.keep_alive,
        seed=args.seed,
        timeout_s=args.timeout,
        cycle_log=args.cycle_log,
        profile_loop=None if args.profile_loop is None else args.profile_loop.resolve(),
        loop_interval=args.loop_interval,
    )
    which = {w.strip() for w in args.only.split(",") if w.strip()}
    report = benchmark(setup, args.runs, args.pods, args.gangs, args.gang_size, which)
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    for binder, figures in report.get("single", {}).items():
        print(f"single {binder}: median {figures['median_pods_per_s']} pods/s "
              f"({[r['pods_per_s'] for r in figures['runs']]})")  # fmt: skip
    if "gangs" in report:
        print(f"gangs gpupool: median {report['gangs']['median_pods_per_s']} pods/s, "
              f"all whole: {report['gangs_all_whole']}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
