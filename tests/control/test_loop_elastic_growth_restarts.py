"""An elastic gang's growth (``Plan.grow``) across what happens around it, on the simulated
cluster: a loop restarted after a growth inside a protected window charges the budget as
an uninterrupted loop does (``BudgetBook.load``); a loop restarted between the record and
the apply of a growth of work submitted through gpupool makes and binds the added pods;
a member pod that succeeded while the gang grows keeps its placement and is never taken
for a grown pod, nor its slot for a waiting pod's; a member lost just after a growth is
the sync's to judge (a shrink), not a slot for a waiting pod.

The pool: one 8-GPU H100 node; queue team-a deserves 8 GPUs; class ``urgent`` spends a
budget GPU-hour per GPU-hour (tenant a holds 100).
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from test_loop_elastic_growth import Pool as GrowthPool

from gpupool.accounting.models import PreemptionEvent, UsageInterval
from gpupool.control import loop as loop_module
from gpupool.quotas.models import BudgetLedgerEntry, PriorityBudget
from gpupool.quotas.queries import ledger_mismatches
from gpupool.workloads.actions import PodSetSpec, do_submit_workload
from gpupool.workloads.models import Placement, Workload, WorkloadTransition

pytestmark = pytest.mark.django_db

PRODUCT = "NVIDIA-H100-80GB-HBM3"
HOUR = 3600.0
MINUTE = 60.0


class Pool(GrowthPool):
    """The elastic growth tests' pool (8 GPUs of h100 on node g-1, queue team-a deserving
    them, class urgent with a budget), its simulated cluster and the loop (``restart``: a new
    process)."""

    def fillers(self) -> None:
        """Two kubectl pods of 2 GPUs each, running."""
        self.pod("filler-a", "filler-a", 2)
        self.pod("filler-b", "filler-b", 2)
        self.cycle()

    def free(self, *names: str) -> float:
        """Pods deleted with kubectl; when."""
        refs = [p.ref for p in self.cluster.pods() if p.name in names]
        self.cluster.delete_pods(refs, "kubectl delete pod")
        return self.clock.now()

    def elastic(self) -> Workload:
        return Workload.objects.get(namespace="team-a", name="elastic")

    def until_running(self) -> float:
        """Cycles until the gang runs; when it started."""
        for _ in range(6):
            self.cycle()
            if self.elastic().state == "running":
                started = self.elastic().started_at
                assert started is not None
                return started.timestamp()
        pytest.fail(f"elastic is {self.elastic().state}, not running")

    def pods_of(self, workload: str) -> dict[str, Any]:
        return {
            p.name: p
            for p in self.cluster.pods()
            if p.labels.get("gpupool.io/workload") == workload
            or p.annotations.get("gpupool.io/workload") == workload
            or p.name.startswith(f"{workload}-")
        }

    def on_nodes(self, workload: str) -> set[str]:
        return {name for name, p in self.pods_of(workload).items() if p.node_name}


def kubectl_gang(pool: Pool, protected: str = "", placed: int = 4) -> float:
    """Gang ``elastic``: 8 kubectl pods of 1 GPU, minimum 4, class urgent (``protected``: its
    protected runtime); admitted with the ``placed`` pods there is room for (4 beside the
    fillers). When it started."""
    annotations = {"gpupool.io/min-member": "4", "gpupool.io/priority-class": "urgent"}
    if protected:
        annotations["gpupool.io/protected-runtime"] = protected
    for index in range(8):
        pool.pod(f"elastic-{index}", "elastic", 1, **annotations)
    started = pool.until_running()
    assert Placement.objects.filter(workload=pool.elastic()).count() == placed
    return started


def spent() -> Decimal:
    """What tenant a's urgent budget spent by its ledger, no window left open."""
    assert ledger_mismatches() == []
    entries = BudgetLedgerEntry.objects.filter(budget=PriorityBudget.objects.get())
    held = sum((e.gpu_hours for e in entries if e.kind in ("reserve", "settle")), Decimal(0))
    assert held == 0
    return -sum((e.gpu_hours for e in entries if e.kind == "spend"), Decimal(0))


