"""Builders for the control tests: a small pool with every kind of thing a snapshot holds.

Everything goes through the actions, except the fields only the control loop writes (it has
no action for them yet), which ``loop_sets`` writes directly.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any

from domain_builders import flavor, node, priority_class, queue, quota, tenant

from gpupool.accounting.actions import do_record_preemption
from gpupool.inventory.actions import do_set_node_cordoned
from gpupool.inventory.models import Flavor, Node
from gpupool.quotas.actions import (
    do_grant_budget,
    do_reserve_budget,
    do_settle_reservation,
    do_spend_budget,
)
from gpupool.quotas.models import PriorityClass, Queue
from gpupool.scheduler.types import PolicyInfo
from gpupool.workloads.actions import (
    PlacementSpec,
    PodSetSpec,
    do_submit_workload,
    do_transition_workload,
)
from gpupool.workloads.models import Workload

NOW = datetime(2026, 11, 29, 10, 0, 0, 123456, tzinfo=UTC)
NOVEMBER = (date(2026, 11, 1), date(2026, 12, 1))
POLICY = PolicyInfo()


def minutes_before_now(minutes: float) -> datetime:
    """A time shortly before the snapshot's."""
    return NOW - timedelta(minutes=minutes)


def submit(
    name: str, on: Queue, *pod_sets: PodSetSpec, minute: float = 60, **fields: Any
) -> Workload:
    """A pending workload submitted ``minute`` minutes before now."""
    return do_submit_workload(
        name, queue=on, pod_sets=list(pod_sets), at=minutes_before_now(minute), **fields
    )


def run(workload: Workload, *pods: PlacementSpec, minute: float = 50, start: bool = True) -> None:
    """Admit the workload on ``pods`` ``minute`` minutes before now; start it a minute later."""
    do_transition_workload(
        workload, "admitted", reason="fits", at=minutes_before_now(minute), placements=pods
    )
    if start:
        do_transition_workload(
            workload, "running", reason="pods started", at=minutes_before_now(minute - 1)
        )


def loop_sets(workload: Workload, **fields: Any) -> None:
    """Write the fields only the control loop writes (no action exists for them yet)."""
    Workload.objects.filter(pk=workload.pk).update(**fields)


@dataclass
class Pool:
    """The rows the tests look up again."""

    flavors: dict[str, Flavor]
    nodes: dict[str, Node]
    queues: dict[str, Queue]
    classes: dict[str, PriorityClass]
    workloads: dict[str, Workload]


