"""A placed gang that loses a member pod, on the simulated cluster (DESIGN §3 gang scheduling,
§4 requeue).

An elastic gang (its minimum below its pod count) that keeps its minimum goes on with the pods
left: its placements, and the usage that quota and cost count, shrink to them, and the GPUs
of the pod gone are free for the next cycle. An admitted gang (bound, its pods not all seen
running yet) is treated as a running one: below its minimum it goes back whole, at or above
it shrinks -- it no longer stays admitted for ever on a placement a pod left.
"""

from __future__ import annotations

import time
from dataclasses import replace
from decimal import Decimal
from typing import Any

import pytest
from domain_builders import flavor, priority_class, queue, quota, tenant

from gpupool.accounting.models import PreemptionEvent, UsageInterval
from gpupool.clusters.base import NodeFacts, PodFacts, PodRef, ResourceAmounts
from gpupool.clusters.grouping import WorkloadKey
from gpupool.clusters.node_profiles import gpu_node_manifest
from gpupool.clusters.simulated import SimulatedBackend, SimulatedCluster, VirtualClock
from gpupool.clusters.simulated_store import MemoryStore
from gpupool.control.cluster import ClusterMirror
from gpupool.control.loop import ControlLoop
from gpupool.control.snapshot import WorkloadRow
from gpupool.control.sync import SyncDecision, SyncMemory, _gone_members, _lost_member, moment
from gpupool.inventory.actions import do_drain_node
from gpupool.inventory.models import Node
from gpupool.scheduler.types import PodPlacement, PodSetInfo, WorkloadInfo
from gpupool.workloads.actions import PodSetSpec, do_submit_workload
from gpupool.workloads.models import Placement, Workload

pytestmark = pytest.mark.django_db

START = float((int(time.time()) // 3600 + 41 * 24) * 3600)
PRODUCT = "NVIDIA-H100-80GB-HBM3"


class Pool:
    """Team ``a`` (namespace ``team-a``, 16 H100 GPUs of quota), two 8-GPU nodes, the loop."""

    def __init__(self) -> None:
        self.h100 = flavor("h100", node_labels={"nvidia.com/gpu.product": PRODUCT})
        priority_class("normal", 0, default=True)
        self.queue = queue(
            "team-a", parent=queue("root"), tenant=tenant("a", namespaces=("team-a",))
        )
        quota(self.queue, self.h100, 0, 16, 16)
        self.clock = VirtualClock(START)
        self.cluster = SimulatedCluster(MemoryStore(), self.clock)
        group = {"kind": "hgx", "prefix": "g", "gpus": 8, "product": PRODUCT}
        self.cluster.add_nodes([gpu_node_manifest(f"g-{n}", group) for n in (1, 2)])
        self.loop = ControlLoop(SimulatedBackend(self.cluster))

    def cycle(self) -> None:
        result = self.loop.run_cycle()
        assert result.status == "succeeded", result.error

    def pod(self, name: str, gpus: int, workload: str | None = None, minimum: int = 1) -> PodRef:
        """A pod made with kubectl asking ``gpus`` GPUs of queue team-a; with ``workload``, a
        member of that gang of minimum ``minimum``."""
        labels = {"gpupool.io/queue": "team-a"}
        annotations: dict[str, str] = {}
        if workload is not None:
            labels["gpupool.io/workload"] = workload
            annotations["gpupool.io/min-member"] = str(minimum)
        resources = {"nvidia.com/gpu": str(gpus), "cpu": "1", "memory": "1Gi"}
        manifest: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": "team-a", "labels": labels,
                         "annotations": annotations},
            "spec": {"schedulerName": "gpupool", "containers": [
                {"name": "main", "image": "registry.invalid/train:1",
                 "resources": {"requests": resources, "limits": resources}}]},
        }  # fmt: skip
        return self.cluster.add_pod(manifest)

    def workload(self, name: str) -> Workload:
        return Workload.objects.get(namespace="team-a", name=name)

    def until(self, name: str, state: str) -> Workload:
        for _ in range(5):
            self.cycle()
            if Workload.objects.filter(namespace="team-a", name=name, state=state).exists():
                return self.workload(name)
        pytest.fail(f"{name} is {self.workload(name).state}, not {state}")

    def members(self, workload: str) -> list[Any]:
        """The workload's pods the cluster still has (not being deleted)."""
        return [
            p
            for p in self.cluster.pods()
            if (p.labels.get("gpupool.io/workload") or p.name) == workload and not p.deleting
        ]

    def ref(self, name: str) -> PodRef:
        return next(p.ref for p in self.cluster.pods() if p.name == name)