# -- 1. the budget of a gang grown in its window, after a restart ------------------------------


@pytest.mark.parametrize("restarted", [False, True], ids=["one loop", "a new process"])
@pytest.mark.parametrize("change", ["grown", "grown then shrunk", "shrunk"])
def test_a_restarted_loop_charges_a_gang_changed_in_its_window_as_one_loop_does(
    restarted: bool, change: str
) -> None:
    """A gang of 4 GPUs with a 2 h window (8 GPU-hours reserved) grows to 6 after 1 h: the 4
    GPU-hours run are spent, the 4 left are the window of the 6 GPUs from then on (40
    minutes). A new process loads its charge from the ledger: it read the window as begun
    when the gang started (so ended 20 minutes before the growth) and spent the 4 GPU-hours
    left at once, then charged 6 GPUs from the growth on -- 4 GPU-hours too many. Also with
    a member deleted (a shrink to 5) inside the shorter window, before the restart: the
    window the shrink keeps ends when the growth's does (a shrink moves no window); and a
    gang of 8 that only shrinks to 7 in its window. Every way, the ledger spends what a
    hand count of the GPUs held says."""
    pool = Pool()
    grows = change.startswith("grown")
    if grows:
        pool.fillers()
    started = kubectl_gang(pool, protected="7200", placed=4 if grows else 8)
    pool.clock.advance(HOUR)
    hand, held, since = 0.0, 4 if grows else 8, started  # GPU-seconds, by hand
    if grows:
        grown_at = pool.free("filler-a")
        pool.cycle()
        assert Placement.objects.filter(workload=pool.elastic()).count() == 6
        hand += held * (grown_at - since)
        held, since = 6, grown_at
    if change.endswith("shrunk"):
        pool.clock.advance(10 * MINUTE)
        pool.cycle()  # the added pods seen on their node: the growth is done
        # Its waiting pods go too, so that it does not grow back onto them at once.
        pool.free(*(f"elastic-{i}" for i in range(held - 1, 8)))
        for _ in range(3):
            pool.cycle()
            if Placement.objects.filter(workload=pool.elastic()).count() < held:
                break
        assert Placement.objects.filter(workload=pool.elastic()).count() == held - 1
        assert pool.elastic().state == "running"
        hand += held * (pool.clock.now() - since)
        held, since = held - 1, pool.clock.now()
    if restarted:
        pool.restart()
    for step in (15 * MINUTE, 15 * MINUTE, 15 * MINUTE, HOUR, 10 * MINUTE):  # past the window
        pool.clock.advance(step)
        pool.cycle()
    pool.cycle()  # a flush: what ran is in the ledger up to now
    now = pool.clock.now()
    hand += held * (now - since)
    assert float(spent()) == pytest.approx(hand / HOUR, abs=0.002)


# -- 2. a restart between a growth's record and its apply, work submitted through gpupool -------


