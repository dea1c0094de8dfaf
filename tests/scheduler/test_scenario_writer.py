"""The scenario writer is the reader's inverse: what it writes reads back as the same scenario."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from scheduler_builders import at, node, queue, scenario, workload

from gpupool.scheduler import plan
from gpupool.scheduler.scenario import (
    Scenario,
    load_scenario,
    policy_from_dict,
    policy_to_dict,
    scenario_from_dict,
    snapshot_to_dict,
)
from gpupool.scheduler.types import BackoffPolicy, PolicyInfo, VictimProtectionPolicy

REPO_ROOT = Path(__file__).resolve().parents[2]
# The repository's own scenario suite, and the shared folder's where a checkout has one.
FOLDERS = (REPO_ROOT / "scenarios", REPO_ROOT.parent / "shared" / "scenarios")
FILES = sorted(
    p for folder in FOLDERS for p in folder.glob("*.json") if not p.name.endswith(".expect.json")
)

POLICIES: dict[str, dict[str, Any]] = {
    "defaults": {},
    "every knob turned": {
        "placement": "bestfit",
        "starvation_limit_s": 7200,
        "preemption_backoff": None,
        "victim_protection": None,
        "phases": ["allocate", "preempt", "backfill"],
        "preemption_attempts_per_queue": 3,
        "queueing": "fifo",
        "fair_sharing": False,
        "victim_search": "greedy",
    },
    "contracts with their own numbers": {
        "preemption_backoff": {"max_preemptions": 5, "window_s": 1800.5, "cooldown_s": 600},
        "victim_protection": {"evictions": 3, "window_s": 7200, "protected_s": 900},
    },
}


def written_and_read(loaded: Scenario) -> Scenario:
    """The scenario written as JSON text and read back."""
    text = json.dumps(snapshot_to_dict(loaded.snapshot, loaded.policy, loaded.now))
    return scenario_from_dict(json.loads(text))


def rich_scenario(policy: dict[str, Any]) -> dict[str, Any]:
    """Every part of the format: MIG, a shared flavor, flavor choices, budgets, history,
    a nominated preemptor and its leaving victim, checkpoints, cordons and broken GPUs."""
    flavors = [
        {"name": "h100", "sharing": "exclusive", "gpu_memory_gb": 80, "hourly_price": 2.5},
        {"name": "gb200", "sharing": "exclusive", "gpu_memory_gb": 186, "hourly_price": 6},
        {"name": "l4s", "sharing": "shared", "gpu_memory_gb": 24, "hourly_price": 0.85},
        {
            "name": "a100-3g.40gb",
            "sharing": "exclusive",
            "gpu_memory_gb": 40,
            "hourly_price": 1.2,
            "mig": {"gpu_model": "A100-80GB", "profile": "3g.40gb"},
        },
    ]
    nodes = [
        node("n1", unhealthy=(3,), cpu=191.5, memory_gb=2047.25, foreign=(6, 7)),
        {**node("n2"), "cordoned": True},
        node("g1", gpus=4, flavor="gb200", domain="nvl72"),
        node("g2", gpus=4, flavor="gb200", domain="nvl72"),
        node("s1", gpus=4, flavor="l4s"),
        {**node("m1", gpus=4, flavor="a100-3g.40gb", unhealthy=(2, 3)), "physical_gpus": 2},
        node("cpu1", gpus=0, cpu=64, memory_gb=256),
    ]
    queues = [
        {
            "name": "org",
            "parent": "root",
            "quota": {"h100": {"guarantee": 2, "deserved": 12, "capability": 16}},
        },
        {
            "name": "team-a",
            "parent": "org",
            "tenant": "a",
            "weight": 2.5,
            "reclaimable": False,
            "lending_limit": 1.5,
            "max_protected_runtime_s": 3600,
            "default_protected_runtime_s": 600,
            "quota": {
                "h100": {"guarantee": 2, "deserved": 8, "capability": 16},
                "gb200": {"guarantee": 0, "deserved": 4, "capability": 8},
                "l4s": {"guarantee": 0.5, "deserved": 1.25, "capability": 4},
                "a100-3g.40gb": {"guarantee": 0, "deserved": 2, "capability": 4},
            },
        },
        queue("team-b", deserved=4, capability=8, parent="org", tenant="b"),
    ]
    workloads = [
        workload(
            "victim",
            queue="team-b",
            gpus=2,
            on=[("n1", [0, 1])],
            last_checkpoint_at=at("09:40"),
            evicting_for="preemptor",
            expected_runtime_s=5400,
        ),
        {
            **workload("notebook", gpus=1, flavor="l4s", on=[("s1", [2])], gpu_milli=470),
            "backfilled_for": "preemptor",
            "pod_sets": [{"count": 1, "gpus": 1, "flavor": "l4s", "gpu_milli": 470}],
            "placement": [{"node": "s1", "gpus": [2], "milli": 470}],
        },
        {
            **workload("preemptor", gpus=4, count=2, flavor=["gb200", "h100"]),
            "min_member": 1,
            "topology": "domain",
            "nominated": True,
            "expected_runtime_s": 3600.25,
        },
        {
            **workload("two-sets", queue="team-b", priority="high"),
            "pod_sets": [
                {"count": 1, "gpus": 8, "flavor": "h100", "cpu": 12.5, "memory_gb": 64},
                {"count": 3, "gpus": 0, "cpu": 2},
            ],
            "topology": "preferred",
        },
        {
            **workload("slice", gpus=1, flavor="a100-3g.40gb", submitted="09:30"),
            "missing_pods": 1,
        },
        {
            **workload("fraction", gpus=1, flavor="l4s"),
            "pod_sets": [{"count": 2, "gpus": 1, "flavor": "l4s", "gpu_memory_gb": 12}],
        },
    ]
    return scenario(
        nodes,
        queues,
        workloads,
        budgets=[
            {"tenant": "a", "priority_class": "high", "gpu_hours": 100, "used": 12.5},
            {"tenant": "b", "priority_class": "high", "gpu_hours": 8},
        ],
        policy=policy,
        history=[
            {
                "at": at("09:15"),
                "victim": "victim",
                "preemptor": "preemptor",
                "preemptor_tenant": "a",
            },
            {"at": "2026-11-29T09:20:00.250001Z", "victim": "gone-long-ago"},
        ],
        flavors=flavors,
    )


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_every_scenario_file_reads_back_as_itself(path: Path) -> None:
    loaded = load_scenario(path)
    assert written_and_read(loaded) == loaded


@pytest.mark.parametrize("policy", POLICIES.values(), ids=list(POLICIES))
def test_a_scenario_using_every_field_reads_back_as_itself(policy: dict[str, Any]) -> None:
    loaded = scenario_from_dict(rich_scenario(policy))
    assert written_and_read(loaded) == loaded


def test_writing_what_was_read_gives_the_same_file() -> None:
    loaded = scenario_from_dict(rich_scenario(POLICIES["every knob turned"]))
    first = snapshot_to_dict(loaded.snapshot, loaded.policy, loaded.now)
    again = written_and_read(loaded)
    assert snapshot_to_dict(again.snapshot, again.policy, again.now) == first


def test_the_written_scenario_plans_the_same() -> None:
    loaded = scenario_from_dict(rich_scenario({}))
    again = written_and_read(loaded)
    assert plan(again.snapshot, again.policy, again.now) == plan(
        loaded.snapshot, loaded.policy, loaded.now
    )


def test_quantities_are_written_in_the_units_of_the_format() -> None:
    loaded = scenario_from_dict(rich_scenario({}))
    written = snapshot_to_dict(loaded.snapshot, loaded.policy, loaded.now)
    team_a = next(q for q in written["queues"] if q["name"] == "team-a")
    assert team_a["quota"]["l4s"] == {"guarantee": 0.5, "deserved": 1.25, "capability": 4}
    assert team_a["lending_limit"] == 1.5
    n1 = next(n for n in written["nodes"] if n["name"] == "n1")
    assert (n1["cpu"], n1["memory_gb"], n1["unhealthy_gpus"]) == (191.5, 2047.25, [3])
    events = written["preemption_history"]
    assert events[1] == {"at": "2026-11-29T09:20:00.250001Z", "victim": "gone-long-ago"}


def test_every_policy_key_is_written_and_read_back() -> None:
    policy = PolicyInfo(
        starvation_limit_s=60.0,
        backoff=BackoffPolicy(2, 10.0, 20.0),
        victim_protection=VictimProtectionPolicy(4, 30.0, 40.0),
    )
    written = policy_to_dict(policy)
    assert policy_from_dict(written) == policy
    assert set(written) == set(policy_to_dict(PolicyInfo())) | {"starvation_limit_s"}