@pytest.fixture
def pool(db: None) -> Pool:
    return Pool()


def open_gpus(workload: Workload) -> Decimal:
    """The GPUs the workload's open usage intervals count."""
    return sum(
        (u.gpus for u in UsageInterval.objects.filter(workload=workload, ended_at__isnull=True)),
        Decimal(0),
    )


def test_an_elastic_gang_losing_a_member_above_its_minimum_shrinks_and_frees_its_gpus(
    pool: Pool,
) -> None:
    # Four pods of 4 GPUs, minimum two: the pool's 16 GPUs, on both nodes.
    for index in range(4):
        pool.pod(f"elastic-{index}", 4, "elastic", minimum=2)
    running = pool.until("elastic", "running")
    assert Placement.objects.filter(workload=running).count() == 4
    assert open_gpus(running) == 16
    pool.clock.advance(600)
    pool.cluster.delete_pods([pool.ref("elastic-1")], "kubectl delete pod elastic-1")
    pool.cycle()

    shrunk = pool.workload("elastic")
    assert shrunk.state == "running"  # three pods left, above its minimum: it runs on
    placements = Placement.objects.filter(workload=shrunk)
    # Only the pods left, as the first of its pod set (how the snapshot reads a placement).
    assert sorted(p.pod_index for p in placements) == [0, 1, 2]
    left = sorted(p.node_name for p in pool.members("elastic"))
    assert sorted(p.node.name for p in placements) == left
    # Usage counts the pods left from the loss on: 16 GPUs until then, 12 after.
    closed = UsageInterval.objects.get(workload=shrunk, ended_at__isnull=False)
    assert (closed.gpus, closed.ended_at.timestamp()) == (16, START + 600)
    reopened = UsageInterval.objects.get(workload=shrunk, ended_at__isnull=True)
    assert (reopened.gpus, reopened.started_at.timestamp()) == (12, START + 600)
    assert reopened.queue_id == closed.queue_id and reopened.tenant_id == closed.tenant_id
    assert not PreemptionEvent.objects.filter(victim=shrunk).exists()  # a delete: no preemption
    assert len(pool.members("elastic")) == 3  # nothing of the gang deleted

    # The 4 GPUs the deleted pod held are free for others in the next cycle (quota 12 + 4).
    pool.pod("filler", 4)
    pool.cycle()
    filler = pool.workload("filler")
    assert filler.state in ("admitted", "running")
    assert Placement.objects.get(workload=filler).node.name == next(
        p.node_name for p in pool.cluster.pods() if p.name == "filler"
    )
    assert pool.until("elastic", "running").state == "running"
    assert Placement.objects.filter(workload=shrunk).count() == 3  # no phantom comes back


def test_an_admitted_gang_losing_a_member_below_its_minimum_goes_back_pending_whole(
    pool: Pool,
) -> None:
    do_submit_workload(
        "trainer",
        queue=pool.queue,
        pod_sets=[PodSetSpec(2, gpus=8, flavor=pool.h100)],
        min_member=2,
    )
    admitted = pool.until("trainer", "admitted")  # bound, not seen running yet
    bound = [p for p in pool.members("trainer") if p.node_name is not None]
    assert len(bound) == 2
    pool.clock.advance(60)
    pool.cluster.delete_pods([bound[0].ref], "kubectl delete")
    pool.cycle()

    back = pool.workload("trainer")
    assert back.state == "pending"  # no longer admitted for ever on a placement a pod left
    reason = back.transitions.latest("id").reason
    assert f"pod {bound[0].name} was deleted (not evicted)" in reason
    assert "1 of its pods left, below its minimum of 2" in reason
    assert "gpupool makes it again" in reason
    assert not Placement.objects.filter(workload=admitted).exists()
    assert open_gpus(back) == 0
    assert not PreemptionEvent.objects.filter(victim=back).exists()
    # The member left is deleted with it (no half-gang holds a node), and the gang is made
    # again and runs whole.
    assert all(p.node_name is None for p in pool.members("trainer"))
    assert pool.until("trainer", "running").state == "running"
    assert len([p for p in pool.members("trainer") if p.node_name]) == 2


