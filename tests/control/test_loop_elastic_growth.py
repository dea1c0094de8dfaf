"""A running elastic gang grows back into capacity freed within its queue's deserved share
(``Plan.grow``, the core's grow phase) and the loop carries it out: the added pods'
placements, its usage closed and opened again for all the GPUs it holds, its history (an
audit row of the workload: the state does not change), its budget charged for the GPUs it
holds from the growth on, and the added pods bound -- alone, so a failed binding leaves the
pods it ran running, and a crash between record and apply binds them once, at the next
cycle. A dry run grows nothing.

The pool: one 8-GPU H100 node; queue team-a deserves 8 GPUs; kubectl pods: two fillers of 2
GPUs, and gang ``elastic`` of 8 pods of 1 GPU (minimum 4) at class ``urgent``, which spends a
budget GPU-hour per GPU-hour.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.utils import timezone
from domain_builders import flavor, priority_class, queue, quota, tenant

from gpupool.accounting.models import PreemptionEvent, UsageInterval
from gpupool.audit.models import AuditEvent
from gpupool.clusters.base import BindOutcome, PodBinding
from gpupool.clusters.node_profiles import gpu_node_manifest
from gpupool.clusters.simulated import SimulatedBackend, SimulatedCluster, VirtualClock
from gpupool.clusters.simulated_store import MemoryStore
from gpupool.control import loop as loop_module
from gpupool.control.budgets import GREW_NOTE
from gpupool.control.loop import GROW_RETRY_S, ControlLoop
from gpupool.control.snapshot import read_workloads
from gpupool.control.sync import moment
from gpupool.quotas.actions import do_grant_budget
from gpupool.quotas.models import BudgetLedgerEntry, PriorityBudget, Queue
from gpupool.quotas.queries import ledger_mismatches
from gpupool.tenancy.models import Tenant
from gpupool.workloads.models import Placement, Workload

pytestmark = pytest.mark.django_db

START = float((int(time.time()) // 3600 + 43 * 24) * 3600)
PRODUCT = "NVIDIA-H100-80GB-HBM3"
HOUR = 3600.0


class Pool:
    """The pool above, its simulated cluster and the loop."""

    def __init__(self, deserved: int = 8) -> None:
        self.h100 = flavor("h100", node_labels={"nvidia.com/gpu.product": PRODUCT})
        priority_class("normal", 0, default=True)
        urgent = priority_class("urgent", 2000, budget_rate=Decimal(1))
        team = tenant("a", namespaces=("team-a",))
        self.queue = queue("team-a", parent=queue("root"), tenant=team)
        quota(self.queue, self.h100, 0, deserved, deserved)
        self.clock = VirtualClock(START)
        today = timezone.localdate()
        do_grant_budget(
            Tenant.objects.get(name="a"),
            urgent,
            period_start=today - timedelta(days=1),
            period_end=today + timedelta(days=60),
            gpu_hours=100,
            acting_user=None,
        )
        self.cluster = SimulatedCluster(MemoryStore(), self.clock)
        group = {"kind": "hgx", "prefix": "g", "gpus": 8, "product": PRODUCT}
        self.cluster.add_nodes([gpu_node_manifest("g-1", group)])
        # The gang's pods bound, each time one was bound (a pod already on its node, sent
        # again in a gang, is no new binding).
        self.bound: list[str] = []
        self.restart()

    def restart(self) -> None:
        """A new loop process: its own backend (whose first sync lists the cluster) and loop,
        nothing of the last one's memory."""
        self.backend = SimulatedBackend(self.cluster)
        self.loop = ControlLoop(self.backend)
        bind_many = self.backend.bind_many

        def counted(gangs: Mapping[str, Sequence[PodBinding]]) -> dict[str, BindOutcome]:
            on_nodes = {p.name for p in self.cluster.pods() if p.node_name}
            outcomes = bind_many(gangs)
            for gang in (g for name, g in gangs.items() if name == "team-a/elastic"):
                if outcomes["team-a/elastic"].ok:
                    self.bound.extend(b.pod.name for b in gang if b.pod.name not in on_nodes)
            return outcomes

        self.backend.bind_many = counted  # type: ignore[method-assign]

    def cycle(self, **kwargs: Any) -> Any:
        result = self.loop.run_cycle(**kwargs)
        assert result.status in ("succeeded", "dry-run"), result.error
        return result

    def pod(self, name: str, workload: str, gpus: int, *command: str, **annotations: str) -> None:
        """A pod made with kubectl in team-a (``command``: what it runs, else until deleted)."""
        labels = {"gpupool.io/queue": "team-a", "gpupool.io/workload": workload}
        resources = {"nvidia.com/gpu": str(gpus), "cpu": "1", "memory": "1Gi"}
        container: dict[str, Any] = {
            "name": "main",
            "image": "registry.invalid/train:1",
            "resources": {"requests": resources, "limits": resources},
        }
        if command:
            container["command"] = list(command)
        manifest: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": "team-a", "labels": labels,
                         "annotations": annotations},
            "spec": {"schedulerName": "gpupool", "containers": [container]},
        }  # fmt: skip
        self.cluster.add_pod(manifest)

    def elastic(self) -> Workload:
        return Workload.objects.get(namespace="team-a", name="elastic")

    def nodes_of(self, workload: str) -> dict[str, str | None]:
        return {
            p.name: p.node_name
            for p in self.cluster.pods()
            if p.labels.get("gpupool.io/workload") == workload
        }

    def run_four(self, fillers: bool = True) -> float:
        """The fillers running (if asked), then the gang admitted with its first 4 pods (all
        that fit); when it started."""
        if fillers:
            self.pod("filler-a", "filler-a", 2)
            self.pod("filler-b", "filler-b", 2)
            self.cycle()
        for index in range(8):
            self.pod(
                f"elastic-{index}",
                "elastic",
                1,
                **{"gpupool.io/min-member": "4", "gpupool.io/priority-class": "urgent"},
            )
        for _ in range(5):
            self.cycle()
            if self.elastic().state == "running":
                break
        elastic = self.elastic()
        assert elastic.state == "running"
        assert Placement.objects.filter(workload=elastic).count() == 4
        bound = {name for name, node in self.nodes_of("elastic").items() if node}
        assert bound == {f"elastic-{index}" for index in range(4)}
        assert elastic.started_at is not None
        return elastic.started_at.timestamp()

    def free_two(self) -> float:
        """filler-a deleted with kubectl (its workload cancelled): 2 GPUs free; when."""
        ref = next(p.ref for p in self.cluster.pods() if p.name == "filler-a")
        self.cluster.delete_pods([ref], "kubectl delete pod filler-a")
        return self.clock.now()