@pytest.mark.parametrize("restarted", [False, True], ids=["the cycle failed", "a new process"])
@pytest.mark.parametrize("waiting", ["made", "deleted"])
def test_a_crash_between_record_and_apply_makes_and_binds_a_submitted_gang_s_growth(
    monkeypatch: pytest.MonkeyPatch, restarted: bool, waiting: str
) -> None:
    """Gang ``elastic`` submitted through gpupool (8 pods of 1 GPU, minimum 4) runs 4 pods
    beside the fillers; its 4 others wait (gpupool made them all), or were deleted with
    kubectl (``deleted``: the growth's pods are gpupool's to make again). filler-a goes, the
    record grows the gang by 2 and the apply dies. The same loop's next cycles, or a new
    process's, make the added pods where they are missing and bind them: no preemption, no
    shrink, each pod bound once."""
    pool = Pool()
    pool.fillers()
    do_submit_workload(
        "elastic",
        queue=pool.queue,
        pod_sets=[PodSetSpec(8, gpus=1, flavor=pool.h100, image="registry.invalid/train:1")],
        min_member=4,
        namespace="team-a",
    )
    pool.until_running()
    for _ in range(2):
        pool.cycle()
    assert len(pool.on_nodes("elastic")) == 4
    if waiting == "deleted":
        pool.free(*(name for name, p in pool.pods_of("elastic").items() if not p.node_name))
        pool.cycle()
        assert set(pool.pods_of("elastic")) == pool.on_nodes("elastic")
    pool.clock.advance(HOUR)
    pool.free("filler-a")

    def crash(*args: object, **kwargs: object) -> None:
        raise RuntimeError("the worker died")

    monkeypatch.setattr(loop_module, "run_apply", crash)
    crashed = pool.loop.run_cycle()
    assert crashed.status == "failed" and "the worker died" in crashed.error
    assert Placement.objects.filter(workload=pool.elastic()).count() == 6  # recorded
    monkeypatch.undo()
    if restarted:
        pool.restart()
    binds: list[str] = []
    bind_many = pool.backend.bind_many

    def counted(gangs: Any) -> Any:
        outcomes = bind_many(gangs)
        for name, gang in gangs.items():
            if outcomes[name].ok:
                binds.extend(b.pod.name for b in gang)
        return outcomes

    pool.backend.bind_many = counted  # type: ignore[method-assign]
    for _ in range(4):
        pool.cycle()
    elastic = pool.elastic()
    assert elastic.state == "running"
    assert Placement.objects.filter(workload=elastic).count() == 6
    assert len(pool.on_nodes("elastic")) == 6
    assert len(binds) == len(set(binds)) == 2  # the two added pods, each once
    assert not PreemptionEvent.objects.filter(victim=elastic).exists()
    assert not WorkloadTransition.objects.filter(workload=elastic, from_state="running").exists()
    # Its usage: 4 GPUs, then the 6 it grew to -- never shrunk back meanwhile.
    usage = UsageInterval.objects.filter(workload=elastic).order_by("started_at", "id")
    assert [float(gpus) for gpus in usage.values_list("gpus", flat=True)] == [4.0, 6.0]


# -- 3. a member that succeeded while the gang grows -----------------------------------------


@pytest.mark.parametrize("freed", [("filler-a",), ("filler-a", "filler-b")], ids=["by 2", "by 4"])
def test_a_member_that_succeeded_is_neither_a_grown_pod_nor_a_slot_for_one(
    freed: tuple[str, ...],
) -> None:
    """Kubectl gang ``elastic``: elastic-0 runs 30 minutes (``sleep 30m``) and succeeds; the
    rest run on, its placement kept. Then fillers go: the gang grows by 2 (or 4, to all 8
    placements) and binds as many waiting pods, each once. Before, apply counted only live
    pods as holding placements: grown by 2, it bound 3 pods (one onto the succeeded pod's
    placement, 7 pods running on 6 placements); grown by 4, it found a pod missing, bound
    none, and the next sync took the placements no pod held for lost members -- the gang
    preempted and its running pods deleted."""
    pool = Pool()
    pool.fillers()
    annotations = {"gpupool.io/min-member": "4"}
    pool.pod("elastic-0", "elastic", 1, "sleep", "30m", **annotations)
    for index in range(1, 8):
        pool.pod(f"elastic-{index}", "elastic", 1, **annotations)
    pool.until_running()
    pool.clock.advance(HOUR)
    pool.cycle()
    assert pool.pods_of("elastic")["elastic-0"].phase == "Succeeded"
    assert pool.elastic().state == "running"
    pool.free(*freed)
    for _ in range(3):
        pool.cycle()
    elastic = pool.elastic()
    grown = 4 + 2 * len(freed)
    assert elastic.state == "running"
    assert Placement.objects.filter(workload=elastic).count() == grown
    pods = pool.pods_of("elastic")
    assert pods["elastic-0"].phase == "Succeeded"
    running = {n for n, p in pods.items() if p.node_name and p.phase == "Running"}
    assert running == {f"elastic-{i}" for i in range(1, grown)}
    assert not PreemptionEvent.objects.filter(victim=elastic).exists()
    assert UsageInterval.objects.get(workload=elastic, ended_at__isnull=True).gpus == grown


