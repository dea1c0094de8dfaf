"""An admitted gang submitted through gpupool (not running yet) one of whose pods ends on its
node -- succeeds, or fails -- before all of its pods are bound, on the simulated cluster.

gpupool binds an admission's gang whole (``bind_many``), but the Kubernetes API binds pod by
pod: a loop that dies part-way through a gang's bindings leaves some members bound and the
others waiting, and the next cycle binds those (``gang_bindings``: pods already on a
placement's node keep it). A member bound then may end before that cycle. It ran in this
admission, so it holds its placement; gpupool made it, and cannot make it again (its name is
taken). Before, apply counted only the live pods gpupool made against the workload's pods: it
asked for the missing one every cycle, made nothing (the name exists) and never bound the
waiting members -- the gang stalled, admitted, holding its GPUs. Bound whole, with a member
that ended before the next sync, it asked for that pod at every cycle.

Beside it: a requeued gang submitted through gpupool whose member ended in its earlier run
(that pod is deleted and made again: its name was taken, so it stayed pending for ever); and
a kubectl gang of two pod sets growing past a member that ended (grouping numbers only
the pod sets of live pods, and apply took those numbers for the row's).

The pool: one 8-GPU H100 node; queue team-a deserves 8 GPUs.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from domain_builders import flavor, priority_class, queue, quota, tenant

from gpupool.accounting.models import PreemptionEvent
from gpupool.clusters.base import BindOutcome, PodBinding
from gpupool.clusters.node_profiles import gpu_node_manifest
from gpupool.clusters.simulated import SimulatedBackend, SimulatedCluster, VirtualClock
from gpupool.clusters.simulated_store import MemoryStore
from gpupool.control.apply import REMADE
from gpupool.control.loop import ControlLoop
from gpupool.workloads.actions import PodSetSpec, do_submit_workload
from gpupool.workloads.models import Placement, Workload

pytestmark = pytest.mark.django_db

START = float((int(time.time()) // 3600 + 45 * 24) * 3600)
PRODUCT = "NVIDIA-H100-80GB-HBM3"
IMAGE = "registry.invalid/train:1"
MINUTE = 60.0


class Pool:
    """The pool above, its simulated cluster and the loop (``restart``: a new process)."""

    def __init__(self) -> None:
        self.h100 = flavor("h100", node_labels={"nvidia.com/gpu.product": PRODUCT})
        priority_class("normal", 0, default=True)
        team = tenant("a", namespaces=("team-a",))
        self.queue = queue("team-a", parent=queue("root"), tenant=team)
        quota(self.queue, self.h100, 0, 8, 8)
        self.clock = VirtualClock(START)
        self.cluster = SimulatedCluster(MemoryStore(), self.clock)
        group = {"kind": "hgx", "prefix": "g", "gpus": 8, "product": PRODUCT}
        self.cluster.add_nodes([gpu_node_manifest("g-1", group)])
        self.restart()

    def restart(self) -> None:
        self.backend = SimulatedBackend(self.cluster)
        self.loop = ControlLoop(self.backend)

    def cycle(self) -> None:
        result = self.loop.run_cycle()
        assert result.status == "succeeded", result.error

    def gang(self) -> Workload:
        return Workload.objects.get(namespace="team-a", name="gang")

    def pods(self) -> dict[str, Any]:
        return {p.name: p for p in self.cluster.pods() if p.name.startswith("gang-")}


def submit(pool: Pool, lead: Sequence[str]) -> None:
    """Gang ``gang``: pod set ``lead`` (1 pod of 1 GPU running ``lead``) and ``workers`` (3 pods
    of 1 GPU), all four or none."""
    do_submit_workload(
        "gang",
        queue=pool.queue,
        pod_sets=[
            PodSetSpec(1, gpus=1, flavor=pool.h100, name="lead", image=IMAGE, command=lead),
            PodSetSpec(3, gpus=1, flavor=pool.h100, name="workers", image=IMAGE),
        ],
        namespace="team-a",
    )


def crash_part_way(pool: Pool, bound: int) -> list[str]:
    """The next apply binds the gang's first ``bound`` pods and dies, as a process killed
    between two of the API's Bindings does. The pods bound then, by name."""
    original = pool.backend.bind_many
    first: list[str] = []

    def part_way(gangs: Mapping[str, Sequence[PodBinding]]) -> dict[str, BindOutcome]:
        gang = gangs.get("team-a/gang")
        if gang is None or first:
            return original(gangs)
        part = list(gang)[:bound]
        assert original({"team-a/gang": part})["team-a/gang"].ok
        first.extend(b.pod.name for b in part)
        raise RuntimeError("the worker died while binding")

    pool.backend.bind_many = part_way  # type: ignore[method-assign]
    return first


