"""Benchmark B1-loop: a whole control-loop cycle on B1's pool, held by the simulated cluster.

``BENCHMARKS.md``: the B1 pool (``simulation.scale_pool``: 5,000 nodes, 20,000 running and
10,000 pending workloads) in the database (PostgreSQL) and on the simulated cluster
(``gpupool.clusters.simulated``, a virtual clock at the pool's time), then:

- **the first cycle** of a fresh loop (it syncs 30,000 pods, plans, records about 4,800
  admissions and 300 evictions, binds and evicts), ``runs`` times; the loop's warm-up
  before it (the whole pool read and the cluster's first list, before the cycle lock is
  taken: ``ControlLoop._warm_up``) is timed apart (``warm_s``), not in ``median_s``; every
  run but the last is rolled back (an outer transaction) and runs on a cluster built afresh,
  so each starts from the same state. ``median_s`` is their median;
- **steady state**: ``steady`` more cycles of the loop that ran last, each after the clock
  moved ``STEP_S`` (about 1% of the workloads finish: their pods succeed) and as many new
  workloads were submitted (``do_submit_workload``). ``steady_overhead_s`` is the median of
  each cycle's time less its ``plan()`` time: the loop's own work (sync, snapshot, record,
  apply), the core's cost being B1's.

The database must be empty (``do_load_pool`` refuses otherwise): run it on a database of its
own, e.g. ``DATABASE_URL=postgres://.../gpupool_bench python manage.py migrate`` first.
"""

from __future__ import annotations

import importlib
import random
import statistics
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, cast

from django.db import transaction

from gpupool.cli.subcommands.bench import peak_rss_mib, yardstick_s
from gpupool.clusters.base import ClusterBackend, NewPod, PodBinding, PodRef
from gpupool.clusters.grouping import WorkloadKey
from gpupool.control.actions import do_load_pool
from gpupool.control.apply import PodSetRun, WorkloadRun, new_pods
from gpupool.control.loop import PHASES, ControlLoop, CycleResult
from gpupool.quotas.models import PriorityClass, Queue
from gpupool.scheduler import NATIVE
from gpupool.scheduler.types import MILLI, Snapshot, WorkloadInfo
from gpupool.simulation.scale_pool import synthetic_snapshot
from gpupool.workloads.actions import PodSetSpec, do_submit_workload

STEP_S = 600.0  # simulated time between steady cycles: about 1% of the work ends
PRODUCT = {"h100": "NVIDIA-H100-80GB-HBM3", "gb200": "NVIDIA-GB200"}


def node_labels() -> dict[str, dict[str, str]]:
    """The labels that pick each flavor's nodes, as GPU feature discovery sets them."""
    return {flavor: {"nvidia.com/gpu.product": product} for flavor, product in PRODUCT.items()}


def _moment(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, tz=UTC)


def _run_of(workload: WorkloadInfo, namespace: str) -> WorkloadRun:
    """A workload of the pool as the loop creates its pods (``apply.new_pods``)."""
    return WorkloadRun(
        key=WorkloadKey(namespace, workload.name.split("/")[-1]),
        queue=workload.queue,
        priority_class=workload.priority_class,
        min_member=workload.min_member,
        topology=workload.topology or "",
        protected_runtime_s=round(workload.protected_runtime_s),
        expected_runtime_s=None
        if workload.expected_runtime_s is None
        else round(workload.expected_runtime_s),
        pod_sets=tuple(
            PodSetRun(
                name=f"set-{index}",
                count=spec.count,
                image="registry.k8s.io/pause:3.10",
                command=(),
                env={},
                gpu_resource="nvidia.com/gpu",
                gpus=spec.gpus,
                gpu_milli=None if spec.gpu_milli == MILLI else spec.gpu_milli,
                cpu_milli=spec.cpu_milli,
                memory_mib=spec.memory_mib,
            )
            for index, spec in enumerate(workload.pod_sets)
        ),
    )


