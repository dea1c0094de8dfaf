"""Property tests on random snapshots: the plan invariants of docs/scheduler.md always hold.

No GPU, CPU or memory over capacity; no gang below its minimum; no eviction inside a
protected window or of an equal-or-higher priority for preemption; no queue over
capability; the same input gives the same plan.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from scheduler_builders import check_invariants, failing_pools, snapshots

from gpupool.scheduler import NATIVE, plan, victims
from gpupool.scheduler.scenario import Scenario, dump_plan, scenario_from_dict
from gpupool.simulation.scale_pool import synthetic_snapshot


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(snapshots())
def test_every_plan_keeps_the_invariants(data: dict[str, Any]) -> None:
    """Capacity, gangs, protection, priority, capability: never violated."""
    loaded = scenario_from_dict(data)
    check_invariants(loaded, plan(loaded.snapshot, loaded.policy, loaded.now))


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(failing_pools())
def test_no_eviction_frees_room_the_preemptor_cannot_use(data: dict[str, Any]) -> None:
    """Where GPUs failed or nodes were cordoned under running work, every preemptor still
    fits on healthy, schedulable GPUs once its victims are gone (and every invariant holds)."""
    loaded = scenario_from_dict(data)
    check_invariants(loaded, plan(loaded.snapshot, loaded.policy, loaded.now))


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(snapshots())
def test_the_same_input_gives_the_same_plan(data: dict[str, Any]) -> None:
    """Two independent loads and plans of one scenario print the same bytes."""
    first = scenario_from_dict(data)
    second = scenario_from_dict(data)
    assert dump_plan(plan(first.snapshot, first.policy, first.now)) == dump_plan(
        plan(second.snapshot, second.policy, second.now)
    )


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_synthetic_pool_keeps_the_invariants(seed: int) -> None:
    """The B1 generator at a small scale: many admissions, preemptions and reclaims."""
    snapshot, policy, now = synthetic_snapshot(150, seed)
    result = plan(snapshot, policy, now)
    assert result.admit and result.evict
    check_invariants(Scenario(snapshot, policy, now), result)


# Compiled functions call each other directly: a monkeypatched victims.room_without would
# not reach them, and the comparison would pass without testing anything. make test runs
# tests/scheduler a second time on the plain-Python core, where these run.
needs_python_core = pytest.mark.skipif(NATIVE, reason="patches the core; runs on the pure pass")


def _plan_without_room_prune(loaded: Scenario) -> str:
    """The plan with victim searches never ruled out by ``victims.room_without``."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(victims, "room_without", lambda cycle, work: lambda candidates: True)
        return dump_plan(plan(loaded.snapshot, loaded.policy, loaded.now))


@needs_python_core
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(snapshots())
def test_the_room_prune_never_changes_a_plan(data: dict[str, Any]) -> None:
    """``room_without`` only skips victim searches that would fail: the plans are equal."""
    loaded = scenario_from_dict(data)
    assert dump_plan(plan(loaded.snapshot, loaded.policy, loaded.now)) == (
        _plan_without_room_prune(loaded)
    )


@needs_python_core
@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_the_room_prune_never_changes_a_synthetic_plan(seed: int) -> None:
    """The same on the B1 generator at a small scale, where gangs wait for whole nodes."""
    snapshot, policy, now = synthetic_snapshot(300, seed)
    loaded = Scenario(snapshot, policy, now)
    assert dump_plan(plan(snapshot, policy, now)) == _plan_without_room_prune(loaded)