def gpu_hours(workload: Workload, now: float) -> float:
    """GPU-hours of the workload's usage intervals up to ``now``."""
    total = 0.0
    for interval in UsageInterval.objects.filter(workload=workload):
        end = interval.ended_at.timestamp() if interval.ended_at else now
        total += float(interval.gpus) * (end - interval.started_at.timestamp()) / HOUR
    return total


def spent() -> Decimal:
    """What tenant a's urgent budget spent by its ledger, no window left open."""
    assert ledger_mismatches() == []
    entries = BudgetLedgerEntry.objects.filter(budget=PriorityBudget.objects.get())
    held = sum((e.gpu_hours for e in entries if e.kind in ("reserve", "settle")), Decimal(0))
    assert held == 0
    return -sum((e.gpu_hours for e in entries if e.kind == "spend"), Decimal(0))


def test_a_running_elastic_gang_grows_into_freed_capacity() -> None:
    pool = Pool()
    started = pool.run_four()
    pool.clock.advance(HOUR)
    grown_at = pool.free_two()
    result = pool.cycle()  # filler-a's end synced; the gang grows by its next two pods
    assert result.counts["grown"] == 1
    elastic = pool.elastic()
    assert elastic.state == "running" and elastic.started_at.timestamp() == started
    placed = sorted(Placement.objects.filter(workload=elastic).values_list("pod_index", flat=True))
    assert placed == [0, 1, 2, 3, 4, 5]
    bound = {name for name, node in pool.nodes_of("elastic").items() if node}
    assert bound == {f"elastic-{index}" for index in range(6)}  # its next pods, in order
    assert sorted(pool.bound) == [f"elastic-{index}" for index in range(6)]  # each once
    # The loop holds the row as it wrote it, as the database reads it: not read again.
    state = pool.loop.state
    assert state.held.get(elastic.pk) == elastic.updated_at
    now = moment(pool.clock.now())
    assert state.rows["team-a/elastic"] == read_workloads(now)["team-a/elastic"]
    # Usage: 4 GPUs from the start to the growth, then 6, per flavor.
    intervals = list(
        UsageInterval.objects.filter(workload=elastic)
        .order_by("started_at", "id")
        .values_list("gpus", "started_at", "ended_at")
    )
    assert [(float(g), s.timestamp(), e and e.timestamp()) for g, s, e in intervals] == [
        (4.0, started, grown_at),
        (6.0, grown_at, None),
    ]
    # Its history: an audit row of the workload, in words.
    history = AuditEvent.objects.get(action="control.grow_workload", object_id=str(elastic.pk))
    assert history.reason == (
        "grew from 4 to 6 of 8 pods: free capacity within queue team-a's deserved share"
    )
    assert (history.before, history.after) == ({"pods": 4}, {"pods": 6})
    pool.clock.advance(HOUR)
    pool.cycle()
    pool.cycle()  # past the flush: what ran is in the ledger up to now
    now = pool.clock.now()
    hand = (4 * (grown_at - started) + 6 * (now - grown_at)) / HOUR  # 4 GPUs 1 h, then 6
    assert gpu_hours(pool.elastic(), now) == pytest.approx(hand, abs=0.001)
    assert float(spent()) == pytest.approx(hand, abs=0.001)
    assert sorted(pool.bound) == [f"elastic-{index}" for index in range(6)]  # never again


