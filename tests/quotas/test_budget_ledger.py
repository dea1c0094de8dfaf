"""Priority budgets: granted per tenant, class and period; reserve, settle and spend on a ledger."""

from datetime import date, datetime
from decimal import Decimal

import pytest
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from domain_builders import priority_class, tenant, user

from gpupool.audit.actions import model_snapshot, snapshot_fields, values_snapshots
from gpupool.audit.models import AuditEvent
from gpupool.quotas.actions import (
    _KEPT,
    BudgetMove,
    do_grant_budget,
    do_record_budget_moves,
    do_reserve_budget,
    do_settle_reservation,
    do_spend_budget,
)
from gpupool.quotas.models import BudgetLedgerEntry, PriorityBudget

pytestmark = pytest.mark.django_db

NOW = datetime.fromisoformat("2026-11-29T10:00:00+00:00")
NOVEMBER = {"period_start": date(2026, 11, 1), "period_end": date(2026, 12, 1)}


@pytest.fixture
def setup() -> dict[str, object]:
    priority_class("normal", default=True)
    return {
        "high": priority_class("high", value=100, budget_rate=Decimal(1)),
        "team": tenant("nlp"),
        "admin": user("root-admin", admin=True),
    }


def grant(setup: dict, hours: object, **period: object) -> PriorityBudget:
    return do_grant_budget(
        setup["team"],
        setup["high"],
        gpu_hours=hours,
        acting_user=setup["admin"],
        at=NOW,
        **(period or NOVEMBER),
    )


def test_a_grant_is_a_ledger_entry_and_an_audited_change(setup: dict) -> None:
    budget = grant(setup, 100)
    assert budget.remaining_gpu_hours() == 100
    # raising it later adds the difference to the ledger
    grant(setup, 150)
    assert list(budget.entries.values_list("kind", "gpu_hours")) == [
        ("grant", Decimal(100)),
        ("grant", Decimal(50)),
    ]
    events = AuditEvent.objects.filter(action="quotas.grant_budget").order_by("id")
    assert [e.actor for e in events] == [setup["admin"], setup["admin"]]
    assert events[1].before is not None and events[1].before["gpu_hours"] == "100.000"
    assert events[1].after is not None and events[1].after["gpu_hours"] == "150.000"


def test_reserving_settling_and_spending_move_the_balance(setup: dict) -> None:
    budget = grant(setup, 100)
    # a protected window of 8 GPUs x 2 h x rate 1 is reserved up front
    do_reserve_budget(budget, gpu_hours=16, workload=None, at=NOW)
    assert budget.remaining_gpu_hours() == 84
    # the window ends after 1.5 h: the reservation is released and the use is spent
    do_settle_reservation(budget, gpu_hours=16, workload=None, at=NOW)
    do_spend_budget(budget, gpu_hours=12, workload=None, at=NOW)
    assert budget.remaining_gpu_hours() == 88
    kinds = list(budget.entries.values_list("kind", flat=True))
    assert kinds == ["grant", "reserve", "settle", "spend"]
    assert AuditEvent.objects.filter(object_type="quotas.prioritybudget").count() == 4


def test_a_reservation_beyond_the_balance_is_refused_and_writes_nothing(setup: dict) -> None:
    budget = grant(setup, 10)
    with pytest.raises(ValidationError) as error:
        do_reserve_budget(budget, gpu_hours=11, workload=None, at=NOW)
    assert "gpu_hours" in error.value.message_dict
    assert budget.entries.count() == 1
    assert budget.remaining_gpu_hours() == 10


def test_settling_more_than_was_reserved_is_refused(setup: dict) -> None:
    budget = grant(setup, 100)
    do_reserve_budget(budget, gpu_hours=5, workload=None, at=NOW)
    with pytest.raises(ValidationError) as error:
        do_settle_reservation(budget, gpu_hours=6, workload=None, at=NOW)
    assert "gpu_hours" in error.value.message_dict


def test_a_class_without_budget_rate_needs_no_budget(setup: dict) -> None:
    free = priority_class("interactive", value=50, preemption_policy="Never")
    with pytest.raises(ValidationError) as error:
        do_grant_budget(setup["team"], free, gpu_hours=10, acting_user=None, **NOVEMBER)
    assert "priority_class" in error.value.message_dict


