"""Every scenario in the repository's ``scenarios/`` plans to its expectation file and keeps the
invariants; the team's shared scenarios, where a checkout has them beside it, all have a
counterpart there with the same expectations."""

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
SCENARIOS = REPO_ROOT / "scenarios"
SHARED = REPO_ROOT.parent / "shared" / "scenarios"  # the team's folder, beside some checkouts


def scenario_files(folder: Path) -> list[Path]:
    """The scenario files of a folder (not their expectation files), by name."""
    return sorted(p for p in folder.glob("*.json") if not p.name.endswith(".expect.json"))


FILES = scenario_files(SCENARIOS)


def test_the_scenarios_are_found_and_each_has_its_expectations() -> None:
    """The repository's scenario folder is not empty, and no scenario lacks an expect file."""
    assert FILES, f"no scenarios under {SCENARIOS}"
    for path in FILES:
        assert path.with_name(f"{path.stem}.expect.json").is_file(), path.name


@pytest.mark.skipif(not SHARED.is_dir(), reason="no shared scenario folder beside this checkout")
def test_every_shared_scenario_has_a_counterpart_with_the_same_expectations() -> None:
    """Each file of ../shared/scenarios is in scenarios/ under its name, expecting the same."""
    for shared in scenario_files(SHARED):
        ours = SCENARIOS / shared.name
        assert ours.is_file(), f"{shared.name} has no counterpart in scenarios/"
        expect = f"{shared.stem}.expect.json"
        assert json.loads((SCENARIOS / expect).read_text()) == json.loads(
            (SHARED / expect).read_text()
        ), f"{expect} differs from the shared one"


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_a_scenario_meets_its_expectation(path: Path) -> None:
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
    if "grown" in expect:
        assert {g.workload: len(g.pod_refs) for g in result.grow} == expect["grown"]


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_a_scenario_plans_to_the_same_bytes_twice(path: Path) -> None:
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
