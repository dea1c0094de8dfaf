"""The decision core stays pure: importing it pulls in no Django, Celery or Kubernetes, and
process-wide settings such as the garbage collector are left to its callers."""

from __future__ import annotations

import gc
import subprocess
import sys

import pytest
from scheduler_builders import pool, queue, scenario, workload

from gpupool.runtime import gc_paused
from gpupool.scheduler import plan
from gpupool.scheduler.scenario import scenario_from_dict

CODE = """
import importlib, pkgutil, sys
import gpupool.scheduler as core
for info in pkgutil.iter_modules(core.__path__):
    importlib.import_module(f"gpupool.scheduler.{info.name}")
print(",".join(m for m in ("django", "celery", "kubernetes", "rest_framework") if m in sys.modules))
"""


def test_importing_the_core_loads_no_framework() -> None:
    """A fresh interpreter importing every gpupool.scheduler module has no framework loaded."""
    out = subprocess.run(
        [sys.executable, "-c", CODE], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert out == ""


def test_planning_leaves_the_garbage_collector_to_its_caller(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``plan`` neither pauses nor restarts the collector: that is the caller's choice."""
    calls: list[str] = []
    monkeypatch.setattr(gc, "disable", lambda: calls.append("disable"))
    monkeypatch.setattr(gc, "enable", lambda: calls.append("enable"))
    loaded = scenario_from_dict(
        scenario(pool(2), [queue("team-a", deserved=16)], [workload("w1"), workload("w2")])
    )
    assert plan(loaded.snapshot, loaded.policy, loaded.now).admit
    assert calls == []


@pytest.mark.parametrize("enabled_before", [True, False])
def test_gc_paused_pauses_the_collector_and_restores_its_state(enabled_before: bool) -> None:
    """Inside ``gc_paused`` the collector is off; after it, as it was before."""
    was = gc.isenabled()
    try:
        (gc.enable if enabled_before else gc.disable)()
        with gc_paused():
            assert not gc.isenabled()
        assert gc.isenabled() is enabled_before
    finally:
        (gc.enable if was else gc.disable)()
