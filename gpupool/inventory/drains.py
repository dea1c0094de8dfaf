"""What a draining node waits on: the workloads still placed there whose eviction a
PodDisruptionBudget refused (``Workload.eviction_refusal``, while it runs and the refusal is
current), and how many others are still being evicted. A refused workload keeps running and
the control loop asks again after the refusal's back-off (``loop.REFUSAL_BACKOFF_S``), so a
node whose every workload was refused is not "being evicted": its words say so
(``drain_words``, a draining node's reason in ``Node.health_reasons``; the nodes API,
``gpupool nodes`` and the Cluster page read them)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

from gpupool.workloads.choices import PLACED_STATES, WorkloadState
from gpupool.workloads.models import Placement, Workload

# What the loop does after a refusal, in the workload page's words (its "eviction refused").
ASKS_AGAIN = "gpupool asks again after the refusal's back-off"


@dataclass(slots=True)
class DrainWait:
    """A draining node's placed workloads: those whose eviction a budget refused (as rows
    with ``namespace``, ``name``, ``state`` and ``eviction_refusal``, by name) and how many
    others are still being evicted."""

    refused: list[Workload] = field(default_factory=list)
    others: int = 0


def drain_waits(node_ids: Iterable[int]) -> dict[int, DrainWait]:
    """Per node id (each of ``node_ids``), its ``DrainWait``: one query for them all."""
    wanted = sorted(set(node_ids))
    waits = {pk: DrainWait() for pk in wanted}
    if not wanted:
        return waits
    on_nodes: dict[int, set[int]] = defaultdict(set)
    for node_id, workload_id in (
        Placement.objects.filter(node_id__in=wanted, workload__state__in=PLACED_STATES)
        .order_by()
        .values_list("node_id", "workload_id")
    ):
        on_nodes[node_id].add(workload_id)
    rows = Workload.objects.filter(pk__in={pk for ids in on_nodes.values() for pk in ids}).only(
        "id", "namespace", "name", "state", "eviction_refusal"
    )
    by_id = {row.pk: row for row in rows}
    for node_id, ids in on_nodes.items():
        wait = waits[node_id]
        for pk in ids:
            row = by_id.get(pk)
            if row is not None and refused(row):
                wait.refused.append(row)
            else:
                wait.others += 1
        wait.refused.sort(key=lambda row: (row.namespace, row.name))
    return waits


def refused(workload: Workload) -> bool:
    """Whether the workload's eviction was refused by a disruption budget and still is: it
    runs and its row keeps the refusal (as ``workloads.queries.eviction_refusal`` reads it)."""
    return workload.state == WorkloadState.RUNNING and isinstance(workload.eviction_refusal, dict)


def drain_words(wait: DrainWait) -> str:
    """A draining node's reason: its workloads are being evicted; or, where a budget refused
    some (or all) of their evictions, that those keep running and gpupool asks again after
    the refusal's back-off, in the words of the workload page's "eviction refused"."""
    count = len(wait.refused)
    if not count:
        return "draining: its workloads are being evicted"
    keep = "it keeps" if count == 1 else "they keep"
    if wait.others:
        return (
            "draining: its workloads are being evicted, but a PodDisruptionBudget refused "
            f"the eviction of {count} of them: {keep} running, and {ASKS_AGAIN}"
        )
    whose = "its workload" if count == 1 else f"its {count} workloads"
    return (
        f"draining: a PodDisruptionBudget refused the eviction of {whose}: {keep} running, "
        f"and {ASKS_AGAIN}; nothing here is being evicted now"
    )
