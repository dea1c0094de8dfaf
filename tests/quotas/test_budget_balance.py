"""A budget's balance is kept on its row (``balance_gpu_hours``), moved with every ledger
entry written, and always equal to the ledger's sum (the source of truth)."""

import importlib
from datetime import date, datetime
from decimal import Decimal

import pytest
from django.apps import apps
from django.core.management import call_command
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from domain_builders import priority_class, tenant

from gpupool.audit.models import AuditEvent
from gpupool.control.snapshot import read_budgets
from gpupool.quotas.actions import (
    BudgetMove,
    do_grant_budget,
    do_record_budget_moves,
    do_reserve_budget,
    do_settle_reservation,
    do_spend_budget,
)
from gpupool.quotas.models import PriorityBudget
from gpupool.quotas.queries import ledger_mismatches

pytestmark = pytest.mark.django_db

NOW = datetime.fromisoformat("2026-11-29T10:00:00+00:00")
NOVEMBER = {"period_start": date(2026, 11, 1), "period_end": date(2026, 12, 1)}


@pytest.fixture
def budgets() -> tuple[PriorityBudget, PriorityBudget]:
    priority_class("normal", default=True)
    high = priority_class("high", value=100, budget_rate=Decimal(1))
    return (
        do_grant_budget(tenant("nlp"), high, gpu_hours=100, acting_user=None, **NOVEMBER),
        do_grant_budget(tenant("vision"), high, gpu_hours=40, acting_user=None, **NOVEMBER),
    )


def kept(budget: PriorityBudget) -> Decimal:
    """The balance on the budget's row, after checking it against every budget's ledger."""
    assert ledger_mismatches() == []
    return PriorityBudget.objects.get(pk=budget.pk).balance_gpu_hours


def test_each_kind_of_movement_moves_the_kept_balance_as_the_ledger(
    budgets: tuple[PriorityBudget, PriorityBudget],
) -> None:
    nlp, _ = budgets
    assert kept(nlp) == 100
    do_grant_budget(nlp.tenant, nlp.priority_class, gpu_hours=120, acting_user=None, **NOVEMBER)
    assert kept(nlp) == 120
    do_reserve_budget(nlp, gpu_hours=16, workload=None, at=NOW)
    assert kept(nlp) == 104
    do_settle_reservation(nlp, gpu_hours=16, workload=None, at=NOW)
    assert kept(nlp) == 120
    do_spend_budget(nlp, gpu_hours="12.25", workload=None, at=NOW)
    assert kept(nlp) == Decimal("107.75")
    do_grant_budget(nlp.tenant, nlp.priority_class, gpu_hours=0, acting_user=None, **NOVEMBER)
    assert kept(nlp) == Decimal("-12.25")
    assert nlp.remaining_gpu_hours() == Decimal("-12.25")


def test_a_cycles_bulk_moves_move_each_budgets_kept_balance(
    budgets: tuple[PriorityBudget, PriorityBudget],
) -> None:
    nlp, vision = budgets
    moves = [
        BudgetMove(nlp.pk, "reserve", Decimal("-16"), None, "protected window"),
        BudgetMove(vision.pk, "spend", Decimal("-0.00004"), None, "below the ledger's precision"),
        BudgetMove(nlp.pk, "spend", Decimal("-2.5"), None, "ran at the class"),
        BudgetMove(vision.pk, "spend", Decimal("-1.23456"), None, "ran at the class"),
    ]
    assert do_record_budget_moves(moves, at=NOW) == 4
    assert kept(nlp) == Decimal("81.5")
    # each entry is quantized to the ledger's precision before it moves the balance
    assert kept(vision) == Decimal("38.7654")
    # the audit row says the balance once, before and after, as before it was kept
    event = AuditEvent.objects.get(action="quotas.cycle_budget", object_id=str(vision.pk))
    assert event.before is not None and event.after is not None
    assert (event.before["remaining_gpu_hours"], event.after["remaining_gpu_hours"]) == (
        "40.0000",
        "38.7654",
    )
    assert "balance_gpu_hours" not in event.before | event.after


def test_a_refused_or_rolled_back_movement_leaves_the_kept_balance(
    budgets: tuple[PriorityBudget, PriorityBudget],
) -> None:
    nlp, vision = budgets
    with pytest.raises(Exception, match="exceeds"):
        do_reserve_budget(nlp, gpu_hours=101, workload=None, at=NOW)
    with pytest.raises(Exception, match="wrong sign"):
        do_record_budget_moves([BudgetMove(nlp.pk, "spend", Decimal(3), None)], at=NOW)

    class Failed(Exception):
        pass

    with pytest.raises(Failed), transaction.atomic():
        do_spend_budget(nlp, gpu_hours=7, workload=None, at=NOW)
        do_record_budget_moves([BudgetMove(vision.pk, "spend", Decimal(-5), None)], at=NOW)
        assert kept(nlp) == 93 and kept(vision) == 35  # moved inside the transaction...
        raise Failed
    assert kept(nlp) == 100  # ...and back with it
    assert kept(vision) == 40


def test_read_budgets_gives_the_ledgers_figures_without_reading_the_ledger(
    budgets: tuple[PriorityBudget, PriorityBudget],
) -> None:
    nlp, vision = budgets
    do_spend_budget(nlp, gpu_hours="30.5", workload=None, at=NOW)
    do_reserve_budget(vision, gpu_hours=10, workload=None, at=NOW)
    with CaptureQueriesContext(connection) as queries:
        read = read_budgets(NOW, {"nlp", "vision"})
    assert [(b.tenant, b.priority_class, b.gpu_hours, b.used) for b in read] == [
        ("nlp", "high", 100.0, 30.5),
        ("vision", "high", 40.0, 10.0),
    ]
    assert not any("budgetledgerentry" in q["sql"] for q in queries.captured_queries)


def test_the_migration_fills_each_budgets_balance_from_its_ledger(
    budgets: tuple[PriorityBudget, PriorityBudget],
) -> None:
    nlp, vision = budgets
    do_spend_budget(nlp, gpu_hours="2.5", workload=None, at=NOW)
    empty = do_grant_budget(
        nlp.tenant, nlp.priority_class, gpu_hours=0, acting_user=None,
        period_start=date(2026, 12, 1), period_end=date(2027, 1, 1),
    )  # fmt: skip
    # as a database upgraded from before the column: every balance at its default
    PriorityBudget.objects.update(balance_gpu_hours=0)
    assert len(ledger_mismatches()) == 2
    migration = importlib.import_module("gpupool.quotas.migrations.0007_prioritybudget_balance")
    migration.fill_balances(apps, None)
    assert kept(nlp) == Decimal("97.5")
    assert kept(vision) == 40
    assert kept(empty) == 0  # no entries: zero, not NULL


def test_check_ledger_lists_a_budget_whose_kept_balance_differs(
    budgets: tuple[PriorityBudget, PriorityBudget],
    capsys: pytest.CaptureFixture[str],
) -> None:
    nlp, _ = budgets
    call_command("gpupool", "check-ledger")
    assert "equals its ledger's sum" in capsys.readouterr().out
    PriorityBudget.objects.filter(pk=nlp.pk).update(balance_gpu_hours=Decimal("99.5"))
    with pytest.raises(SystemExit) as exit_:
        call_command("gpupool", "check-ledger")
    assert exit_.value.code == 1
    out = capsys.readouterr().out
    assert f"budget {nlp.pk}" in out and "kept 99.5000, ledger 100.0000" in out
