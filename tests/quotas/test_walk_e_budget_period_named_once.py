"""Walk-through E: a budget is named with its period as the pages show it, its last day
included (``period_words``: "2026-11-01 to 2026-11-30 (included)"), wherever its name is
written: ``str(budget)``, the audit log's object of a grant and of the loop's budget moves
(the Audit page and its CSV), and the refusal of an overlapping grant. They wrote the stored
end, the first day after the period ("2026-11-01..2026-12-01"), which an admin on the Audit
page read as a budget running into December while the Requests page said November."""

from __future__ import annotations

from datetime import date
from decimal import Decimal

import pytest
from django.contrib import admin
from django.core.exceptions import ValidationError
from domain_builders import priority_class, tenant, user
from test_budget_ledger import NOW, grant

from gpupool.audit.models import AuditEvent
from gpupool.quotas.actions import BudgetMove, do_record_budget_moves
from gpupool.quotas.admin import QuotaRequestAdmin
from gpupool.quotas.models import PriorityBudget, QuotaRequest

pytestmark = pytest.mark.django_db

NOVEMBER_IN_WORDS = "nlp/high 2026-11-01 to 2026-11-30 (included)"


@pytest.fixture
def setup() -> dict[str, object]:
    """The ledger tests' pool (``grant`` takes it): a team, a budgeted class, an admin."""
    priority_class("normal", default=True)
    return {
        "high": priority_class("high", value=100, budget_rate=Decimal(1)),
        "team": tenant("nlp"),
        "admin": user("root-admin", admin=True),
    }


def test_a_budgets_name_gives_its_last_day_not_the_day_after(setup: dict) -> None:
    budget = grant(setup, 100)
    assert str(budget) == NOVEMBER_IN_WORDS


def test_the_audit_rows_of_a_grant_and_of_the_loops_moves_name_the_period_in_words(
    setup: dict,
) -> None:
    budget = grant(setup, 100)
    do_record_budget_moves([BudgetMove(budget.pk, "spend", Decimal("-2"), None, "ran")], at=NOW)
    reprs = dict(
        AuditEvent.objects.filter(object_id=str(budget.pk))
        .filter(action__in=["quotas.grant_budget", "quotas.cycle_budget"])
        .values_list("action", "object_repr")
    )
    assert reprs == {
        "quotas.grant_budget": NOVEMBER_IN_WORDS,
        "quotas.cycle_budget": NOVEMBER_IN_WORDS,
    }


def test_an_overlapping_grant_is_refused_naming_the_other_budgets_period_in_words(
    setup: dict,
) -> None:
    budget = grant(setup, 100)
    overlapping = PriorityBudget(
        tenant=budget.tenant,
        priority_class=budget.priority_class,
        period_start=budget.period_start.replace(day=15),
        period_end=budget.period_end.replace(day=15),
        gpu_hours=1,
    )
    with pytest.raises(ValidationError) as refused:
        overlapping.clean()
    assert refused.value.message_dict["period_start"] == [
        f"the period overlaps the budget {NOVEMBER_IN_WORDS}"
    ]


def test_the_admin_sites_list_of_requests_names_a_budget_requests_period_in_words(
    setup: dict,
) -> None:
    asked = QuotaRequest(
        tenant=setup["team"],
        priority_class=setup["high"],
        period_start=date(2026, 11, 1),
        period_end=date(2026, 12, 1),
    )
    target = QuotaRequestAdmin(QuotaRequest, admin.site).target(asked)
    assert target == "high 2026-11-01 to 2026-11-30 (included)"
