"""The browser tests' world: the demo pool (``seed-demo``) with some activity on it, made
through the actions as the control loop would record it, so every page has something to
show: running and waiting work of several teams, a preemption, the last cycles, and a few
days of finished work for a what-if to replay."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from django.contrib.auth import get_user_model
from django.db.models import QuerySet
from django.utils import timezone
from domain_builders import explained

from gpupool.accounting.actions import do_record_preemption
from gpupool.cli.subcommands.seed_demo import demo_password, seed
from gpupool.control.actions import do_finish_cycle, do_start_cycle
from gpupool.inventory.models import Flavor, Node
from gpupool.quotas.models import Queue
from gpupool.workloads.actions import (
    PlacementSpec,
    PodSetSpec,
    do_submit_workload,
    do_transition_workload,
)
from gpupool.workloads.models import Workload


@dataclass
class World:
    """What the tests need to know of the world."""

    now: datetime

    @staticmethod
    def password(username: str) -> str:
        """A demo user's password."""
        return demo_password(username)


def nodes(prefix: str) -> QuerySet[Node]:
    """The demo nodes whose name starts with ``prefix``, by name."""
    return Node.objects.filter(name__startswith=prefix).order_by("name")


def run(name: str, team: str, flavor: str, node_names: list[str], gpus: int, at: datetime) -> Any:
    """A workload of ``team`` running ``len(node_names)`` pods of ``gpus`` GPUs each."""
    user = get_user_model().objects.get(username=f"{team}-member")
    workload = do_submit_workload(
        name,
        queue=Queue.objects.get(name=team),
        pod_sets=[
            PodSetSpec(count=len(node_names), gpus=gpus, flavor=Flavor.objects.get(name=flavor))
        ],
        submitter=user,
        expected_runtime_s=6 * 3600,
        at=at - timedelta(minutes=20),
    )
    placements = [
        PlacementSpec("main", index, Node.objects.get(name=node), list(range(gpus)))
        for index, node in enumerate(node_names)
    ]
    do_transition_workload(workload, "admitted", reason="placed", at=at, placements=placements)
    do_transition_workload(workload, "running", reason="pods running", at=at)
    return workload


def wait(
    name: str, team: str, gpus: int, count: int, reason: str, detail: str, at: datetime
) -> Any:
    """A pending workload of ``team`` with the explanation a cycle left on it."""
    workload = do_submit_workload(
        name,
        queue=Queue.objects.get(name=team),
        pod_sets=[PodSetSpec(count=count, gpus=gpus, flavor=Flavor.objects.get(name="h100"))],
        submitter=get_user_model().objects.get(username=f"{team}-member"),
        expected_runtime_s=4 * 3600,
        at=at,
    )
    # What the control loop writes for a pending workload each cycle (its explanation).
    explained(workload, reason, detail, queue_rank=float(workload.pk))
    return workload


def demo_world() -> World:
    """Seed the demo, then put work on it."""
    seed()
    now = timezone.now().replace(microsecond=0)
    h100 = [node.name for node in nodes("h100")]
    gb200 = [node.name for node in nodes("gb200")]
    # running: nlp trains on 4 HGX nodes and half the NVL72 rack; vision, speech, search,
    # ads and recsys hold a node or two each
    run("llm-pretrain", "nlp", "h100", h100[0:4], 8, now - timedelta(hours=3))
    run("nvl-train", "nlp", "gb200", gb200[0:9], 4, now - timedelta(hours=2))
    run("detector", "vision", "h100", h100[4:6], 8, now - timedelta(hours=1))
    run("asr-finetune", "speech", "h100", h100[8:9], 8, now - timedelta(minutes=40))
    run("ranker", "search", "h100", h100[10:12], 8, now - timedelta(hours=5))
    run("ctr-model", "ads", "h100", h100[12:13], 4, now - timedelta(minutes=30))
    victim = run("recsys-sweep", "recsys", "h100", h100[14:15], 8, now - timedelta(hours=4))
    do_transition_workload(victim, "preempted", reason="reclaimed", at=now - timedelta(minutes=10))
    do_transition_workload(victim, "pending", reason="requeued", at=now - timedelta(minutes=10))
    # waiting, with the reasons a cycle gives
    wait("big-eval", "nlp", 8, 4, "quota", "nlp would exceed its capability of 160 GPUs.", now)
    wait("seg-16", "vision", 8, 2, "topology", "no NVLink domain holds 16 free GPUs together.", now)
    # a preemption: recsys's sweep gave way to search's ranker
    do_record_preemption(
        victim,
        reason="reclaim",
        at=now - timedelta(minutes=10),
        gpus_freed=8,
        lost_gpu_hours=Decimal("2.5"),
        preemptor=Workload.objects.get(name="ranker"),
    )
    # finished work of the last days, for the what-if to replay
    for day in range(1, 4):
        for index, team in enumerate(("nlp", "vision", "search")):
            start = now - timedelta(days=day, hours=index)
            done = run(f"job-{team}-{day}", team, "h100", h100[24 + index : 25 + index], 8, start)
            do_transition_workload(done, "succeeded", reason="done", at=start + timedelta(hours=2))
    # the last cycles, as the loop records them: what each team's queue held, and samples
    # of the fragmentation
    held = {"nlp": {"h100": 32.0, "gb200": 36.0}, "vision": {"h100": 16.0}}
    held |= {"speech": {"h100": 8.0}, "search": {"h100": 16.0}, "ads": {"h100": 4.0}}
    for minutes in (50, 40, 30, 20, 10, 3, 2, 1):
        cycle = do_start_cycle(at=now - timedelta(minutes=minutes))
        cycle.cluster_at = cycle.started_at  # the cluster's clock the loop records
        recsys = {"recsys": {"h100": 8.0 if minutes > 10 else 0.0}}
        queues = {
            queue: {f: {"allocated": gpus, "borrowed": 0.0, "lent": 0.0} for f, gpus in by.items()}
            for queue, by in (held | recsys).items()
        }
        do_finish_cycle(
            cycle,
            at=now - timedelta(minutes=minutes) + timedelta(milliseconds=840),
            status="succeeded",
            nodes=64,
            workloads=9,
            admitted=1 if minutes == 3 else 0,
            pending=2,
            timings={"sync": 0.12, "snapshot": 0.08, "plan": 0.35, "record": 0.2, "apply": 0.09},
            outcome={
                "queues": queues,
                "fragmentation": {
                    "h100": {"free": 40.0 + minutes / 5, "fragmented": 6.0, "largest_gang": 8},
                    "gb200": {"free": 36.0, "fragmented": 0.0, "largest_gang": 36},
                },
            },
        )
    return World(now=now)