def end_the_lead(pool: Pool, how: str) -> None:
    """The lead pod, bound, ends on its node: its ``sleep`` is over, or its GPU failed."""
    if how == "succeeded":
        pool.clock.advance(10 * MINUTE)
        return
    lead = next(n for n in pool.pods() if n.startswith("gang-lead-"))
    holding = next(h for h in pool.cluster.gpus_in_use() if h.pod.name == lead)
    pool.cluster.set_gpu_health("g-1", holding.gpus[0], False, "Xid 79")


def bind_then_end(pool: Pool, how: str, *, restarted: bool) -> tuple[set[str], str]:
    """The apply binds the lead and one worker and dies; the lead ends (its ``sleep 5m``
    over, or its GPU failed); then the same loop's cycles, or a new process's. The pods made,
    and the lead's name."""
    submit(pool, ["sleep", "5m"])
    first = crash_part_way(pool, 2)
    for _ in range(4):
        result = pool.loop.run_cycle()
        if first:
            break
        assert result.status == "succeeded", result.error
    assert result.status == "failed" and "the worker died" in result.error
    assert len(first) == 2 and first[0].startswith("gang-lead-")
    made = set(pool.pods())
    assert len(made) == 4
    end_the_lead(pool, how)
    lead = pool.pods()[first[0]]
    assert lead.phase == ("Succeeded" if how == "succeeded" else "Failed")
    assert lead.node_name == "g-1"
    if restarted:
        pool.restart()
    for _ in range(4):
        pool.cycle()
    return made, first[0]


@pytest.mark.parametrize("restarted", [False, True], ids=["the same loop", "a new process"])
@pytest.mark.parametrize("how", ["succeeded", "failed"])
def test_a_member_that_ended_before_the_rest_were_bound_does_not_stall_the_gang(
    restarted: bool, how: str
) -> None:
    """After the crash part-way and the lead's end, the two waiting workers are bound onto
    the gang's placements left -- each pod bound once, none made again, no preemption, the
    lead's placement kept. Before, they waited for ever, the gang admitted with its GPUs."""
    pool = Pool()
    made, lead = bind_then_end(pool, how, restarted=restarted)
    pods = pool.pods()
    assert set(pods) == made  # none made again
    running = {n for n, p in pods.items() if p.node_name and p.phase == "Running"}
    assert running == made - {lead}
    gang = pool.gang()
    assert gang.state in ("admitted", "running")
    assert Placement.objects.filter(workload=gang).count() == 4
    assert not PreemptionEvent.objects.filter(victim=gang).exists()


def test_an_admitted_gang_whose_member_ended_on_its_node_starts_running() -> None:
    """Once its other members run, the gang is running (not left admitted until all end)."""
    pool = Pool()
    bind_then_end(pool, "succeeded", restarted=False)
    assert pool.gang().state == "running"


def test_a_gang_bound_whole_whose_member_ended_asks_for_no_pods() -> None:
    """The gang bound whole, its lead ends before the next sync saw it run: gpupool does not
    ask for the lead again at each cycle (its name is taken: nothing was ever made)."""
    pool = Pool()
    submit(pool, ["sleep", "1m"])
    for _ in range(4):
        pool.cycle()
        if len([p for p in pool.pods().values() if p.node_name]) == 4:
            break
    pool.clock.advance(5 * MINUTE)
    asked: list[str] = []
    new_pods = pool.loop._new_pods

    def spy(rows: list[Any]) -> list[Any]:
        asked.extend(row.info.name for row in rows)
        return new_pods(rows)

    pool.loop._new_pods = spy  # type: ignore[method-assign]
    for _ in range(3):
        pool.cycle()
    phases = sorted(p.phase for p in pool.pods().values())
    assert phases == ["Running", "Running", "Running", "Succeeded"]
    assert "team-a/gang" not in asked


def test_a_requeued_gang_makes_again_a_member_that_ended_in_its_earlier_run() -> None:
    """The gang runs; its lead succeeds; an urgent pod of 8 GPUs preempts the gang, which is
    requeued, and then goes. The gang runs again, all four pods: the lead of the earlier run
    is deleted (an Event says why) and made again under its name. Before, gpupool asked for
    the lead at every cycle and made nothing (its name was taken): pending for ever."""
    pool = Pool()
    priority_class("urgent", 2000)
    submit(pool, ["sleep", "5m"])
    for _ in range(4):
        pool.cycle()
    assert pool.gang().state == "running"
    pool.clock.advance(10 * MINUTE)
    pool.cycle()
    lead = next(p for n, p in pool.pods().items() if n.startswith("gang-lead-"))
    assert lead.phase == "Succeeded"
    kubectl_pod(pool, "big", 8, "1", **{"gpupool.io/priority-class": "urgent"})
    for _ in range(3):
        pool.cycle()
    assert pool.gang().state == "pending"
    assert PreemptionEvent.objects.filter(victim=pool.gang()).count() == 1
    pool.cluster.delete_pods([p.ref for p in pool.cluster.pods() if p.name == "big"], "done")
    for _ in range(4):
        pool.cycle()
    assert pool.gang().state == "running"
    pods = pool.pods()
    assert {n: p.phase for n, p in pods.items()} == dict.fromkeys(pods, "Running")
    assert len(pods) == 4 and pods[lead.name].uid != lead.uid
    told = [e["message"] for e in pool.cluster.events_of(lead.ref) if e["reason"] == "Deleted"]
    assert told == [f"deleted by gpupool: {REMADE}"]


