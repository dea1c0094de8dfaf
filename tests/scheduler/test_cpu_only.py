"""CPU-only pod sets: ``gpus: 0`` with no flavor runs on any node with the CPU and memory.

The scenario format (docs/scheduler.md): ``gpus`` may be 0 and pods asking 0 GPUs need no GPU
quota.
"""

from __future__ import annotations

from typing import Any

import pytest
from scheduler_builders import Case, node, pool, queue, run_case, scenario, workload

from gpupool.scheduler import plan
from gpupool.scheduler.scenario import ScenarioError, scenario_from_dict

FLAVORS: list[dict[str, Any]] = [
    {"name": "h100", "sharing": "exclusive", "gpu_memory_gb": 80, "hourly_price": 2.5},
    {"name": "cpu", "sharing": "exclusive", "hourly_price": 0.1},
]


def cpu_job(name: str, cpu: float = 8, count: int = 1, **extra: Any) -> dict[str, Any]:
    """A CPU-only workload that names no flavor."""
    return workload(name, gpus=0, flavor=None, cpu=cpu, count=count, **extra)


CASES = [
    Case(
        "admits a cpu-only pod set without a flavor on a gpu node with no gpu quota",
        pool(1),
        [queue("team-a")],
        [cpu_job("w1")],
        want_admitted={"w1"},
    ),
    Case(
        "admits a cpu-only gang across nodes when one node cannot hold it",
        pool(2, cpu=16),
        [queue("team-a")],
        [cpu_job("w1", cpu=12, count=2)],
        want_admitted={"w1"},
    ),
    Case(
        "keeps a cpu-only workload beside running gpu work on the same node",
        pool(1, cpu=32),
        [queue("team-a", deserved=8)],
        [
            workload("gpu", gpus=8, cpu=16, on=[("n1", list(range(8)))]),
            cpu_job("w1", cpu=16),
        ],
        want_admitted={"w1"},
    ),
    Case(
        "says capacity when no node has the cpu a cpu-only workload asks",
        pool(1, cpu=16),
        [queue("team-a")],
        [cpu_job("w1", cpu=32)],
        want_reasons={"w1": "capacity"},
    ),
    Case(
        "says behind when higher-ranked cpu-only work took the cpu",
        pool(1, cpu=16),
        [queue("team-a")],
        [cpu_job("w1", cpu=12, submitted="08:00"), cpu_job("w2", cpu=12, submitted="09:00")],
        want_admitted={"w1"},
        want_reasons={"w2": "behind"},
    ),
    Case(
        "does not let a cpu-only workload reclaim or preempt anything",
        pool(1, cpu=16),
        [queue("team-a", deserved=8), queue("team-b", deserved=0, capability=8)],
        [
            workload("b-run", "team-b", gpus=8, cpu=16, on=[("n1", list(range(8)))]),
            cpu_job("w1", cpu=8, priority="high"),
        ],
        want_reasons={"w1": "capacity"},
        budgets=[{"tenant": "team-a", "priority_class": "high", "gpu_hours": 100, "used": 0}],
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_cpu_only_work_is_planned_as_its_case_says(case: Case) -> None:
    """The plan shows what the rule says, and keeps every invariant."""
    run_case(case)


def test_cpu_only_work_prefers_cpu_only_nodes_over_gpu_nodes() -> None:
    """A flavorless pod lands on a CPU-only node while one has room."""
    loaded = scenario_from_dict(
        scenario(
            [node("g1"), node("c1", gpus=0, flavor="cpu", cpu=64)],
            [queue("team-a")],
            [cpu_job("w1", cpu=16)],
            flavors=FLAVORS,
        )
    )
    result = plan(loaded.snapshot, loaded.policy, loaded.now)
    assert [(a.workload, [p.node for p in a.placement]) for a in result.admit] == [("w1", ["c1"])]


def test_cpu_only_work_falls_back_to_gpu_nodes_when_cpu_nodes_are_full() -> None:
    """When the CPU-only nodes lack room, a flavorless pod runs on a GPU node's CPU."""
    loaded = scenario_from_dict(
        scenario(
            [node("g1"), node("c1", gpus=0, flavor="cpu", cpu=8)],
            [queue("team-a")],
            [cpu_job("w1", cpu=16)],
            flavors=FLAVORS,
        )
    )
    result = plan(loaded.snapshot, loaded.policy, loaded.now)
    assert [(a.workload, [p.node for p in a.placement]) for a in result.admit] == [("w1", ["g1"])]


def test_cpu_only_capacity_explanation_is_a_whole_sentence() -> None:
    """The capacity sentence names the resource, the ask and the most free on one kind."""
    loaded = scenario_from_dict(
        scenario(pool(1, cpu=16), [queue("team-a")], [cpu_job("w1", cpu=32)])
    )
    (pending,) = plan(loaded.snapshot, loaded.policy, loaded.now).pending
    assert pending.detail == (
        "It may run on any node, but no kind of node has 32 CPU cores free: "
        "the most is 16 on h100 nodes."
    )


def test_a_pool_without_nodes_explains_capacity_without_placeholders() -> None:
    """No node at all: a plain sentence, no ``?`` or ``None``."""
    loaded = scenario_from_dict(scenario([], [queue("team-a")], [cpu_job("w1")]))
    (pending,) = plan(loaded.snapshot, loaded.policy, loaded.now).pending
    assert pending.reason == "capacity"
    assert pending.detail == "The pool has no node of a flavor it may run on."


def test_a_running_cpu_only_workload_without_a_flavor_is_read_from_its_placement() -> None:
    """Its pods hold CPU on their node; a second job that needs that CPU waits."""
    loaded = scenario_from_dict(
        scenario(
            pool(1, cpu=16),
            [queue("team-a")],
            [cpu_job("r1", cpu=12, on=[("n1", [])]), cpu_job("w1", cpu=8)],
        )
    )
    (pending,) = plan(loaded.snapshot, loaded.policy, loaded.now).pending
    assert (pending.workload, pending.reason) == ("w1", "capacity")


BAD = [
    ("a gpu pod set without a flavor", {"gpus": 1}, "flavor: required"),
    ("a gpu fraction without a flavor", {"gpus": 0, "gpu_milli": 500}, "gpu_milli: only with"),
]


@pytest.mark.parametrize(("name", "pod_set", "message"), BAD, ids=[b[0] for b in BAD])
def test_a_pod_set_that_needs_a_flavor_is_refused_without_one(
    name: str, pod_set: dict[str, Any], message: str
) -> None:
    """Only a pod set asking no GPU may leave the flavor out."""
    job = workload("w1")
    job["pod_sets"] = [{"count": 1, **pod_set}]
    with pytest.raises(ScenarioError, match=f"workloads\\[0\\].pod_sets\\[0\\].{message}"):
        scenario_from_dict(scenario(pool(1), [queue("team-a")], [job]))
