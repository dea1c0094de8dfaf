"""Budgets through the loop: reserve at admission, settle, spend; run out mid-run, demoted."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone
from domain_builders import priority_class
from loop_builders import World, build_world

from gpupool.accounting.models import PreemptionEvent
from gpupool.control import budgets
from gpupool.control.budgets import FLUSHED_NOTE, BudgetBook, Charge, named
from gpupool.quotas.actions import do_grant_budget
from gpupool.quotas.models import BudgetLedgerEntry, PriorityBudget, PriorityClass
from gpupool.quotas.queries import ledger_mismatches
from gpupool.scheduler.types import BudgetInfo, PodSetInfo, WorkloadInfo
from gpupool.tenancy.models import Tenant

pytestmark = pytest.mark.django_db


@pytest.fixture
def world(db: None) -> World:
    """One node; class ``urgent`` (value 2000) spends 1 budget hour per GPU-hour."""
    made = build_world(nodes=1)
    urgent = priority_class("urgent", 2000, budget_rate=Decimal(1))
    today = timezone.localdate()
    do_grant_budget(
        Tenant.objects.get(name="a"),
        urgent,
        period_start=today - timedelta(days=1),
        period_end=today + timedelta(days=30),
        gpu_hours=2,
        acting_user=None,
    )
    return made


def balance() -> Decimal:
    """What is left of tenant a's urgent budget, by the ledger (the balance kept on the
    budget's row agreeing with the ledger's sum)."""
    assert ledger_mismatches() == []
    return PriorityBudget.objects.get().remaining_gpu_hours()


def run_urgent(world: World, **fields: object) -> None:
    world.submit(
        "urgent-job", gpus=4, priority_class=PriorityClass.objects.get(name="urgent"), **fields
    )
    world.cycle()
    world.cycle()
    world.cluster.run()
    world.cycle()
    assert world.workload("urgent-job").state == "running"


def test_a_protected_window_is_reserved_at_admission_and_settled_to_what_ran(world: World) -> None:
    queue = world.queues["team-a"]
    run_urgent(world, protected_runtime_s=900)  # 4 GPUs x 15 min = 1 GPU-hour reserved
    assert balance() == Decimal("1.0000")
    world.cluster.tick(300)
    pod = world.cluster.pods_of("urgent-job")[0]
    world.cluster.finish(pod.key)
    for other in world.cluster.pods_of("urgent-job")[1:]:
        world.cluster.finish(other.key)
    world.cycle()
    assert world.workload("urgent-job").state == "succeeded"
    kinds = list(BudgetLedgerEntry.objects.exclude(kind="grant").values_list("kind", "gpu_hours"))
    assert kinds[0] == ("reserve", Decimal("-1.0000"))
    assert ("settle", Decimal("1.0000")) in kinds
    assert 1.9 - 1 / 3 - 0.02 < float(balance()) < 2 - 1 / 3 + 0.02  # 5 minutes of 4 GPUs
    assert queue.pk  # the queue is untouched


def test_a_budget_runs_out_mid_run_and_the_work_is_demoted_not_killed(world: World) -> None:
    run_urgent(world, protected_runtime_s=0)
    world.cluster.tick(40 * 60)  # 4 GPUs x 40 min = 2.67 GPU-hours: more than the 2 granted
    world.cycle()
    world.cluster.tick(60)
    world.cycle()
    assert balance() == Decimal("0.0000")  # spent exactly what was granted, never more
    urgent = world.workload("urgent-job")
    assert (urgent.state, urgent.eviction_reason) == ("running", "")  # demoted, not killed
    assert not PreemptionEvent.objects.exists()


def test_demoted_work_is_preempted_like_any_default_class_work(world: World) -> None:
    run_urgent(world, protected_runtime_s=0)
    world.submit("rival", gpus=8, priority_class=PriorityClass.objects.get(name="high"))
    world.cycle()
    world.cycle()
    assert world.workload("rival").state == "pending"  # urgent outranks high while it pays
    assert not PreemptionEvent.objects.exists()
    world.cluster.tick(40 * 60)  # the budget runs out
    world.cycle()
    event = PreemptionEvent.objects.get()
    assert (event.victim.name, event.reason, event.preemptor.name) == (
        "urgent-job",
        "preempt",
        "rival",
    )


def test_a_flush_spends_once_per_budget_and_a_restarted_loop_charges_from_it(
    world: World,
) -> None:
    urgent = PriorityClass.objects.get(name="urgent")
    for name in ("urgent-a", "urgent-b"):
        world.submit(name, gpus=4, priority_class=urgent, protected_runtime_s=0)
    world.cycle()
    world.cycle()
    world.cluster.run()
    world.cycle()
    assert {world.workload(n).state for n in ("urgent-a", "urgent-b")} == {"running"}
    before = BudgetLedgerEntry.objects.filter(kind="spend").count()
    world.cluster.tick(360)  # past the 300 s flush: 2 x 4 GPUs x 6 min = 0.8 GPU-hours
    world.cycle()
    flushed = list(
        BudgetLedgerEntry.objects.filter(kind="spend")
        .order_by("id")[before:]
        .values_list("workload", "gpu_hours", "note")
    )
    assert len(flushed) == 1  # one entry for the budget, not one per workload
    workload, gpu_hours, note = flushed[0]
    assert workload is None and "2 running workloads" in note
    assert Decimal("-0.81") < gpu_hours < Decimal("-0.79")
    spent = Decimal(2) - balance()
    # A loop that starts over (as after a failed cycle: its budget book read again from the
    # ledger) reads where each workload was charged up to from the flush: the next flush
    # spends only the 6 minutes since, never the run again from its start.
    world.loop._forget_everything()
    world.cycle()
    assert abs((Decimal(2) - balance()) - spent) < Decimal("0.01")  # the cycle's seconds
    world.cluster.tick(360)
    world.cycle()
    assert abs((Decimal(2) - balance()) - spent - Decimal("0.8")) < Decimal("0.01")


def test_named_finds_workloads_by_bisection_in_their_order_or_by_a_pass() -> None:
    """``budgets.named``: the workloads named, in the snapshot's order, whether the snapshot
    is in name order (bisection) or not (one pass), and none for a name not there."""
    infos = [
        WorkloadInfo(name, "q", "normal", (PodSetInfo(1, 1, ("h100",)),), 0.0)
        for name in ("a/1", "a/2", "b/1", "c/9")
    ]
    assert [w.name for w in named(tuple(infos), {"c/9", "a/1"})] == ["a/1", "c/9"]
    assert [w.name for w in named(tuple(infos[::-1]), {"c/9", "a/1"})] == ["c/9", "a/1"]
    assert [w.name for w in named(tuple(infos), {"b/1", "x/0"})] == ["b/1"]
    assert named((), {"a/1"}) == []
    many = tuple(  # in name order, few named: by bisection
        WorkloadInfo(f"q/{n:03}", "q", "normal", (PodSetInfo(1, 1, ("h100",)),), 0.0)
        for n in range(300)
    )
    assert [w.name for w in named(many, {"q/250", "q/007"})] == ["q/007", "q/250"]
    assert [w.name for w in named(many[::-1], {"q/250", "q/007"})] == ["q/250", "q/007"]


def test_named_takes_one_pass_when_many_are_named(monkeypatch: pytest.MonkeyPatch) -> None:
    """More than a thirtieth of the workloads named: one pass, no bisection (15 steps a name
    at B1's size cost more than the pass)."""
    many = tuple(
        WorkloadInfo(f"q/{n:03}", "q", "normal", (PodSetInfo(1, 1, ("h100",)),), 0.0)
        for n in range(300)
    )

    def refused(*args: object, **kwargs: object) -> int:
        raise AssertionError("bisected")

    monkeypatch.setattr(budgets, "bisect_left", refused)
    wanted = {f"q/{n:03}" for n in range(0, 300, 20)}  # 15 of 300
    assert [w.name for w in named(many, wanted)] == sorted(wanted)


def test_one_cycle_reserves_only_for_the_admissions_its_budget_covered(world: World) -> None:
    """Two urgent workloads of one tenant admitted in one cycle, the budget (2 GPU-hours)
    covering one protected window (4 GPUs x 22.5 min = 1.5 GPU-hours) but not both: the core
    spends the budget as it admits and demotes the second to the default class; the ledger
    holds exactly the reservation the core made, and the second's charge is not elevated."""
    urgent = PriorityClass.objects.get(name="urgent")
    for name in ("urgent-a", "urgent-b"):
        world.submit(name, gpus=4, priority_class=urgent, protected_runtime_s=1350)
    world.cycle()
    world.cycle()
    assert {world.workload(n).state for n in ("urgent-a", "urgent-b")} == {"admitted"}
    reserves = list(
        BudgetLedgerEntry.objects.filter(kind="reserve").values_list("workload__name", "gpu_hours")
    )
    assert reserves == [("urgent-a", Decimal("-1.5000"))]
    assert balance() == Decimal("0.5000")
    charges = {world.workload(n).pk: n for n in ("urgent-a", "urgent-b")}
    book = {charges[pk]: c for pk, c in world.loop.budgets.charges.items() if pk in charges}
    assert book["urgent-a"].reserved == 1.5
    assert book["urgent-b"].reserved == 0.0
    assert book["urgent-b"].window_end == book["urgent-b"].start  # accrues as it runs


def test_a_preemptor_reserves_its_window_once_when_admitted_not_while_it_waits(
    world: World,
) -> None:
    """The core spends the budget for a preemptor whose place it reserves (so that nothing
    later in that cycle is elevated on the same hours), but the preemptor is not admitted:
    the ledger reserves nothing while its victim leaves, and exactly one window (4 GPUs x
    15 min = 1 GPU-hour) in the cycle that admits it."""
    world.submit("filler", gpus=8, priority_class=PriorityClass.objects.get(name="low"))
    world.cycle()
    world.cycle()
    world.cluster.run()
    world.cycle()
    assert world.workload("filler").state == "running"
    world.cluster.tick(600)
    urgent = PriorityClass.objects.get(name="urgent")
    world.submit("urgent-job", gpus=4, priority_class=urgent, protected_runtime_s=900)
    world.cycle()  # its pods are created
    world.cycle()  # the victim is chosen and evicted; the preemptor waits, nominated
    assert world.workload("urgent-job").nominated
    assert world.workload("filler").eviction_reason == "preempt"
    assert not BudgetLedgerEntry.objects.filter(kind="reserve").exists()
    assert balance() == Decimal("2.0000")
    world.cycle()  # the victim is gone: the preemptor is admitted
    assert world.workload("urgent-job").state == "admitted"
    reserves = list(
        BudgetLedgerEntry.objects.filter(kind="reserve").values_list("workload__name", "gpu_hours")
    )
    assert reserves == [("urgent-job", Decimal("-1.0000"))]
    assert balance() == Decimal("1.0000")


def test_the_run_after_a_window_is_spent_once_when_a_flush_falls_in_the_cycle_that_settles_it(
    world: World,
) -> None:
    """A 15-minute window (4 GPUs: 1 GPU-hour reserved) ends; the cycle 20 minutes after the
    admission both flushes (the 5 minutes past the window: 1/3 GPU-hour) and settles the
    window (1 GPU-hour spent in it). The next flush, 6 minutes later, spends those 6 minutes
    (0.4 GPU-hour) only -- not the 5 minutes after the window again."""
    run_urgent(world, protected_runtime_s=900)
    assert balance() == Decimal("1.0000")
    world.cluster.tick(1200)
    world.cycle()  # flushes and settles
    settled = balance()
    assert abs(settled - (Decimal(2) - 1 - Decimal(1) / 3)) < Decimal("0.01")
    world.cluster.tick(360)
    world.cycle()  # flushes the 6 minutes since
    assert abs(settled - balance() - Decimal("0.4")) < Decimal("0.01")


def test_a_cycle_that_plans_again_keeps_its_flush() -> None:
    """The loop plans a cycle again when the apply it handed on taught it something, and asks
    for the accruals again at the same moment: that second answer still flushes, or the
    ledger would lag by twice ``FLUSH_S`` (the flush being taken as done)."""
    t = 1_800_000_000.0
    book = BudgetBook()
    book.charges = {1: Charge(1, ("a", "urgent"), 1.0, 4.0, t, t, 0.0, t)}
    budgets = (BudgetInfo("a", "urgent", 10.0),)
    first = book.with_accrual(budgets, t + 900)[1]
    again = book.with_accrual(budgets, t + 900)[1]
    assert [amount for _, amount in again] == [amount for _, amount in first] == [1.0]
    assert book.with_accrual(budgets, t + 901)[1] == []  # a second later: not due


def test_accruals_are_spent_per_budget_and_a_spend_charges_its_running_work_up_to_then(
    world: World,
) -> None:
    """``BudgetBook`` on its own: a flush writes one spend per budget, the sum of its running
    work's accruals; from then on each of them accrues from the flush -- a window that ended
    before the flush and is settled after it (the same cycle) too, not from its end again."""
    do_grant_budget(
        Tenant.objects.get(name="b"),
        PriorityClass.objects.get(name="urgent"),
        period_start=timezone.localdate() - timedelta(days=1),
        period_end=timezone.localdate() + timedelta(days=30),
        gpu_hours=2,
        acting_user=None,
    )
    ids = {b.tenant.name: b.pk for b in PriorityBudget.objects.select_related("tenant")}
    t = timezone.now().timestamp() - 3600
    book = BudgetBook()
    book.charges = {  # 4 GPUs past any window, 2 GPUs in a 10-minute window; 1 GPU of b's
        1: Charge(1, ("a", "urgent"), 1.0, 4.0, t, t, 0.0, t),
        2: Charge(2, ("a", "urgent"), 1.0, 2.0, t, t + 600, 2 * 600 / 3600, t),
        3: Charge(3, ("b", "urgent"), 1.0, 1.0, t, t, 0.0, t),
    }
    budgets = (BudgetInfo("a", "urgent", 2.0), BudgetInfo("b", "urgent", 2.0))
    accrued, spends = book.with_accrual(budgets, t + 900)  # the first cycle flushes
    assert [b.used for b in accrued] == pytest.approx([1.0 + 300 * 2 / 3600, 900 / 3600])
    moves = book.spend(spends, t + 900)
    assert [(m.budget_id, m.kind, m.gpu_hours, m.workload_id) for m in moves] == [
        (ids["a"], "spend", Decimal("-1.1667"), None),
        (ids["b"], "spend", Decimal("-0.25"), None),
    ]
    assert [m.note for m in moves] == [
        f"{FLUSHED_NOTE}: 2 running workloads",
        f"{FLUSHED_NOTE}: 1 running workloads",
    ]
    settled = book.settle_due(t + 900)  # the window: its reservation back, its run spent
    assert [(m.kind, m.gpu_hours, m.workload_id) for m in settled] == [
        ("settle", Decimal("0.3333"), 2),
        ("spend", Decimal("-0.3333"), 2),
    ]
    accrued, spends = book.with_accrual(budgets, t + 1100)  # no flush: 200 s since the last
    assert [b.used for b in accrued] == pytest.approx([200 * 6 / 3600, 200 / 3600])
    assert spends == []
