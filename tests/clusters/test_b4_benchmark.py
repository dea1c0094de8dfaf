"""Benchmark B4 (benchmarks/b4_binding.py) at a small scale on the session's plane: gpupool and
kube-scheduler each bind the same one-GPU pods, and gpupool binds gangs whole."""

from __future__ import annotations

import importlib.util
import secrets
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

pytestmark = [pytest.mark.k8s, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

ROOT = Path(__file__).resolve().parents[2]


def b4_module() -> ModuleType:
    """The benchmark script, imported from its file (benchmarks/ is not a package)."""
    spec = importlib.util.spec_from_file_location(
        "b4_binding", ROOT / "benchmarks" / "b4_binding.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_b4_binds_every_pod_with_both_binders_and_every_gang_whole(
    k8s_plane_info: Any, k8s_namespace: str, k8s_fake_node: Callable[..., str]
) -> None:
    from django.db import connection

    if connection.vendor != "postgresql":
        pytest.skip("gpupool's loop runs in a process of its own: it needs a server database")
    b4 = b4_module()
    product = f"NVIDIA-B4-{secrets.token_hex(3).upper()}"
    for _ in range(3):  # 24 GPUs of a product no other test uses
        k8s_fake_node(gpus=8, product=product)
    setup = b4.Setup(
        kubeconfig=Path(k8s_plane_info.kubeconfig),
        namespace=k8s_namespace,
        product=product,
        qps=50.0,
        burst=100,
        creators=4,
        seed=1,
        timeout_s=180.0,
        kube_scheduler_name=f"b4-{secrets.token_hex(3)}",  # beside the plane's own scheduler
    )
    report = b4.benchmark(setup, 1, 16, 2, 8, {"single-gpupool", "single-kube-scheduler", "gangs"})

    assert report["nodes"] == {"nodes": 3, "gpus": 24}
    for binder in ("gpupool", "kube-scheduler"):
        (run,) = report["single"][binder]["runs"]
        assert (run["pods"], run["bound"], run["removed_while_bound"]) == (16, 16, 0)
        assert 0 < run["first_bind_s"] <= run["seconds"] and run["pods_per_s"] > 0
        assert run["binder_cpu_s"] > 0  # the binder's own process, waited for
        # 16 requests fit the burst of 100: every second of the run is allowance unused.
        assert run["unused_allowance_s"] == run["seconds"]
        curve = run["created_and_bound_by_s"]
        for what in (0, 1):  # created, bound: counts that only grow, all 16 within 180 s
            counts = [curve[mark][what] for mark in sorted(curve, key=float)]
            assert counts == sorted(counts) and counts[-1] <= 16
        assert curve["30"][0] == 16 or run["create_s"] > 30
    # The database's side: the PostgreSQL backends serving gpupool's loop worked in the
    # window (tens of milliseconds here); kube-scheduler keeps no database.
    (ours,) = report["single"]["gpupool"]["runs"]
    assert ours["database_window_cpu_s"] > 0
    assert ours["binder_and_database_window_cpu_ms_per_pod"] > ours["binder_window_cpu_ms_per_pod"]
    assert report["single"]["kube-scheduler"]["runs"][0]["database_window_cpu_s"] == 0
    (gangs,) = report["gangs"]["runs"]
    assert (gangs["gangs"], gangs["gangs_whole"], gangs["bound"]) == (2, 2, 16)
    assert gangs["gangs_bound_before_complete"] == 0 and gangs["bind_errors"] == 0
    assert report["gangs_all_whole"] is True
    assert isinstance(report["single_target_met"], bool)  # both binders ran: a verdict


@pytest.mark.parametrize(("keep_alive", "most_connections"), [(False, 12), (True, 3)])
def test_creators_reuse_their_connections_only_with_keep_alive(
    k8s_plane_info: Any, k8s_namespace: str, keep_alive: bool, most_connections: int
) -> None:
    """By default each creation is a new TLS connection (``kubectl create``'s: the answer is
    not read); with ``--keep-alive`` each creator's connection serves its next creation, as a
    controller's client does (on a 2-core machine the handshakes held the creators below the
    client limit, and B4 then measured creation)."""
    b4 = b4_module()
    setup = b4.Setup(
        kubeconfig=Path(k8s_plane_info.kubeconfig),
        namespace=k8s_namespace,
        kube_scheduler_name=f"b4-none-{secrets.token_hex(3)}",  # no scheduler takes them
    )
    api = b4.api_client(setup.kubeconfig, pool=8)
    pods = [b4.pod_manifest(f"b4-keep-{i}", "kube-scheduler", setup) for i in range(12)]
    created = b4.create_all(api, k8s_namespace, pods, 3, keep_alive=keep_alive)

    assert sorted(created) == sorted(p["metadata"]["name"] for p in pods)
    # The client's pool for the API server (the one its requests went through).
    pool = api.rest_client.pool_manager.connection_from_url(api.configuration.host)
    opened = pool.num_connections
    if keep_alive:
        assert 1 <= opened <= most_connections  # one per creator at most
    else:
        assert opened == most_connections  # one per pod


def test_the_bound_watch_stamps_in_a_process_of_its_own_and_counts_removals(
    k8s_plane_info: Any, k8s_namespace: str, k8s_fake_node: Callable[..., str]
) -> None:
    """The watch that times the bindings runs in a process of its own (in the benchmark's
    process the creating threads delayed its stamps by up to 0.17 s): each pod bound after it
    started is stamped once, on the machine's monotonic clock, between its binding's request
    and answer (a pod bound before is not this run's); a bound pod deleted counts as removed;
    and closing it leaves no process behind."""
    from kubernetes import client

    b4 = b4_module()
    node = k8s_fake_node(gpus=8)
    setup = b4.Setup(
        kubeconfig=Path(k8s_plane_info.kubeconfig),
        namespace=k8s_namespace,
        kube_scheduler_name=f"b4-none-{secrets.token_hex(3)}",  # no scheduler takes them
    )
    api = b4.api_client(setup.kubeconfig, pool=4)
    core = client.CoreV1Api(api)
    pods = [b4.pod_manifest(f"b4-watch-{i}", "kube-scheduler", setup) for i in range(4)]
    b4.create_all(api, k8s_namespace, pods, 1, keep_alive=True)
    names = [pod["metadata"]["name"] for pod in pods]

    def bind(name: str) -> tuple[float, float]:
        asked = time.monotonic()
        core.create_namespaced_pod_binding(
            name,
            k8s_namespace,
            {
                "apiVersion": "v1",
                "kind": "Binding",
                "metadata": {"name": name},
                "target": {"apiVersion": "v1", "kind": "Node", "name": node},
            },
            _preload_content=False,
        ).read()
        return asked, time.monotonic()

    bind(names[3])  # before the watch: not stamped
    watch = b4.BoundWatch(setup.kubeconfig, k8s_namespace)
    try:
        answered = {name: bind(name) for name in names[:2]}  # names[2] stays unbound
        core.delete_namespaced_pod(names[0], k8s_namespace, grace_period_seconds=0)
        deadline = time.monotonic() + 30
        while (len(watch.bound_at) < 2 or watch.removed < 1) and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        watch.close()

    assert sorted(watch.bound_at) == sorted(answered)
    for name, (asked, answer) in answered.items():
        assert asked <= watch.bound_at[name] <= answer + 5.0  # this process's clock
    assert watch.removed == 1
    assert watch._process.poll() is not None  # no watch process left running
    assert watch.cpu_s > 0  # its CPU, counted when it was waited for
