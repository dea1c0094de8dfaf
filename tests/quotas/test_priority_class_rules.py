"""Priority classes: exactly one default (moved, never dropped), the default is free,
policies are known."""

from decimal import Decimal

import pytest
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from domain_builders import priority_class, user

from gpupool.audit.models import AuditEvent
from gpupool.quotas.actions import do_save_priority_class
from gpupool.quotas.models import PriorityClass

pytestmark = pytest.mark.django_db


def test_a_second_default_class_takes_the_default_over() -> None:
    priority_class("normal", default=True)
    priority_class("batch", value=-10, default=True)
    assert list(PriorityClass.objects.filter(default=True).values_list("name", flat=True)) == [
        "batch"
    ]


def test_the_database_keeps_one_default_class() -> None:
    priority_class("normal", default=True)
    with pytest.raises(IntegrityError), transaction.atomic():
        PriorityClass.objects.create(name="batch", value=-10, default=True)
    # non-default classes are unrestricted
    PriorityClass.objects.create(name="high", value=100)
    PriorityClass.objects.create(name="low", value=-100)


def test_the_default_class_spends_no_budget() -> None:
    with pytest.raises(ValidationError) as error:
        priority_class("normal", default=True, budget_rate=Decimal(1))
    assert "budget_rate" in error.value.message_dict
    with pytest.raises(IntegrityError), transaction.atomic():
        PriorityClass.objects.create(name="raw", value=0, default=True, budget_rate=1)


def test_an_unknown_preemption_policy_is_refused() -> None:
    with pytest.raises(ValidationError) as error:
        priority_class("weird", preemption_policy="Sometimes")
    assert "preemption_policy" in error.value.message_dict


def test_a_negative_budget_rate_is_refused() -> None:
    with pytest.raises(ValidationError) as error:
        priority_class("high", value=100, budget_rate=Decimal(-1))
    assert "budget_rate" in error.value.message_dict


def test_changing_a_class_is_audited_with_before_and_after() -> None:
    admin = user("root-admin", admin=True)
    high = priority_class("high", value=100, budget_rate=Decimal(1))
    high.budget_rate = Decimal(2)
    do_save_priority_class(high, acting_user=admin, reason="deadline season")
    event = AuditEvent.objects.filter(action="quotas.save_priority_class").first()
    assert event is not None and event.actor == admin
    assert (event.before or {})["budget_rate"] == "1.000"
    assert (event.after or {})["budget_rate"] == "2.000"
    assert event.reason == "deadline season"
