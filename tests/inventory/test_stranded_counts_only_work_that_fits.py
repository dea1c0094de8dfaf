"""The Fragmentation page's stranded GPUs weigh each node's CPU need over the GPU shapes that
node could ever hold, as its fragmented GPUs do (``fragmentation.gpu_shapes_that_fit``).

Before, the CPU per GPU the usual work brings was taken over every shape of the flavor, so an
8-GPU pod asking 160 cores that may also use a flavor of 4-GPU nodes (and never fits one)
made those nodes' free GPUs look starved of CPU.
"""

from __future__ import annotations

from typing import Any

import pytest

from gpupool.inventory.queries import flavor_fragmentation
from gpupool.scheduler.cycle import run_cycle
from gpupool.scheduler.fragmentation import PodShape, ShapeDistribution
from gpupool.scheduler.scenario import scenario_from_dict

DAY = "2026-11-29"


def one_gb200_node(cpu_used: float) -> dict[str, Any]:
    """A gb200 node of 4 GPUs and 144 cores, 2 GPUs and ``cpu_used`` cores taken."""
    return {
        "now": f"{DAY}T10:00:00Z",
        "policy": {"placement": "gpupool"},
        "flavors": [
            {"name": "gb200", "sharing": "exclusive", "gpu_memory_gb": 192, "hourly_price": 6}
        ],
        "nodes": [
            {
                "name": "g1",
                "flavor": "gb200",
                "gpus": 4,
                "unhealthy_gpus": [],
                "cpu": 144,
                "memory_gb": 960,
                "domain": "nvl72",
            }
        ],
        "queues": [
            {"name": "root", "parent": None},
            {
                "name": "team-a",
                "parent": "root",
                "tenant": "team-a",
                "quota": {"gb200": {"guarantee": 0, "deserved": 4, "capability": 4}},
            },
        ],
        "priority_classes": [{"name": "normal", "value": 0, "default": True, "budget_rate": 0}],
        "budgets": [],
        "workloads": [
            {
                "name": "run",
                "queue": "team-a",
                "priority_class": "normal",
                "pod_sets": [{"count": 1, "gpus": 2, "flavor": "gb200", "cpu": cpu_used}],
                "protected_runtime_s": 0,
                "state": "running",
                "submitted_at": f"{DAY}T08:00:00Z",
                "started_at": f"{DAY}T08:00:00Z",
                "placement": [{"node": "g1", "gpus": [0, 1]}],
            }
        ],
        "preemption_history": [],
    }


def test_stranded_gpus_ignore_the_cpu_of_shapes_the_node_can_never_hold() -> None:
    loaded = scenario_from_dict(one_gb200_node(cpu_used=140))
    cycle = run_cycle(loaded.snapshot, loaded.policy, loaded.now)
    # 1-GPU pods with 4 cores each (they fit the node), and 8-GPU pods with 160 cores (never).
    small, large = PodShape(1, cpu_milli=4_000), PodShape(8, cpu_milli=160_000)
    dist = ShapeDistribution.from_counts({small: 1, large: 1})
    (figures,) = flavor_fragmentation(cycle.cluster, {"gb200": dist})
    assert figures.free_gpus == 2.0
    # Hand count: 4 cores free feed one 1-GPU pod of 4 cores; the other free GPU has no CPU.
    # (Over both shapes, 82 cores per 4.5 GPUs, the 4 cores would feed 0.22 GPU: 1.78.)
    assert figures.stranded_gpus == pytest.approx(1.0)


def test_a_node_with_the_cpu_for_its_free_gpus_strands_none() -> None:
    loaded = scenario_from_dict(one_gb200_node(cpu_used=136))
    cycle = run_cycle(loaded.snapshot, loaded.policy, loaded.now)
    dist = ShapeDistribution.from_counts(
        {PodShape(1, cpu_milli=4_000): 3, PodShape(8, cpu_milli=160_000): 1}
    )
    (figures,) = flavor_fragmentation(cycle.cluster, {"gb200": dist})
    # 8 cores free, 4 per GPU: both free GPUs are fed.
    assert figures.stranded_gpus == 0.0
