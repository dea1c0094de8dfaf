"""Who holds each GPU, read off the core's snapshot (pure: no database)."""

from __future__ import annotations

from gpupool.dashboard.heatmap import (
    BROKEN,
    CORDONED,
    FREE,
    cell_reasons,
    describe,
    domain_summaries,
    gpu_rows,
    tenants_in,
)
from gpupool.scheduler.types import (
    NodeInfo,
    PodPlacement,
    PodSetInfo,
    QueueInfo,
    Snapshot,
    WorkloadInfo,
)


def node(name: str, gpus: int = 4, domain: str = "", **fields: object) -> NodeInfo:
    """A node of ``gpus`` GPUs, its own domain unless told."""
    return NodeInfo(name, "h100", gpus, 1000, 1024, domain or name, **fields)  # type: ignore[arg-type]


def workload(name: str, queue: str, *pods: PodPlacement, state: str = "running") -> WorkloadInfo:
    """A workload of ``queue`` placed as ``pods``."""
    return WorkloadInfo(
        name,
        queue,
        "normal",
        (PodSetInfo(len(pods), 1, ("h100",)),),
        0.0,
        state=state,  # type: ignore[arg-type]
        placement=pods,
    )


QUEUES = (QueueInfo("root", None), QueueInfo("nlp", "root", "nlp"), QueueInfo("misc", "root"))


def snapshot(nodes: tuple[NodeInfo, ...], *workloads: WorkloadInfo) -> Snapshot:
    """A snapshot of the nodes and workloads under nlp's and misc's queues."""
    return Snapshot((), nodes, QUEUES, (), workloads)


def test_a_gpu_is_held_by_its_workloads_tenant_or_free_broken_or_cordoned() -> None:
    rows = gpu_rows(
        snapshot(
            (node("b"), node("a", unhealthy_gpus=frozenset({1})), node("c", cordoned=True)),
            workload("w", "nlp", PodPlacement("a", (0,))),
            workload("p", "nlp", PodPlacement("a", (2,)), state="pending"),
        )
    )
    assert [row.node for row in rows] == ["a", "b", "c"]
    assert [cell.category for cell in rows[0].cells] == ["nlp", BROKEN, FREE, FREE]
    assert {cell.category for cell in rows[2].cells} == {CORDONED}


def test_a_shared_gpu_goes_to_the_tenant_holding_most_of_it() -> None:
    rows = gpu_rows(
        snapshot(
            (node("a", gpus=1),),
            workload("x", "misc", PodPlacement("a", (0,), milli=600)),
            workload("y", "nlp", PodPlacement("a", (0,), milli=300)),
        )
    )
    (cell,) = rows[0].cells
    assert cell.holders == (("misc", 600), ("nlp", 300))
    assert cell.category == "misc"  # a queue without a tenant stands for itself
    assert describe(rows[0], cell) == (
        "a GPU 0 (domain a): misc 0.6 GPUs, nlp 0.3 GPUs, 0.1 GPUs free"
    )
    assert tenants_in(rows) == ["misc", "nlp"]


def test_domains_sum_their_nodes_gpus_by_state_and_tenant() -> None:
    rows = gpu_rows(
        snapshot(
            (node("r1", domain="nvl"), node("r2", domain="nvl", unhealthy_gpus=frozenset({0}))),
            workload("w", "nlp", PodPlacement("r1", (0, 1)), PodPlacement("r2", (1, 2))),
        )
    )
    (summary,) = domain_summaries(rows)
    assert (summary.domain, summary.nodes, summary.gpus) == ("nvl", 2, 8)
    assert (summary.free, summary.broken, summary.cordoned) == (3, 1, 0)
    assert summary.by_tenant == {"nlp": 4.0}


def test_a_broken_card_takes_its_mig_instances_with_it_in_the_words() -> None:
    mig = node("m", gpus=4, physical_gpus=2, unhealthy_gpus=frozenset({2, 3}))
    rows = gpu_rows(snapshot((mig,)))
    assert rows[0].cells_per_gpu == 2
    reasons = cell_reasons(rows, [("m", 1, "XID 79")])
    assert reasons == {"m": {2: "XID 79", 3: "XID 79"}}
    described = describe(rows[0], rows[0].cells[3], reasons)
    assert described == "m MIG instance 3 of GPU 1 (domain m): broken: XID 79"