def test_an_admitted_elastic_gang_losing_a_member_at_its_minimum_shrinks_and_runs(
    pool: Pool,
) -> None:
    for index in range(3):
        pool.pod(f"wide-{index}", 4, "wide", minimum=2)
    admitted = pool.until("wide", "admitted")
    assert Placement.objects.filter(workload=admitted).count() == 3
    pool.clock.advance(60)
    pool.cluster.delete_pods([pool.ref("wide-2")], "kubectl delete pod wide-2")
    pool.cycle()

    shrunk = pool.workload("wide")
    assert shrunk.state == "admitted"
    assert sorted(p.pod_index for p in Placement.objects.filter(workload=shrunk)) == [0, 1]
    assert open_gpus(shrunk) == 8
    assert len(pool.members("wide")) == 2  # its pods left go on
    # Its two pods run: it starts, on the placement of the pods left.
    assert pool.until("wide", "running").state == "running"
    assert Placement.objects.filter(workload=shrunk).count() == 2


# -- the decision alone: which placements a gang of two pod sets keeps ----------------------


def placed_gang(state: str = "running") -> WorkloadRow:
    """A gang of two pod sets (two launchers of no GPU, then three workers of 8 GPUs), all
    five placed, minimum three (ids 11 and 12 for its pod sets)."""
    launchers = PodSetInfo(count=2, gpus=0, flavors=())
    workers = PodSetInfo(count=3, gpus=8, flavors=("h100",))
    placement = (
        PodPlacement("n-1", ()),
        PodPlacement("n-2", ()),
        PodPlacement("n-1", tuple(range(8))),
        PodPlacement("n-2", tuple(range(8))),
        PodPlacement("n-3", tuple(range(8))),
    )
    info = WorkloadInfo(
        "team-a/mixed", "team-a", "normal", (launchers, workers), START,
        state="running", min_member=3, started_at=START, placement=placement,
    )  # fmt: skip
    return WorkloadRow(7, info, (11, 12), state=state, origin="bare")


def member(name: str, node: str) -> PodFacts:
    """A running pod of the gang: a launcher asks no GPU, a worker 8."""
    asks = ResourceAmounts(gpus=8 if name.startswith("worker") else 0)
    return PodFacts("team-a", name, f"uid-{name}", node_name=node, phase="Running", requests=asks)


def decide_loss(
    row: WorkloadRow, left: list[PodFacts], lost: PodFacts
) -> tuple[SyncDecision, SyncMemory]:
    decision, memory = SyncDecision(at=moment(START + 60)), SyncMemory()
    memory.departed[row.info.name] = [replace(lost, deleting=True)]
    gone = _gone_members(row, left, memory.departed[row.info.name])
    assert gone == 1
    _lost_member(
        decision,
        memory,
        ClusterMirror(nodes={n: NodeFacts(n) for n in ("n-1", "n-2", "n-3")}),
        row,
        WorkloadKey("team-a", "mixed"),
        left,
        [p for p in left if p.node_name is not None],
        memory.departed[row.info.name],
        gone,
        decision.at,
    )
    return decision, memory


def test_a_worker_lost_from_the_last_pod_set_shrinks_the_gang_renumbered() -> None:
    row = placed_gang()
    left = [
        member("launcher-0", "n-1"),
        member("launcher-1", "n-2"),
        member("worker-0", "n-1"),
        member("worker-2", "n-3"),
    ]
    decision, memory = decide_loss(row, left, member("worker-1", "n-2"))
    assert decision.steps == [] and decision.release == []
    (shrink,) = decision.shrinks
    # The launchers keep theirs; the workers on n-1 and n-3 become workers 0 and 1.
    assert shrink.keep == ((11, 0, 0), (11, 1, 1), (12, 0, 0), (12, 2, 1))
    assert row.info.name not in memory.departed  # the loss is written: nothing left to tell
    (event,) = decision.events
    assert event.reason == "GangShrunk" and len(event.pods) == 4