def test_the_period_must_end_after_it_starts(setup: dict) -> None:
    with pytest.raises(ValidationError) as error:
        grant(setup, 10, period_start=date(2026, 11, 1), period_end=date(2026, 11, 1))
    assert "period_end" in error.value.message_dict
    with pytest.raises(IntegrityError), transaction.atomic():
        PriorityBudget.objects.create(
            tenant=setup["team"],
            priority_class=setup["high"],
            period_start=date(2026, 11, 2),
            period_end=date(2026, 11, 1),
            gpu_hours=1,
        )


def test_overlapping_periods_of_one_class_are_refused(setup: dict) -> None:
    grant(setup, 10)
    with pytest.raises(ValidationError) as error:
        grant(setup, 10, period_start=date(2026, 11, 15), period_end=date(2026, 12, 15))
    assert "period_start" in error.value.message_dict
    grant(setup, 10, period_start=date(2026, 12, 1), period_end=date(2027, 1, 1))


def test_the_database_refuses_a_ledger_sign_that_contradicts_the_kind(setup: dict) -> None:
    budget = grant(setup, 10)
    with pytest.raises(IntegrityError), transaction.atomic():
        BudgetLedgerEntry.objects.create(budget=budget, kind="spend", gpu_hours=5, at=NOW)
    with pytest.raises(IntegrityError), transaction.atomic():
        BudgetLedgerEntry.objects.create(budget=budget, kind="settle", gpu_hours=-5, at=NOW)


def test_the_loops_moves_are_one_audit_row_per_budget_with_its_balance_before_and_after(
    setup: dict,
) -> None:
    budget = grant(setup, 100)
    moves = [
        BudgetMove(budget.pk, "reserve", Decimal("-16"), None, "protected window"),
        BudgetMove(budget.pk, "spend", Decimal("-2.5"), None, "ran at the class"),
    ]
    assert do_record_budget_moves(moves, at=NOW) == 2
    assert budget.remaining_gpu_hours() == Decimal("81.5")
    (event,) = AuditEvent.objects.filter(action="quotas.cycle_budget")
    assert event.actor is None and event.actor_name == ""
    assert (event.object_type, event.object_id) == ("quotas.prioritybudget", str(budget.pk))
    assert event.object_repr == str(budget)
    assert event.before is not None and event.after is not None
    assert event.before["remaining_gpu_hours"] == "100.0000"
    assert event.after["remaining_gpu_hours"] == "81.5000"
    assert event.before["gpu_hours"] == event.after["gpu_hours"] == "100.000"
    assert event.reason == "2 movements of the scheduling loop"
    assert event.changed_fields() == ["remaining_gpu_hours"]


def test_the_loops_audit_rows_read_as_values_equal_the_model_snapshots(setup: dict) -> None:
    """The loop's moves read their budgets as values, not model instances; the audit rows
    say what ``model_snapshot`` and ``str(budget)`` of each budget would."""
    budget = grant(setup, Decimal("12.5"))
    other = do_grant_budget(
        tenant("vision"), setup["high"], gpu_hours=7, acting_user=setup["admin"], at=NOW,
        **NOVEMBER,
    )  # fmt: skip
    moves = [
        BudgetMove(other.pk, "spend", Decimal("-1.5"), None, "ran at the class"),
        BudgetMove(budget.pk, "spend", Decimal("-0.25"), None, "ran at the class"),
    ]
    rows = list(PriorityBudget.objects.values(*snapshot_fields(PriorityBudget, _KEPT)))
    assert values_snapshots(PriorityBudget, rows, _KEPT) == [
        model_snapshot(PriorityBudget.objects.get(pk=row["id"]), _KEPT) for row in rows
    ]
    assert do_record_budget_moves(moves, at=NOW) == 2
    for granted in (budget, other):
        granted.refresh_from_db()
        event = AuditEvent.objects.get(action="quotas.cycle_budget", object_id=str(granted.pk))
        assert event.object_repr == str(granted)
        assert event.before is not None and event.after is not None
        assert event.before == model_snapshot(granted, _KEPT) | {
            "remaining_gpu_hours": event.before["remaining_gpu_hours"]
        }
        assert event.after["remaining_gpu_hours"] == str(granted.remaining_gpu_hours())