def test_a_gang_grown_in_its_window_spends_what_it_holds_without_a_longer_reservation() -> None:
    pool = Pool()
    pool.pod("filler-a", "filler-a", 2)
    pool.pod("filler-b", "filler-b", 2)
    pool.cycle()
    for index in range(8):
        pool.pod(
            f"elastic-{index}",
            "elastic",
            1,
            **{
                "gpupool.io/min-member": "4",
                "gpupool.io/priority-class": "urgent",
                "gpupool.io/protected-runtime": "7200",
            },
        )
    for _ in range(5):
        pool.cycle()
        if pool.elastic().state == "running":
            break
    started = pool.elastic().started_at.timestamp()
    budget = PriorityBudget.objects.get()
    assert budget.remaining_gpu_hours() == 100 - 8  # 4 GPUs x 2 h reserved
    pool.clock.advance(HOUR)
    grown_at = pool.free_two()
    pool.cycle()
    assert Placement.objects.filter(workload=pool.elastic()).count() == 6
    # The reservation is never extended: the 4 GPU-hours run in it are spent, the 4 left
    # stay reserved (the window of the 6 GPUs it holds now).
    held = -sum(
        (e.gpu_hours for e in budget.entries.filter(kind__in=("reserve", "settle"))), Decimal(0)
    )
    assert held == Decimal("4.0000")
    assert budget.entries.filter(note=GREW_NOTE, kind="spend").get().gpu_hours == -4
    pool.clock.advance(2 * HOUR)
    pool.cycle()
    pool.cycle()
    now = pool.clock.now()
    hand = (4 * (grown_at - started) + 6 * (now - grown_at)) / HOUR
    assert float(spent()) == pytest.approx(hand, abs=0.001)