def test_a_loss_a_placement_cannot_hold_moves_the_gang_out_whole() -> None:
    row = placed_gang()
    left = [
        member("launcher-0", "n-1"),
        member("worker-0", "n-1"),
        member("worker-1", "n-2"),
        member("worker-2", "n-3"),
    ]
    decision, _ = decide_loss(row, left, member("launcher-1", "n-2"))
    assert decision.shrinks == []
    (step,) = decision.steps  # a bare pods' gang, deleted: cancelled, as below its minimum
    assert step.to_state == "cancelled"
    assert "not the first of each of its pod sets" in step.reason
    (release,) = decision.release
    assert len(release.pods) == 4  # no half-gang


def test_an_admitted_gang_counts_the_pods_apply_is_to_bind_as_members_not_losses() -> None:
    row = placed_gang("admitted")
    waiting = replace(member("worker-2", "n-3"), node_name=None, phase="Pending")
    pods = [
        member("launcher-0", "n-1"),
        member("launcher-1", "n-2"),
        member("worker-0", "n-1"),
        member("worker-1", "n-2"),
        waiting,
    ]
    assert _gone_members(row, pods, None) == 0  # bound, or to be bound: nothing lost
    assert _gone_members(replace(row, state="running"), pods, None) == 1


def test_an_admitted_gangs_pod_to_bind_keeps_a_placement_of_its_own_pod_set() -> None:
    row = placed_gang("admitted")
    waiting = replace(member("worker-2", "n-3"), node_name=None, phase="Pending")
    left = [member("launcher-0", "n-1"), member("worker-0", "n-1"), member("worker-1", "n-2")]
    decision, _ = decide_loss(row, [*left, waiting], member("launcher-1", "n-2"))
    # The worker to bind needs a worker's placement: the launchers' set then lacks a pod
    # before the workers', which no placement holds -- not a shrink that strands the worker.
    assert decision.shrinks == []
    assert [s.to_state for s in decision.steps] == ["cancelled"]
    # A worker lost instead: the worker to bind takes the first worker's placement left.
    pods = [member("launcher-0", "n-1"), member("launcher-1", "n-2"), left[1], waiting]
    decision, _ = decide_loss(row, pods, member("worker-1", "n-2"))
    (shrink,) = decision.shrinks
    assert shrink.keep == ((11, 0, 0), (11, 1, 1), (12, 0, 0), (12, 1, 1))


def test_an_elastic_gang_losing_members_with_a_failed_node_records_their_gpu_hours_lost(
    pool: Pool,
) -> None:
    """At or above its minimum the gang shrinks (it runs on), and what went with the failed
    node is a preemption event as a gang lost whole to a node failure records: reason
    ``node-failure``, the lost members' GPUs, and their GPU-hours since the gang started --
    so the Preemptions history and the cost reports count them."""
    for index in range(4):  # four pods of 4 GPUs, minimum two: two on each 8-GPU node
        pool.pod(f"elastic-{index}", 4, "elastic", minimum=2)
    running = pool.until("elastic", "running")
    assert running.started_at is not None
    pool.clock.advance(1800)
    pool.cluster.set_node_ready("g-2", False)
    pool.clock.advance(pool.cluster.not_ready_eviction_s + 1)  # its pods deleted meanwhile
    pool.cycle()

    shrunk = pool.workload("elastic")
    assert shrunk.state == "running"  # two pods left, at its minimum: it runs on
    assert sorted(p.node.name for p in Placement.objects.filter(workload=shrunk)) == ["g-1"] * 2
    event = PreemptionEvent.objects.get(victim=shrunk)
    hours = Decimal((event.at - running.started_at).total_seconds()) / Decimal(3600)
    assert (event.reason, event.gpus_freed, event.nodes) == ("node-failure", 8, ["g-2"])
    assert event.lost_gpu_hours == (8 * hours).quantize(Decimal("0.0001")) > 0
    assert (event.victim_queue_id, event.victim_tenant_id) == (
        shrunk.queue_id,
        shrunk.queue.tenant_id,
    )
    assert event.preemptor_id is None
    pool.cycle()  # recorded once, not again at the next sync
    assert PreemptionEvent.objects.filter(victim=shrunk).count() == 1