def build_pool() -> Pool:
    """A small pool with every kind of thing the snapshot holds.

    Flavors: exclusive h100 and gb200, shared l4s, MIG a100-3g.40gb. Nodes: n1 (GPU 3
    broken), n2 (cordoned), g1 and g2 in NVLink domain nvl72, s1 (shared), m1 (MIG, two
    instances per card, card 1 broken). Queues root > org > team-a (tenant a, every field
    set), team-b (tenant b). Workloads: running (victim, gang, notebook), admitted (slice),
    pending (preemptor, nominated, with victim leaving for it; trainer; small-slice and
    small-notebook that fit; rush, which evicts gang; ml/victim in another namespace) and
    finished ones that a snapshot leaves out. Budgets of this period and the last, and
    preemptions inside and outside the contracts' horizon.
    """
    h100 = flavor("h100")
    gb200 = flavor("gb200", gpu_memory_gb=186, hourly_price=Decimal(6))
    l4s = flavor("l4s", sharing="shared", gpu_memory_gb=24, hourly_price=Decimal("0.85"))
    mig = flavor(
        "a100-3g.40gb",
        sharing="mig",
        gpu_model="A100-80GB",
        mig_profile="3g.40gb",
        gpu_memory_gb=40,
        hourly_price=Decimal("1.2"),
    )
    nodes = {
        "n1": node("n1", h100, unhealthy_gpus=[3], zone="z1"),
        "n2": node("n2", h100),
        "g1": node("g1", gb200, gpus=4, cpu=144, memory_gb=960, nvlink_domain="nvl72"),
        "g2": node("g2", gb200, gpus=4, cpu=144, memory_gb=960, nvlink_domain="nvl72"),
        "s1": node("s1", l4s, gpus=4, cpu=64, memory_gb=512),
        "m1": node("m1", mig, gpus=2, unhealthy_gpus=[1], mig_layout={"3g.40gb": 2}),
    }
    do_set_node_cordoned(nodes["n2"], cordoned=True, acting_user=None)
    classes = {
        "normal": priority_class("normal", 0, default=True),
        "high": priority_class("high", 1000, budget_rate=Decimal(1)),
        "urgent": priority_class("urgent", 2000, budget_rate=Decimal(2)),
    }
    a, b, c = tenant("a"), tenant("b"), tenant("c")
    org = queue("org", parent=queue("root"))
    quota(org, h100, 0, 12, 16)
    team_a = queue(
        "team-a",
        parent=org,
        tenant=a,
        weight=Decimal("2.5"),
        reclaimable=False,
        lending_limit=Decimal("1.5"),
        max_protected_runtime_s=3600,
        default_protected_runtime_s=600,
    )
    quota(team_a, h100, 0, 8, 16)
    quota(team_a, gb200, 0, 4, 8)
    quota(team_a, l4s, Decimal("0.5"), Decimal("1.25"), 4)
    quota(team_a, mig, 0, 2, 4)
    team_b = queue("team-b", parent=org, tenant=b)
    quota(team_b, h100, 0, 4, 8)

    victim = submit("victim", team_b, PodSetSpec(1, gpus=2, flavor=h100), minute=70)
    run(victim, PlacementSpec("main", 0, nodes["n1"], [0, 1]))
    gang = submit(
        "gang",
        team_a,
        PodSetSpec(2, gpus=2, flavor=h100, name="workers"),
        PodSetSpec(1, gpus=1, flavor=h100, name="chief", cpu=Decimal("12.5"), memory_gb=64),
        protected_runtime_s=0,
    )
    run(
        gang,
        PlacementSpec("chief", 0, nodes["n1"], [2]),
        PlacementSpec("workers", 1, nodes["n1"], [6, 7]),
        PlacementSpec("workers", 0, nodes["n1"], [4, 5]),
    )
    notebook = submit("notebook", team_a, PodSetSpec(1, gpus=1, flavor=l4s, gpu_milli=470))
    run(notebook, PlacementSpec("main", 0, nodes["s1"], [2], milli=470), minute=40)
    mig_slice = submit("slice", team_a, PodSetSpec(1, gpus=1, flavor=mig))
    run(mig_slice, PlacementSpec("main", 0, nodes["m1"], [1]), minute=5, start=False)
    preemptor = submit(
        "preemptor",
        team_a,
        PodSetSpec(2, gpus=4, flavor=gb200, flavor_choices=[h100]),
        min_member=1,
        topology="domain",
        expected_runtime_s=3600,
        priority_class=classes["high"],
        minute=30,
    )
    submit(
        "trainer",
        team_b,
        PodSetSpec(1, gpus=8, flavor=h100, name="trainer"),
        PodSetSpec(3, name="loader", cpu=2),
        topology="preferred",
        minute=20,
    )
    submit("small-slice", team_a, PodSetSpec(1, gpus=1, flavor=mig), minute=15)
    submit("small-notebook", team_a, PodSetSpec(1, gpus=1, flavor=l4s, gpu_milli=300), minute=15)
    submit(
        "rush",
        team_a,
        PodSetSpec(1, gpus=2, flavor=h100),
        priority_class=classes["high"],
        protected_runtime_s=600,
        minute=12,
    )
    elsewhere = submit("victim-ml", team_b, PodSetSpec(1, gpus=1, flavor=h100), minute=10)
    Workload.objects.filter(pk=elsewhere.pk).update(namespace="ml", name="victim")
    loop_sets(victim, evicting_for=preemptor, last_checkpoint_at=minutes_before_now(20))
    loop_sets(preemptor, nominated=True)
    done = submit("done", team_b, PodSetSpec(1, gpus=1, flavor=h100), minute=300)
    run(done, PlacementSpec("main", 0, nodes["n2"], [0]), minute=290)
    do_transition_workload(done, "succeeded", reason="exit 0", at=minutes_before_now(200))
    cancelled = submit("cancelled", team_b, PodSetSpec(1, gpus=1, flavor=h100), minute=100)
    do_transition_workload(cancelled, "cancelled", reason="changed my mind", at=NOW)

    for tenant_, klass, hours in ((a, "high", 100), (b, "high", 8), (c, "urgent", 50)):
        budget = do_grant_budget(
            tenant_,
            classes[klass],
            period_start=NOVEMBER[0],
            period_end=NOVEMBER[1],
            gpu_hours=hours,
            acting_user=None,
            at=NOW - timedelta(days=20),
        )
        if tenant_ == a:
            do_spend_budget(budget, gpu_hours="2.5", workload=None, at=minutes_before_now(90))
            do_reserve_budget(budget, gpu_hours=10, workload=gang, at=minutes_before_now(80))
            do_settle_reservation(budget, gpu_hours=4, workload=gang, at=minutes_before_now(70))
    do_grant_budget(
        a,
        classes["high"],
        period_start=date(2026, 10, 1),
        period_end=NOVEMBER[0],
        gpu_hours=1000,
        acting_user=None,
    )

    do_record_preemption(
        victim,
        reason="preempt",
        at=minutes_before_now(45),
        gpus_freed=2,
        lost_gpu_hours=1,
        preemptor=preemptor,
    )
    do_record_preemption(
        gang, reason="node-failure", at=minutes_before_now(35), gpus_freed=5, lost_gpu_hours=2
    )
    do_record_preemption(
        gang, reason="admin", at=NOW - timedelta(days=3), gpus_freed=5, lost_gpu_hours=2
    )
    do_record_preemption(
        gang, reason="admin", at=NOW + timedelta(minutes=5), gpus_freed=5, lost_gpu_hours=2
    )
    return Pool(
        flavors={f.name: f for f in Flavor.objects.all()},
        nodes=nodes,
        queues={q.name: q for q in Queue.objects.all()},
        classes=classes,
        workloads={w.qualified_name(): w for w in Workload.objects.all()},
    )


def add_pool(size: int) -> None:
    """``size`` more nodes and queues (with their tenants); each queue gets a one-pod workload,
    running in every other queue, and a pending two-pod one with a further flavor choice."""
    h100 = Flavor.objects.get(name="h100")
    org = Queue.objects.get(name="org")
    normal = PriorityClass.objects.get(name="normal")
    for index in range(size):
        spare = node(f"x{index}", h100)
        team = queue(f"extra-{index}", parent=org, tenant=tenant(f"extra-{index}"))
        quota(team, h100, 0, 1, 2)
        first = submit(f"extra-{index}", team, PodSetSpec(1, gpus=1, flavor=h100), minute=10)
        if index % 2:
            run(first, PlacementSpec("main", 0, spare, [0]), minute=5)
        submit(
            f"extra-{index}-two",
            team,
            PodSetSpec(2, gpus=1, flavor=h100, flavor_choices=[Flavor.objects.get(name="gb200")]),
            priority_class=normal,
            minute=9,
        )
