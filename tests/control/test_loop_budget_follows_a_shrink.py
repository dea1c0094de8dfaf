"""An elastic gang at a budgeted class that loses a member at or above its minimum shrinks
(``SyncDecision.shrinks``); its budget is charged for the GPUs it still holds from the shrink
on (DESIGN §2, "Priority budget": rate x GPUs x hours), not for the pod that is gone. A
protected window not over yet keeps the reservation of the GPUs left, the rest settled back.
"""

from __future__ import annotations

import time
from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.utils import timezone
from domain_builders import flavor, priority_class, queue, quota, tenant

from gpupool.clusters.node_profiles import gpu_node_manifest
from gpupool.clusters.simulated import SimulatedBackend, SimulatedCluster, VirtualClock
from gpupool.clusters.simulated_store import MemoryStore
from gpupool.control.budgets import SHRUNK_NOTE
from gpupool.control.loop import ControlLoop
from gpupool.quotas.actions import do_grant_budget
from gpupool.quotas.models import BudgetLedgerEntry, PriorityBudget
from gpupool.quotas.queries import ledger_mismatches
from gpupool.tenancy.models import Tenant
from gpupool.workloads.models import Placement, Workload

pytestmark = pytest.mark.django_db

START = float((int(time.time()) // 3600 + 41 * 24) * 3600)
PRODUCT = "NVIDIA-H100-80GB-HBM3"
GRANT = 100


class Pool:
    """Team ``a`` (16 H100 GPUs of quota, two 8-GPU nodes), class ``urgent`` spending one
    budget GPU-hour per GPU-hour, ``GRANT`` of it granted; the loop."""

    def __init__(self) -> None:
        h100 = flavor("h100", node_labels={"nvidia.com/gpu.product": PRODUCT})
        priority_class("normal", 0, default=True)
        urgent = priority_class("urgent", 2000, budget_rate=Decimal(1))
        team = tenant("a", namespaces=("team-a",))
        quota(queue("team-a", parent=queue("root"), tenant=team), h100, 0, 16, 16)
        self.clock = VirtualClock(START)
        today = timezone.localdate()
        do_grant_budget(
            Tenant.objects.get(name="a"),
            urgent,
            period_start=today - timedelta(days=1),
            period_end=today + timedelta(days=60),
            gpu_hours=GRANT,
            acting_user=None,
        )
        self.cluster = SimulatedCluster(MemoryStore(), self.clock)
        group = {"kind": "hgx", "prefix": "g", "gpus": 8, "product": PRODUCT}
        self.cluster.add_nodes([gpu_node_manifest(f"g-{n}", group) for n in (1, 2)])
        self.loop = ControlLoop(SimulatedBackend(self.cluster))

    def cycle(self) -> None:
        result = self.loop.run_cycle()
        assert result.status == "succeeded", result.error

    def pod(self, name: str, protected_s: int) -> None:
        """A member of gang ``elastic`` (minimum 2) of 4 GPUs at class urgent."""
        labels = {"gpupool.io/queue": "team-a", "gpupool.io/workload": "elastic"}
        annotations = {
            "gpupool.io/min-member": "2",
            "gpupool.io/priority-class": "urgent",
            "gpupool.io/protected-runtime": str(protected_s),
        }
        resources = {"nvidia.com/gpu": "4", "cpu": "1", "memory": "1Gi"}
        manifest: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": "team-a", "labels": labels,
                         "annotations": annotations},
            "spec": {"schedulerName": "gpupool", "containers": [
                {"name": "main", "image": "registry.invalid/train:1",
                 "resources": {"requests": resources, "limits": resources}}]},
        }  # fmt: skip
        self.cluster.add_pod(manifest)

    def elastic(self) -> Workload:
        return Workload.objects.get(namespace="team-a", name="elastic")

    def run_elastic(self, protected_s: int) -> float:
        """Four pods of 4 GPUs (the pool's 16) running; when the workload started."""
        for index in range(4):
            self.pod(f"elastic-{index}", protected_s)
        for _ in range(5):
            self.cycle()
            if self.elastic().state == "running":
                break
        running = self.elastic()
        assert running.state == "running"
        assert Placement.objects.filter(workload=running).count() == 4
        assert running.started_at is not None
        return running.started_at.timestamp()

    def lose_one_pod(self) -> float:
        ref = next(p.ref for p in self.cluster.pods() if p.name == "elastic-1")
        self.cluster.delete_pods([ref], "kubectl delete pod elastic-1")
        self.cycle()
        assert self.elastic().state == "running"
        assert Placement.objects.filter(workload=self.elastic()).count() == 3  # shrunk
        return self.clock.now()


def spent() -> Decimal:
    """What tenant a's urgent budget spent, by its ledger (reservations netted out): the
    grant less what is left, its reservations and settlements summing to nothing."""
    assert ledger_mismatches() == []
    entries = BudgetLedgerEntry.objects.filter(budget=PriorityBudget.objects.get())
    held = sum((e.gpu_hours for e in entries if e.kind in ("reserve", "settle")), Decimal(0))
    assert held == 0  # no window open any more: all reserved was settled back
    return -sum((e.gpu_hours for e in entries if e.kind == "spend"), Decimal(0))


@pytest.fixture
def pool(db: None) -> Pool:
    return Pool()


def test_a_shrunk_gang_spends_for_the_gpus_it_still_holds(pool: Pool) -> None:
    started = pool.run_elastic(protected_s=0)
    pool.clock.advance(600)
    shrunk_at = pool.lose_one_pod()
    pool.clock.advance(3600)
    pool.cycle()  # past the flush: what ran is in the ledger up to now
    now = pool.clock.now()
    # Hand count: 16 GPUs until the shrink, 12 after, at one budget hour per GPU-hour.
    hand = (16 * (shrunk_at - started) + 12 * (now - shrunk_at)) / 3600
    assert float(spent()) == pytest.approx(hand, abs=0.001)
    assert BudgetLedgerEntry.objects.filter(note=SHRUNK_NOTE, kind="spend").exists()


@pytest.mark.parametrize("restart", [False, True], ids=["same-loop", "restarted-loop"])
def test_a_gang_shrunk_in_its_window_keeps_the_reservation_of_the_gpus_left(
    pool: Pool, restart: bool
) -> None:
    started = pool.run_elastic(protected_s=1800)  # 16 GPUs x 30 min: 8 GPU-hours reserved
    budget = PriorityBudget.objects.get()
    assert budget.remaining_gpu_hours() == GRANT - 8
    pool.clock.advance(600)
    shrunk_at = pool.lose_one_pod()
    # Inside the window: 12 GPUs x 30 min stay reserved, the gone pod's share of the 10
    # minutes it ran in the window is spent.
    held = -sum(
        (e.gpu_hours for e in budget.entries.filter(kind__in=("reserve", "settle"))), Decimal(0)
    )
    assert held == Decimal("6.0000")
    if restart:  # a loop started now reads the same window back from the ledger
        pool.loop = ControlLoop(SimulatedBackend(pool.cluster))
        pool.cycle()
    pool.clock.advance(3600)  # past the window's end
    pool.cycle()
    pool.clock.advance(600)
    pool.cycle()
    now = pool.clock.now()
    hand = (16 * (shrunk_at - started) + 12 * (now - shrunk_at)) / 3600
    assert float(spent()) == pytest.approx(hand, abs=0.001)