# -- a kubectl gang of several pod sets, one member of which ended, grows ------------------------


def kubectl_pod(pool: Pool, name: str, gpus: int, cpu: str, *command: str, **notes: str) -> None:
    """A pod made with kubectl in team-a for workload ``elastic`` (``command``: what it runs,
    else until deleted)."""
    resources = {"nvidia.com/gpu": str(gpus), "cpu": cpu, "memory": "1Gi"}
    container: dict[str, Any] = {
        "name": "main",
        "image": IMAGE,
        "resources": {"requests": resources, "limits": resources},
    }
    if command:
        container["command"] = list(command)
    workload = "elastic" if name.startswith("elastic-") else name
    labels = {"gpupool.io/queue": "team-a", "gpupool.io/workload": workload}
    pool.cluster.add_pod(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name,
                "namespace": "team-a",
                "labels": labels,
                "annotations": notes,
            },
            "spec": {"schedulerName": "gpupool", "containers": [container]},
        }
    )


@pytest.mark.parametrize(
    "leads",
    [("elastic-a-0",), ("elastic-a-0", "elastic-a-1"), ("elastic-a-0", "elastic-c-0")],
    ids=["its only lead", "one of two leads", "the lead named first"],
)
def test_a_kubectl_gang_of_two_pod_sets_grows_past_a_member_that_ended(
    leads: tuple[str, ...],
) -> None:
    """Kubectl gang ``elastic``: a pod set of leads (2 CPUs, 1 GPU; elastic-a-0 runs ``sleep
    30m``) and one of 6 workers elastic-b-* (1 CPU, 1 GPU), minimum 4, admitted with 4
    placements beside two fillers of 2 GPUs. elastic-a-0 succeeds; filler-a goes: the gang
    grows by 2 workers, bound onto the added placements, the ended lead's kept. Grouping
    counts live pods only, and apply took its pod sets' numbers for the row's: the only
    lead ended, the workers were taken for the leads and the gang never grew; one of two,
    the lead was missing, nothing was bound and the next sync preempted the gang; with
    elastic-c-0 the workers (elastic-b-0 first) were numbered before the leads."""
    pool = Pool()
    kubectl_pod(pool, "filler-a", 2, "1")
    kubectl_pod(pool, "filler-b", 2, "1")
    pool.cycle()
    notes = {"gpupool.io/min-member": "4"}
    kubectl_pod(pool, "elastic-a-0", 1, "2", "sleep", "30m", **notes)
    for name in leads[1:]:
        kubectl_pod(pool, name, 1, "2", **notes)
    for index in range(6):
        kubectl_pod(pool, f"elastic-b-{index}", 1, "1", **notes)
    for _ in range(4):
        pool.cycle()
    elastic = Workload.objects.get(namespace="team-a", name="elastic")
    assert elastic.state == "running"
    assert Placement.objects.filter(workload=elastic).count() == 4
    pool.clock.advance(60 * MINUTE)
    pool.cycle()
    pods = {p.name: p for p in pool.cluster.pods() if p.name.startswith("elastic-")}
    assert pods["elastic-a-0"].phase == "Succeeded"
    on_nodes = {n for n, p in pods.items() if p.node_name}
    pool.cluster.delete_pods(
        [p.ref for p in pool.cluster.pods() if p.name == "filler-a"], "kubectl delete pod"
    )
    for _ in range(3):
        pool.cycle()
    elastic.refresh_from_db()
    assert elastic.state == "running"
    assert Placement.objects.filter(workload=elastic).count() == 6
    pods = {p.name: p for p in pool.cluster.pods() if p.name.startswith("elastic-")}
    running = {n for n, p in pods.items() if p.node_name and p.phase == "Running"}
    assert len(running) == 5 and running > on_nodes - {"elastic-a-0"}
    assert pods["elastic-a-0"].phase == "Succeeded"
    assert not PreemptionEvent.objects.filter(victim=elastic).exists()