def test_an_elastic_gang_member_evicted_outside_gpupool_is_an_admin_preemption(
    pool: Pool,
) -> None:
    """A member evicted by someone else (the Eviction API's ``DisruptionTarget``: a drain, a
    manual eviction) costs what it does for a gang lost whole: an ``admin`` preemption event
    for its GPUs, though the gang runs on; a member deleted with kubectl costs none (the first
    test of this file)."""
    for index in range(4):
        pool.pod(f"elastic-{index}", 4, "elastic", minimum=2)
    running = pool.until("elastic", "running")
    pool.clock.advance(900)
    evicted = pool.ref("elastic-3")
    node = next(p.node_name for p in pool.cluster.pods() if p.name == "elastic-3")
    outcome = pool.cluster.evict([evicted], "drain")
    assert [r.status for r in outcome.results] == ["evicted"]
    pool.cycle()

    shrunk = pool.workload("elastic")
    assert shrunk.state == "running"  # three pods left, above its minimum
    event = PreemptionEvent.objects.get(victim=shrunk)
    assert (event.reason, event.gpus_freed, event.nodes) == ("admin", 4, [node])
    hours = Decimal((event.at - running.started_at).total_seconds()) / Decimal(3600)
    assert event.lost_gpu_hours == (4 * hours).quantize(Decimal("0.0001")) > 0


def test_a_refused_eviction_of_a_shrunk_gang_keeps_the_event_of_its_lost_members(
    pool: Pool,
) -> None:
    """A drain's eviction that a PodDisruptionBudget refuses takes back the preemption event
    the eviction recorded -- and only that one: the node-failure event of the members the
    gang lost before stands (before, every event of the run was deleted)."""
    for index in range(4):
        pool.pod(f"elastic-{index}", 4, "elastic", minimum=2)
    pool.until("elastic", "running")
    pool.clock.advance(1800)
    pool.cluster.set_node_ready("g-2", False)
    pool.clock.advance(pool.cluster.not_ready_eviction_s + 1)
    pool.cycle()
    shrunk = pool.workload("elastic")
    assert list(PreemptionEvent.objects.filter(victim=shrunk).values_list("reason", flat=True)) == [
        "node-failure"
    ]
    pool.cluster.add_disruption_budget(
        "team-a", "guard", {"gpupool.io/workload": "elastic"}, min_available=2
    )
    do_drain_node(Node.objects.get(name="g-1"), acting_user=None, reason="maintenance")
    pool.cycle()

    refused = pool.workload("elastic")
    assert refused.state == "running" and refused.eviction_refusal  # the budget said no
    reasons = PreemptionEvent.objects.filter(victim=refused).values_list("reason", flat=True)
    assert list(reasons) == ["node-failure"]


def test_a_gang_left_with_one_pod_says_one_pod() -> None:
    """The ``GangShrunk`` Event counts the pods left in words: "1 pod", not "1 pods"."""
    workers = PodSetInfo(count=2, gpus=8, flavors=("h100",))
    info = WorkloadInfo(
        "team-a/mixed", "team-a", "normal", (workers,), START, state="running", min_member=1,
        started_at=START, placement=(PodPlacement("n-1", tuple(range(8))),
                                     PodPlacement("n-2", tuple(range(8)))),
    )  # fmt: skip
    decision, _ = decide_loss(
        WorkloadRow(7, info, (11,), state="running", origin="bare"),
        [member("worker-0", "n-1")],
        member("worker-1", "n-2"),
    )
    (event,) = decision.events
    assert "it goes on with 1 pod, at or above its minimum of 1" in event.message
