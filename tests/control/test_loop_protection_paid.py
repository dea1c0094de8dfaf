"""Protection that was paid for, and only that, across the loop's cycles (DESIGN section 2).

A window beyond the queue's ``max_protected_runtime_s`` is bought from a budget when the work
is admitted. Work the budget did not cover then is admitted demoted and keeps the default
class's capped window for its whole run, even once it is elevated again; work that paid keeps
its window even when the budget is spent to nothing meanwhile. A victim a disruption budget
just protected is left alone for the refusal's back-off whatever its queue's cap.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from decimal import Decimal

import pytest
from django.utils import timezone
from domain_builders import priority_class
from loop_builders import World, build_world

from gpupool.accounting.models import PreemptionEvent
from gpupool.control.queries import read_pool_snapshot
from gpupool.quotas.actions import do_grant_budget
from gpupool.quotas.models import PriorityClass, Queue
from gpupool.tenancy.models import Tenant
from gpupool.workloads.actions import PodSetSpec, do_submit_workload

pytestmark = pytest.mark.django_db

CAP_S = 600  # team-a's max_protected_runtime_s


@pytest.fixture
def world(db: None) -> World:
    """One 8-GPU node; team-a caps free protection at 10 minutes; class ``urgent`` (2000)
    costs 1 budget hour per GPU-hour, ``critical`` (3000) is free."""
    made = build_world(nodes=1)
    Queue.objects.filter(name="team-a").update(max_protected_runtime_s=CAP_S)
    priority_class("urgent", 2000, budget_rate=Decimal(1))
    priority_class("critical", 3000)
    return made


def grant(gpu_hours: int) -> None:
    today = timezone.localdate()
    do_grant_budget(
        Tenant.objects.get(name="a"),
        PriorityClass.objects.get(name="urgent"),
        period_start=today - timedelta(days=1),
        period_end=today + timedelta(days=30),
        gpu_hours=gpu_hours,
        acting_user=None,
    )


def start(world: World, name: str, klass: str, protected_s: int) -> None:
    world.submit(
        name,
        gpus=8,
        priority_class=PriorityClass.objects.get(name=klass),
        protected_runtime_s=protected_s,
    )
    world.cycle()
    world.cycle()
    world.cluster.run()
    world.cycle()
    assert world.workload(name).state == "running"


def reserved_in_pages(name: str) -> bool | None:
    """What the pages' snapshot (their dry-run) says of the workload's window."""
    return read_pool_snapshot().by_name[f"team-a/{name}"].window_reserved


def preempt_after(world: World, seconds: float) -> None:
    """``seconds`` later, a free critical gang of the same team asks the whole node."""
    world.cluster.tick(seconds)
    world.submit("critical-job", gpus=8, priority_class=PriorityClass.objects.get(name="critical"))
    world.cycle()
    world.cycle()


def test_work_admitted_demoted_keeps_the_capped_window_once_its_budget_is_topped_up(
    world: World,
) -> None:
    grant(2)  # an 8-GPU hour-long window would reserve 8 GPU-hours: admitted demoted
    start(world, "long-job", "urgent", protected_s=3600)
    grant(100)  # topped up: the running work is elevated again, but it reserved nothing
    world.cycle()
    assert reserved_in_pages("long-job") is False
    preempt_after(world, CAP_S + 120)
    victim = world.workload("long-job")
    assert PreemptionEvent.objects.filter(victim=victim).exists()
    assert victim.eviction_reason == "preempt" or victim.state == "pending"


def test_a_paid_window_holds_when_the_budget_is_spent_to_nothing(world: World) -> None:
    grant(2)  # 8 GPUs x 15 minutes: exactly the 2 GPU-hours granted, reserved at admission
    start(world, "paid-job", "urgent", protected_s=900)
    assert reserved_in_pages("paid-job") is True
    preempt_after(world, CAP_S + 120)  # past the queue's cap, inside the paid window
    paid = world.workload("paid-job")
    assert paid.state == "running" and not paid.eviction_reason
    assert not PreemptionEvent.objects.filter(victim=paid).exists()
    world.cluster.tick(300)  # the window has ended: preemptible now
    world.cycle()
    assert PreemptionEvent.objects.filter(victim=world.workload("paid-job")).exists()


def test_a_refused_victim_is_left_alone_for_the_back_off_past_its_queues_cap(
    world: World,
) -> None:
    start(world, "filler", "low", protected_s=0)
    world.cluster.tick(3600)  # long past the cap of 10 minutes
    world.cluster.refuse.update(p.key for p in world.cluster.pods_of("filler"))
    world.submit("urgent-job", gpus=8, priority_class=PriorityClass.objects.get(name="high"))
    world.cycle()
    world.cycle()  # the eviction is refused
    assert world.cluster.calls["evict"] == 1
    world.cycle()
    world.cycle()  # not chosen again while the refusal is fresh
    assert world.cluster.calls["evict"] == 1


def test_a_paid_window_of_work_admitted_at_its_late_submission_is_reserved_in_the_pages(
    world: World,
) -> None:
    """Work whose submission is stamped after the moment of the cycle that admits it is
    admitted at its submission (``actions._late_admissions``), while its budget reservation
    keeps the cycle's moment: the pages' snapshot still counts the reservation as this run's
    (its first: admitted at its submission), as the loop's budget book does."""
    grant(100)
    world.cycle()
    state, original = world.loop.state, world.loop.state.refresh
    submitted: list[bool] = []

    def refresh(now: datetime) -> None:
        if not submitted:
            submitted.append(True)
            do_submit_workload(
                "paid",
                queue=world.queues["team-a"],
                pod_sets=[PodSetSpec(1, gpus=8, flavor=world.h100)],
                priority_class=PriorityClass.objects.get(name="urgent"),
                protected_runtime_s=3600,
                at=now + timedelta(seconds=46),
            )
        original(now)

    state.refresh = refresh  # type: ignore[method-assign]
    world.cycle()
    world.cycle()
    world.cluster.run()
    world.cycle()
    paid = world.workload("paid")
    assert paid.state == "running" and paid.admitted_at == paid.submitted_at
    assert reserved_in_pages("paid") is True
