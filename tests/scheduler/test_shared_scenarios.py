"""Every scenario in shared/scenarios plans to its expectation file and keeps the invariants."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from scheduler_builders import check_invariants

from gpupool.scheduler import plan
from gpupool.scheduler.scenario import dump_plan, load_scenario

REPO_ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = REPO_ROOT.parent / "shared" / "scenarios"
FILES = sorted(p for p in SCENARIOS.glob("*.json") if not p.name.endswith(".expect.json"))


def test_the_shared_scenarios_are_found() -> None:
    """The shared folder sits beside the checkout, and it is not empty."""
    assert FILES, f"no scenarios under {SCENARIOS}"


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_scenario_meets_its_expectation(path: Path) -> None:
    """The plan has every property the expectation file states."""
    loaded = load_scenario(path)
    result = plan(loaded.snapshot, loaded.policy, loaded.now)
    check_invariants(loaded, result)
    expect = json.loads(path.with_name(f"{path.stem}.expect.json").read_text())
    admitted = {a.workload: a for a in result.admit}
    evicted = {e.workload: e.reason for e in result.evict}
    reasons = {p.workload: p.reason for p in result.pending}
    nodes = {n.name: n for n in loaded.snapshot.nodes}
    for name in expect.get("admitted", []):
        assert name in admitted, f"{name} should be admitted"
    for name in expect.get("not_admitted", []):
        assert name not in admitted, f"{name} should not be admitted"
    if "evicted" in expect:
        assert evicted == expect["evicted"]
    for name in expect.get("not_evicted", []):
        assert name not in evicted
    for name, reason in expect.get("pending_reason", {}).items():
        assert reasons.get(name) == reason, f"{name}: {reasons.get(name)} != {reason}"
    for name in expect.get("same_domain", []):
        assert len({nodes[p.node].domain for p in admitted[name].placement}) == 1


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_scenario_plan_is_deterministic(path: Path) -> None:
    """Planning the same scenario twice prints the same bytes."""
    first = load_scenario(path)
    second = load_scenario(path)
    assert dump_plan(plan(first.snapshot, first.policy, first.now)) == dump_plan(
        plan(second.snapshot, second.policy, second.now)
    )


PRINT_PLAN = """
import sys
from gpupool.scheduler import plan
from gpupool.scheduler.scenario import dump_plan, load_scenario
from gpupool.simulation.scale_pool import synthetic_snapshot
for path in sys.argv[1:]:
    loaded = load_scenario(path)
    print(dump_plan(plan(loaded.snapshot, loaded.policy, loaded.now)))
snapshot, policy, now = synthetic_snapshot(120)
print(dump_plan(plan(snapshot, policy, now)))
"""


def test_plans_do_not_depend_on_the_hash_seed() -> None:
    """Two interpreters with different string hashing print the same plans."""
    outputs = []
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        done = subprocess.run(
            [sys.executable, "-c", PRINT_PLAN, *map(str, FILES)],
            capture_output=True,
            text=True,
            check=True,
            env=env,
        )
        outputs.append(done.stdout)
    assert outputs[0] == outputs[1]
    assert '"admit"' in outputs[0]