def test_a_growth_whose_binding_fails_leaves_the_gang_running_with_its_pods() -> None:
    pool = Pool()
    started = pool.run_four()
    pool.clock.advance(HOUR)
    grown_at = pool.free_two()
    bind_many = pool.backend.bind_many

    def refuse_the_growth(gangs: Any) -> Any:
        outcomes = bind_many({k: g for k, g in gangs.items() if k != "team-a/elastic"})
        if "team-a/elastic" in gangs:
            gang = gangs["team-a/elastic"]
            outcomes["team-a/elastic"] = BindOutcome(failed=gang[0].pod, error="node g-1 refused")
        return outcomes

    pool.backend.bind_many = refuse_the_growth  # type: ignore[method-assign]
    result = pool.cycle()
    assert result.counts["grown"] == 1 and result.counts["bind_errors"] == 1
    elastic = pool.elastic()
    assert elastic.state == "running" and elastic.started_at.timestamp() == started
    placed = sorted(Placement.objects.filter(workload=elastic).values_list("pod_index", flat=True))
    assert placed == [0, 1, 2, 3]  # the added pods' placements removed
    nodes = pool.nodes_of("elastic")
    assert {name for name, node in nodes.items() if node} == {f"elastic-{i}" for i in range(4)}
    assert not elastic.transitions.filter(from_state="running").exists()  # it never left
    # Its usage: back to the 4 GPUs it holds, from the failed growth on.
    open_usage = UsageInterval.objects.get(workload=elastic, ended_at__isnull=True)
    assert float(open_usage.gpus) == 4.0
    # The pods not bound are told why, as waiting pods are.
    ref = next(p.ref for p in pool.cluster.pods() if p.name == "elastic-4")
    told = [e["message"] for e in pool.cluster.events_of(ref) if e["reason"] == "Waiting"]
    assert told and "could not bind it to grow team-a/elastic (node g-1 refused)" in told[-1]
    now = pool.clock.now()
    assert gpu_hours(elastic, now) == pytest.approx(4 * (now - started) / HOUR, abs=0.001)
    assert now == grown_at
    pool.cycle()  # not grown again at once: the same refusal would come back
    assert Placement.objects.filter(workload=elastic).count() == 4
    assert AuditEvent.objects.filter(action="control.grow_workload").count() == 1
    pool.backend.bind_many = bind_many  # type: ignore[method-assign]
    pool.clock.advance(GROW_RETRY_S + 1)
    pool.cycle()  # tried again, and bound
    assert Placement.objects.filter(workload=elastic).count() == 6
    bound = {name for name, node in pool.nodes_of("elastic").items() if node}
    assert bound == {f"elastic-{i}" for i in range(6)}


def test_a_dry_run_grows_nothing() -> None:
    pool = Pool(deserved=4)  # the gang runs its 4 pods: all its queue deserves
    pool.run_four(fillers=False)
    elastic = pool.elastic()
    quota(Queue.objects.get(name="team-a"), pool.h100, 0, 6, 6)  # now it may run 6
    usage = list(UsageInterval.objects.filter(workload=elastic).values_list("id", "ended_at"))
    dry = pool.cycle(dry_run=True)
    assert dry.status == "dry-run" and dry.counts["grown"] == 1  # what it would grow
    assert Placement.objects.filter(workload=elastic).count() == 4
    assert list(UsageInterval.objects.filter(workload=elastic).values_list("id", "ended_at")) == (
        usage
    )
    assert not AuditEvent.objects.filter(action="control.grow_workload").exists()
    assert {name for name, node in pool.nodes_of("elastic").items() if node} == {
        f"elastic-{i}" for i in range(4)
    }
    pool.cycle()  # the real one grows it
    assert Placement.objects.filter(workload=elastic).count() == 6


@pytest.mark.parametrize("restarted", [False, True], ids=["the cycle failed", "a new process"])
def test_a_crash_between_record_and_apply_binds_the_growth_once(
    monkeypatch: pytest.MonkeyPatch, restarted: bool
) -> None:
    """The apply dies after the record grew the gang by two pods. The same loop's next
    cycles, or a new process's (a new backend and loop, nothing of the old one's memory),
    bind the two pods once and never take their placements, which no pod holds yet, for lost
    members (a new process did: the gang lost every placement and a preemption was recorded
    while its four pods ran on)."""
    pool = Pool()
    pool.run_four()
    pool.clock.advance(HOUR)
    pool.free_two()

    def crash(*args: object, **kwargs: object) -> None:
        raise RuntimeError("the worker died")

    monkeypatch.setattr(loop_module, "run_apply", crash)
    crashed = pool.loop.run_cycle()
    assert crashed.status == "failed" and "the worker died" in crashed.error
    assert Placement.objects.filter(workload=pool.elastic()).count() == 6  # recorded
    assert not pool.nodes_of("elastic")["elastic-4"]  # not applied
    monkeypatch.undo()
    if restarted:
        pool.restart()
    for _ in range(3):  # binds them (the sync leaves the gang alone until they are bound)
        pool.cycle()
    elastic = pool.elastic()
    assert elastic.state == "running"
    assert Placement.objects.filter(workload=elastic).count() == 6
    assert {name for name, node in pool.nodes_of("elastic").items() if node} == {
        f"elastic-{i}" for i in range(6)
    }
    assert sorted(pool.bound) == [f"elastic-{i}" for i in range(6)]  # each pod bound once
    assert not PreemptionEvent.objects.filter(victim=elastic).exists()
    assert UsageInterval.objects.get(workload=elastic, ended_at__isnull=True).gpus == 6
