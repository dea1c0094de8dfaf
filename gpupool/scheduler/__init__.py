"""gpupool's pure decision core: ``plan(snapshot, policy, now) -> Plan``.

Plain Python on plain data; it imports nothing from Django, Celery or Kubernetes.
"""

from gpupool.scheduler.cycle import plan
from gpupool.scheduler.types import Plan, PolicyInfo, Snapshot

__all__ = ["Plan", "PolicyInfo", "Snapshot", "plan"]