def test_a_submitted_gang_grows_to_its_full_size_past_a_member_that_succeeded() -> None:
    """As above, submitted through gpupool: pod set ``lead`` (1 pod, ``sleep 30m``) and
    ``workers`` (7 pods), minimum 4. Once the lead succeeded and both fillers went, the gang
    grows to all 8 placements: the 4 waiting workers are bound (gpupool counted only its
    live pods, 7, short of the 8 placed, so it asked for pods that all exist, and bound
    none, cycle after cycle), and no pod is made again."""
    pool = Pool()
    pool.fillers()
    image = "registry.invalid/train:1"
    do_submit_workload(
        "elastic",
        queue=pool.queue,
        pod_sets=[
            PodSetSpec(
                1, gpus=1, flavor=pool.h100, name="lead", image=image, command=["sleep", "30m"]
            ),
            PodSetSpec(7, gpus=1, flavor=pool.h100, name="workers", image=image),
        ],
        min_member=4,
        namespace="team-a",
    )
    pool.until_running()
    pool.cycle()
    pods = pool.pods_of("elastic")
    made = set(pods)
    assert len(made) == 8 and len(pool.on_nodes("elastic")) == 4
    pool.clock.advance(HOUR)
    pool.cycle()
    assert pool.elastic().state == "running"
    lead = [n for n, p in pool.pods_of("elastic").items() if p.phase == "Succeeded"]
    assert len(lead) == 1
    pool.free("filler-a", "filler-b")
    for _ in range(4):
        pool.cycle()
    elastic = pool.elastic()
    assert elastic.state == "running"
    assert Placement.objects.filter(workload=elastic).count() == 8
    pods = pool.pods_of("elastic")
    assert set(pods) == made  # none made again
    running = {n for n, p in pods.items() if p.node_name and p.phase == "Running"}
    assert running == made - set(lead)
    assert not PreemptionEvent.objects.filter(victim=elastic).exists()
    assert UsageInterval.objects.get(workload=elastic, ended_at__isnull=True).gpus == 8


def test_a_member_lost_just_after_a_growth_is_a_shrink_not_a_silent_swap() -> None:
    """Kubectl gang ``elastic`` grows from 4 to 6 pods; at once (the loop still counts it as
    growing: its added pods not seen on their node yet) elastic-1, which ran before the
    growth, is deleted with kubectl. The sync judges the loss as a lost member (the pods
    left are told ``GangShrunk``), and the gang grows back onto a waiting pod -- before, the
    sync left it alone as a growth in progress and apply bound elastic-6 onto elastic-1's
    placement, the loss written nowhere."""
    pool = Pool()
    pool.fillers()
    kubectl_gang(pool)
    pool.clock.advance(HOUR)
    pool.free("filler-a")
    pool.cycle()
    assert pool.on_nodes("elastic") == {f"elastic-{i}" for i in range(6)}
    assert "team-a/elastic" in pool.loop.growing
    pool.free("elastic-1")
    for _ in range(3):
        pool.cycle()
    elastic = pool.elastic()
    assert elastic.state == "running"
    ref = next(p.ref for p in pool.cluster.pods() if p.name == "elastic-0")
    told = [e["message"] for e in pool.cluster.events_of(ref) if e["reason"] == "GangShrunk"]
    assert told and "team-a/elastic lost a member pod" in told[0]
    assert Placement.objects.filter(workload=elastic).count() == len(pool.on_nodes("elastic")) == 6
