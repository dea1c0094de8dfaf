"""The seeded synthetic pool of benchmark B1 (`docs/benchmarks.md`), built as a snapshot.

It builds the core's input and decides nothing, so it lives beside the simulators rather than
in the decision core: ``manage.py gpupool bench cycle`` and the core's tests call it.

At ``nodes=5000``: 4,000 HGX ``h100`` nodes (8 GPUs, one NVLink domain each, 192 CPU,
2048 GiB) and 1,000 ``gb200`` nodes (4 GPUs, NVLink domains of 18 nodes, 144 CPU, 960 GiB);
200 leaf queues under 20 orgs, deserved shares summing to capacity and capability twice
that; three priority classes; 20,000 running workloads on about 82% of the GPUs and 10,000
pending ones, both scaled with ``nodes``.

Pods ask CPU and memory in proportion to their GPUs (16 cores and 128 GiB per ``h100`` GPU,
32 cores and 192 GiB per ``gb200`` GPU): the benchmark does not specify them, and this keeps
them from being the binding resource.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from gpupool.scheduler.scenario import parse_time
from gpupool.scheduler.types import (
    MIB_PER_GB,
    MILLI,
    SECONDS_PER_HOUR,
    BudgetInfo,
    FlavorInfo,
    NodeInfo,
    PodPlacement,
    PodSetInfo,
    PolicyInfo,
    PriorityClassInfo,
    QueueInfo,
    QuotaInfo,
    Snapshot,
    Topology,
    WorkloadInfo,
)

NOW = parse_time("2026-11-29T10:00:00Z")
HOUR = SECONDS_PER_HOUR
ORGS = 20
LEAVES_PER_ORG = 10
# (flavor, GPUs per node, CPU, memory GiB, node share, CPU per GPU, GiB per GPU, domain size)
FLAVORS = (
    ("h100", 8, 192, 2048, 0.8, 16, 128, 1),
    ("gb200", 4, 144, 960, 0.2, 32, 192, 18),
)
RUNNING_SIZES = ((1, 0.82), (2, 0.10), (4, 0.05), (8, 0.027), (16, 0.003))
PENDING_SIZES = ((1, 0.70), (2, 0.08), (4, 0.08), (8, 0.09), (0, 0.05))  # 0: 16..64
CLASSES = (
    PriorityClassInfo("normal", 0, default=True),
    PriorityClassInfo("interactive", 500, preemption_policy="Never"),
    PriorityClassInfo("high", 1000, budget_rate=1.0),
)
CLASS_WEIGHTS = (0.7, 0.2, 0.1)


def _choose(rng: random.Random, table: Sequence[tuple[int, float]]) -> int:
    return rng.choices([size for size, _ in table], weights=[w for _, w in table])[0]


def _nodes(count: int) -> list[NodeInfo]:
    nodes: list[NodeInfo] = []
    h100 = round(count * FLAVORS[0][4])
    for flavor, gpus, cpu, memory, _, _, _, domain_size in FLAVORS:
        n = h100 if flavor == "h100" else count - h100
        for i in range(n):
            name = f"{flavor}-{i:05d}"
            domain = name if domain_size == 1 else f"{flavor}-nvl-{i // domain_size:04d}"
            nodes.append(NodeInfo(name, flavor, gpus, cpu * MILLI, memory * MIB_PER_GB, domain))
    return nodes


def _queues(rng: random.Random, capacity: dict[str, int]) -> list[QueueInfo]:
    leaves = ORGS * LEAVES_PER_ORG
    weights = [rng.uniform(0.5, 1.5) for _ in range(leaves)]
    total = sum(weights)
    deserved: dict[str, list[int]] = {}
    for flavor, gpus in capacity.items():
        shares = [int(gpus * w / total) for w in weights]
        for i in range(gpus - sum(shares)):
            shares[i % leaves] += 1
        deserved[flavor] = shares
    queues = [QueueInfo("root", None)]
    for org in range(ORGS):
        org_name = f"org-{org:02d}"
        members = range(org * LEAVES_PER_ORG, (org + 1) * LEAVES_PER_ORG)
        org_quota = {}
        for flavor in capacity:
            d = sum(deserved[flavor][i] for i in members)
            g = sum(deserved[flavor][i] // 4 for i in members)
            org_quota[flavor] = QuotaInfo(g * MILLI, d * MILLI, 2 * d * MILLI)
        queues.append(QueueInfo(org_name, "root", tenant=org_name, quota=org_quota))
        for i in members:
            quota = {
                flavor: QuotaInfo(
                    deserved[flavor][i] // 4 * MILLI,
                    deserved[flavor][i] * MILLI,
                    2 * deserved[flavor][i] * MILLI,
                )
                for flavor in capacity
            }
            queues.append(QueueInfo(f"q-{i:03d}", org_name, tenant=f"t-{i:03d}", quota=quota))
    return queues


def _pods(flavor: str, size: int) -> tuple[int, int]:
    """(pods, GPUs per pod) for a workload of ``size`` GPUs on the flavor."""
    per_node = 8 if flavor == "h100" else 4
    if size <= per_node:
        return 1, size
    return size // per_node, per_node


def _pod_set(flavor: str, size: int) -> PodSetInfo:
    spec = next(f for f in FLAVORS if f[0] == flavor)
    count, gpus = _pods(flavor, size)
    return PodSetInfo(
        count=count,
        gpus=gpus,
        flavors=(flavor,),
        cpu_milli=gpus * spec[5] * MILLI,
        memory_mib=gpus * spec[6] * MIB_PER_GB,
    )


def _place_running(
    rng: random.Random, flavor: str, size: int, candidates: list[str], free: dict[str, list[int]]
) -> tuple[PodPlacement, ...] | None:
    """Random nodes with room for each pod (first fit after 64 misses); None if it cannot."""
    count, gpus = _pods(flavor, size)
    placement: list[PodPlacement] = []
    for _ in range(count):
        for _attempt in range(64):
            name = candidates[rng.randrange(len(candidates))]
            if len(free[name]) >= gpus:
                break
        else:
            name = next((n for n in candidates if len(free[n]) >= gpus), "")
        if not name:
            for pod in placement:  # give back what this workload took
                free[pod.node] = sorted(free[pod.node] + list(pod.gpus))
            return None
        taken, free[name] = free[name][:gpus], free[name][gpus:]
        placement.append(PodPlacement(name, tuple(taken)))
    return tuple(placement)


def synthetic_snapshot(nodes: int = 5000, seed: int = 7) -> tuple[Snapshot, PolicyInfo, float]:
    """The B1 snapshot for ``nodes`` nodes (running and pending scale alike), and its time."""
    rng = random.Random(seed)
    scale = nodes / 5000
    node_list = _nodes(nodes)
    capacity: dict[str, int] = {}
    for node in node_list:
        capacity[node.flavor] = capacity.get(node.flavor, 0) + node.gpus
    queues = _queues(rng, capacity)
    leaves = [q for q in queues if q.name.startswith("q-")]
    leaf_weights = {flavor: [q.quota[flavor].deserved + 1 for q in leaves] for flavor in capacity}
    free: dict[str, list[int]] = {n.name: list(range(n.gpus)) for n in node_list}
    by_flavor = {f: [n.name for n in node_list if n.flavor == f] for f in capacity}
    workloads: list[WorkloadInfo] = []

    def common(flavor: str) -> tuple[str, str, float]:
        queue = rng.choices(leaves, weights=leaf_weights[flavor])[0].name
        klass = rng.choices(CLASSES, weights=CLASS_WEIGHTS)[0].name
        protected = rng.uniform(1, 4) * HOUR if rng.random() < 0.3 else 0.0
        return queue, klass, protected

    sizes = []
    for _ in range(round(20000 * scale)):
        flavor = "h100" if rng.random() < 0.8 else "gb200"
        sizes.append((_choose(rng, RUNNING_SIZES), flavor))
    sizes.sort(key=lambda item: -item[0])
    for index, (size, wanted) in enumerate(sizes):
        # gb200 holds a ninth of the GPUs but a fifth of the workloads: once it is full, the
        # rest run on h100, so the pool still holds 20,000 workloads on ~82% of its GPUs.
        placement = None
        for flavor in (wanted, "h100"):
            placement = _place_running(rng, flavor, size, by_flavor[flavor], free)
            if placement is not None:
                break
        if placement is None:
            continue
        queue, klass, protected = common(flavor)
        started = NOW - rng.uniform(0, 8) * HOUR
        workloads.append(
            WorkloadInfo(
                name=f"run-{index:06d}",
                queue=queue,
                priority_class=klass,
                pod_sets=(_pod_set(flavor, size),),
                submitted_at=started - rng.uniform(0, 2) * HOUR,
                state="running",
                protected_runtime_s=protected,
                expected_runtime_s=rng.uniform(1, 24) * HOUR,
                started_at=started,
                placement=tuple(placement),
            )
        )
    for index in range(round(10000 * scale)):
        flavor = "h100" if rng.random() < 0.8 else "gb200"
        size = _choose(rng, PENDING_SIZES) or 8 * rng.randint(2, 8)
        queue, klass, protected = common(flavor)
        topology: Topology | None = "domain" if rng.random() < 0.1 else None
        workloads.append(
            WorkloadInfo(
                name=f"pend-{index:06d}",
                queue=queue,
                priority_class=klass,
                pod_sets=(_pod_set(flavor, size),),
                submitted_at=NOW - rng.uniform(0, 24) * HOUR,
                topology=topology,
                protected_runtime_s=protected,
                expected_runtime_s=rng.uniform(1, 24) * HOUR,
            )
        )
    budgets = tuple(BudgetInfo(q.tenant or q.name, "high", 500.0) for q in leaves)
    snapshot = Snapshot(
        flavors=(
            FlavorInfo("h100", gpu_memory_gb=80, hourly_price=2.5),
            FlavorInfo("gb200", gpu_memory_gb=192, hourly_price=6.0),
        ),
        nodes=tuple(node_list),
        queues=tuple(queues),
        priority_classes=CLASSES,
        workloads=tuple(workloads),
        budgets=budgets,
    )
    return snapshot, PolicyInfo(), NOW