def node_manifests(snapshot: Snapshot) -> list[dict[str, Any]]:
    """The pool's nodes as the Node objects of the cluster (``node_profiles``)."""
    gpu_node_manifest = importlib.import_module("gpupool.clusters.node_profiles").gpu_node_manifest
    manifests = []
    for node in snapshot.nodes:
        group = {
            "gpus": node.gpus,
            "product": PRODUCT[node.flavor],
            "cpu": str(node.cpu_milli // MILLI),
            "memory": f"{node.memory_mib}Mi",
        }
        clique = None if node.domain == node.name else node.domain
        manifests.append(dict(gpu_node_manifest(node.name, group, clique=clique)))
    return manifests


def simulated_cluster(
    snapshot: Snapshot, now: float, manifests: list[dict[str, Any]]
) -> ClusterBackend:
    """The pool's nodes and pods on a simulated cluster at ``now``: running pods bound to
    their placements' nodes (so they run), pending pods waiting."""
    pod_manifest = importlib.import_module("gpupool.clusters.api_objects").pod_manifest
    simulated = importlib.import_module("gpupool.clusters.simulated")
    virtual_clock, simulated_pool = simulated.VirtualClock, simulated.simulated_pool
    backend = simulated_pool(manifests, virtual_clock(now))
    cluster = backend.cluster
    tenant_of = {q.name: q.tenant or "default" for q in snapshot.queues}
    gangs: dict[str, list[PodBinding]] = {}
    for workload in snapshot.workloads:
        run = _run_of(workload, tenant_of[workload.queue])
        pods: list[NewPod] = new_pods(run, ())
        refs: list[PodRef] = [cluster.add_pod(pod_manifest(pod)) for pod in pods]
        if workload.state == "running":
            gangs[workload.name] = [
                PodBinding(ref, placed.node)
                for ref, placed in zip(refs, workload.placement, strict=False)
            ]
    for name, outcome in backend.bind_many(gangs).items():
        if not outcome.ok:
            raise RuntimeError(f"cannot run {name} on the simulated cluster: {outcome.error}")
    return cast(ClusterBackend, backend)


def _submit(rng: random.Random, count: int, at: datetime) -> None:
    """``count`` new one-to-eight GPU workloads in random leaf queues (through the action)."""
    leaves = list(Queue.objects.filter(name__startswith="q-").select_related("tenant"))
    normal = PriorityClass.objects.get(default=True)
    from gpupool.inventory.models import Flavor

    h100 = Flavor.objects.get(name="h100")
    for index in range(count):
        queue = rng.choice(leaves)
        gpus = rng.choice((1, 1, 1, 2, 4, 8))
        do_submit_workload(
            f"new-{at.timestamp():.0f}-{index:04d}",
            queue=queue,
            pod_sets=[PodSetSpec(1, gpus=gpus, flavor=h100, cpu=16 * gpus, memory_gb=128 * gpus)],
            priority_class=normal,
            expected_runtime_s=rng.randint(3600, 86400),
            at=at,
        )


class _Rollback(Exception):
    """Leaves an outer transaction, undone."""


def bench_loop(nodes: int, runs: int, steady: int, seed: int) -> dict[str, Any]:
    """Load the pool, time first cycles and steady cycles; B1-loop's figures."""
    yardstick_before = yardstick_s()
    snapshot, policy, now = synthetic_snapshot(nodes, seed)
    started = time.perf_counter()
    manifests = node_manifests(snapshot)
    loaded = do_load_pool(
        snapshot,
        at=_moment(now),
        node_labels=node_labels(),
        labels_of_node={m["metadata"]["name"]: m["metadata"]["labels"] for m in manifests},
    )
    load_s = time.perf_counter() - started
    first: list[CycleResult] = []
    first_cpu: list[float] = []
    steady_cpu: list[float] = []
    loop: ControlLoop | None = None
    for run in range(runs):
        backend = simulated_cluster(snapshot, now, manifests)
        loop = ControlLoop(backend, policy=policy)
        if run < runs - 1:
            try:
                with transaction.atomic():
                    first.append(_checked(_timed(loop, first_cpu)))
                    raise _Rollback
            except _Rollback:
                pass
            loop.close()
        else:
            first.append(_checked(_timed(loop, first_cpu)))
    assert loop is not None
    rng = random.Random(seed)
    steady_runs: list[CycleResult] = []
    clock = loop.backend.cluster.clock  # type: ignore[attr-defined]
    workloads = len(snapshot.workloads)
    for _ in range(steady):
        clock.advance(STEP_S)
        _submit(rng, max(workloads // 200, 1), _moment(clock.now()))
        steady_runs.append(_checked(_timed(loop, steady_cpu)))
    loop.close()
    totals = [_phases_s(r) for r in first]
    overhead = [_phases_s(r) - r.timings.get("plan", 0.0) for r in steady_runs]
    median_phases = {
        phase: round(statistics.median(r.timings.get(phase, 0.0) for r in first), 4)
        for phase in PHASES
    }
    return {
        "benchmark": "B1-loop",
        "seed": seed,
        "nodes": loaded["nodes"],
        "workloads": loaded["workloads"],
        "running": sum(1 for w in snapshot.workloads if w.state == "running"),
        "pending": sum(1 for w in snapshot.workloads if w.state == "pending"),
        "admitted_first": first[-1].counts.get("admitted", 0),
        "evicted_first": first[-1].counts.get("evicted", 0),
        "median_s": round(statistics.median(totals), 4),
        "runs_s": [round(t, 4) for t in totals],
        # The warm-up before each first cycle's lock (``ControlLoop._warm_up``: the state's
        # full read and the cluster's first list), not in the cycle's phases.
        "warm_s": [round(r.timings.get("warm", 0.0), 4) for r in first],
        "cpu_s": [round(t, 3) for t in first_cpu],
        "phases_s": median_phases,
        "steady_overhead_s": round(statistics.median(overhead), 4) if overhead else None,
        "steady_runs_s": [round(t, 4) for t in overhead],
        "steady_cycle_cpu_s": [round(t, 3) for t in steady_cpu],
        # The utilisation read after apply (not a phase: once a minute in the product, at
        # every steady cycle here, whose cycles are ``STEP_S`` of cluster time apart).
        "utilization_first_s": [round(r.timings.get("utilization", 0.0), 4) for r in first],
        "steady_utilization_s": [round(r.timings.get("utilization", 0.0), 4) for r in steady_runs],
        "steady_explained": [r.counts.get("explained", 0) for r in steady_runs],
        "steady_ranked": [r.counts.get("ranked", 0) for r in steady_runs],
        # Workload rows the state read back from the database, and changed rows it held already
        # (the loop's own writes: ``LoopState.held``), per steady cycle.
        "steady_rows_reread": [r.counts.get("rows_reread", 0) for r in steady_runs],
        "steady_rows_held": [r.counts.get("rows_held", 0) for r in steady_runs],
        "steady_phases_s": {
            phase: round(statistics.median(r.timings.get(phase, 0.0) for r in steady_runs), 4)
            for phase in PHASES
        }
        if steady_runs
        else {},
        "steady_changes": {
            "finished_and_new_per_cycle": round(
                statistics.median(r.counts.get("sync_writes", 0) for r in steady_runs), 1
            )
            if steady_runs
            else 0,
        },
        "load_s": round(load_s, 2),
        "peak_rss_mib": round(peak_rss_mib(), 1),
        # The machine's speed before the pool was loaded and after the last cycle
        # (``yardstick_s``): compare runs of different days by it.
        "yardstick_s": [yardstick_before, yardstick_s()],
        "native_core": NATIVE,
    }


def _phases_s(result: CycleResult) -> float:
    """The cycle's time in its phases (sync, snapshot, plan, record, apply)."""
    return sum(result.timings.get(phase, 0.0) for phase in PHASES)


def _timed(loop: ControlLoop, cpu: list[float]) -> CycleResult:
    """One cycle; the loop process's CPU seconds for it go into ``cpu`` (on a shared host
    the wall clock also counts other processes' turns; PostgreSQL's own CPU is not in it)."""
    started = time.process_time()
    result = loop.run_cycle()
    cpu.append(time.process_time() - started)
    return result


def _checked(result: CycleResult) -> CycleResult:
    if result.status != "succeeded":
        raise RuntimeError(f"a benchmark cycle did not succeed: {result.error}")
    return result


def figures_line(figures: Mapping[str, Any]) -> str:
    """A one-line summary of the figures."""
    return (
        f"B1-loop: {figures['nodes']} nodes, {figures['workloads']} workloads: first cycle "
        f"median {figures['median_s']} s {figures['phases_s']}, steady overhead "
        f"{figures['steady_overhead_s']} s, peak RSS {figures['peak_rss_mib']} MiB"
    )
