"""gpupool's pure decision core: ``plan(snapshot, policy, now) -> Plan``.

Plain Python on plain data; it imports nothing from Django, Celery or Kubernetes. Between
cycles, ``apply_plan`` carries a plan out on a snapshot and ``next_change_at`` says when the
next cycle could decide differently (``lifecycle.py``). When a mypyc build of these very
sources exists, it runs compiled (``gpupool.scheduler.native``).
"""

from gpupool.scheduler.native import load_native

NATIVE = load_native(__path__)  # whether the compiled modules stand in for these sources

from gpupool.scheduler.cycle import plan  # noqa: E402 - after the compiled core is in place
from gpupool.scheduler.lifecycle import apply_plan, next_change_at  # noqa: E402
from gpupool.scheduler.types import Plan, PolicyInfo, Snapshot  # noqa: E402

__all__ = ["NATIVE", "Plan", "PolicyInfo", "Snapshot", "apply_plan", "next_change_at", "plan"]
