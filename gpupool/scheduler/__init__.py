"""gpupool's pure decision core: ``plan(snapshot, policy, now) -> Plan``.

Plain Python on plain data; it imports nothing from Django, Celery or Kubernetes. When a mypyc
build of these very sources exists, it runs compiled (``gpupool.scheduler.native``).
"""

from gpupool.scheduler.native import load_native

NATIVE = load_native(__path__)  # whether the compiled modules stand in for these sources

from gpupool.scheduler.cycle import plan  # noqa: E402 - after the compiled core is in place
from gpupool.scheduler.types import Plan, PolicyInfo, Snapshot  # noqa: E402

__all__ = ["NATIVE", "Plan", "PolicyInfo", "Snapshot", "plan"]
