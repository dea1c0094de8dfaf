"""The Fragmentation page's "how many fit at once" of a gang whose GPUs a node's do not divide
counts the pods its "as pods of" row names: 72 GPUs on 16-GPU nodes are 4 pods of 16 and 1 of
8, as the placer places them (pod by pod, each pod taking only its GPUs; no gang holds whole
nodes). Before, it counted room for 5 pods of 16 (80 GPUs, five whole nodes), so a domain of
four free nodes and 8 GPUs free on a fifth read "none" though the scheduler admits such a gang
there, and nine free nodes read one gang where two fit (their pods of 8 share the ninth)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from gpupool.dashboard.blocking import gang_pods
from gpupool.inventory.queries import GangFit, flavor_fragmentation
from gpupool.scheduler.cycle import run_cycle
from gpupool.scheduler.scenario import scenario_from_dict

DAY = "2026-11-29"
X = "\N{MULTIPLICATION SIGN}"


def pool(
    nodes: int, used: dict[int, int], pending: Sequence[dict[str, Any]] = ()
) -> dict[str, Any]:
    """``nodes`` a100 nodes of 16 GPUs in one NVLink domain; node ``i`` has ``used[i]`` GPUs
    taken by a running workload; ``pending``: pod sets of a waiting gang bound to the domain."""
    running = [
        {
            "name": f"run-{index}",
            "queue": "team-a",
            "priority_class": "normal",
            "pod_sets": [{"count": 1, "gpus": gpus, "flavor": "a100"}],
            "protected_runtime_s": 0,
            "state": "running",
            "submitted_at": f"{DAY}T08:00:00Z",
            "started_at": f"{DAY}T08:00:00Z",
            "placement": [{"node": f"a{index}", "gpus": list(range(gpus))}],
        }
        for index, gpus in used.items()
    ]
    waiting = [
        {
            "name": "gang-72",
            "queue": "team-a",
            "priority_class": "normal",
            "pod_sets": list(pending),
            "protected_runtime_s": 0,
            "topology": "domain",
            "state": "pending",
            "submitted_at": f"{DAY}T09:00:00Z",
        }
    ]
    return {
        "now": f"{DAY}T10:00:00Z",
        "policy": {"placement": "gpupool"},
        "flavors": [
            {"name": "a100", "sharing": "exclusive", "gpu_memory_gb": 80, "hourly_price": 2}
        ],
        "nodes": [
            {
                "name": f"a{index}",
                "flavor": "a100",
                "gpus": 16,
                "unhealthy_gpus": [],
                "cpu": 256,
                "memory_gb": 2048,
                "domain": "nvl-a",
            }
            for index in range(nodes)
        ],
        "queues": [
            {"name": "root", "parent": None},
            {
                "name": "team-a",
                "parent": "root",
                "tenant": "team-a",
                "quota": {"a100": {"guarantee": 0, "deserved": 1000, "capability": 1000}},
            },
        ],
        "priority_classes": [{"name": "normal", "value": 0, "default": True, "budget_rate": 0}],
        "budgets": [],
        "workloads": running + (waiting if pending else []),
        "preemption_history": [],
    }


def gangs_of_72(nodes: int, used: dict[int, int]) -> GangFit:
    loaded = scenario_from_dict(pool(nodes, used))
    cycle = run_cycle(loaded.snapshot, loaded.policy, loaded.now)
    (figures,) = flavor_fragmentation(cycle.cluster, {})
    (gang,) = [gang for gang in figures.gangs if gang.gpus == 72]
    return gang


@pytest.mark.parametrize(
    ("nodes", "used", "fit"),
    [
        (5, {4: 8}, 1),  # four free nodes and 8 GPUs on a fifth: exactly one gang
        (5, {}, 1),  # five free nodes: one (the fifth keeps 8 GPUs for other work)
        (9, {}, 2),  # nine free nodes: two, their pods of 8 side by side on the ninth
        (5, {4: 12}, 0),  # 68 free: none
        (8, {}, 1),  # 8 free nodes: the second gang's pod of 8 has no room left
        (10, {0: 8, 1: 8}, 2),  # eight free nodes and two halves
    ],
)
def test_a_72_gpu_gang_on_16_gpu_nodes_is_counted_as_4_pods_of_16_and_1_of_8(
    nodes: int, used: dict[int, int], fit: int
) -> None:
    gang = gangs_of_72(nodes, used)
    assert gang_pods(gang) == f"4 {X} 16 + 1 {X} 8"  # the page's "as pods of"
    assert (gang.pods, gang.gpus_per_pod, gang.gangs) == (5, 16, fit)


def test_the_scheduler_admits_the_gang_the_count_says_fits() -> None:
    """Four free nodes and 8 GPUs free on a fifth: the count says one, and a cycle admits a
    72-GPU gang of 4 pods of 16 and 1 of 8 bound to the domain there."""
    assert gangs_of_72(5, {4: 8}).gangs == 1
    shape = [{"count": 4, "gpus": 16, "flavor": "a100"}, {"count": 1, "gpus": 8, "flavor": "a100"}]
    loaded = scenario_from_dict(pool(5, {4: 8}, shape))
    cycle = run_cycle(loaded.snapshot, loaded.policy, loaded.now)
    assert "gang-72" in cycle.admitted
