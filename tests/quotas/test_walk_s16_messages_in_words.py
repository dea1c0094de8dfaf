"""Walk-through s16: the quotas models' validation messages reach people (the pages, the admin
site, the API's 400s) and say the rule in the pages' words, never a raw attribute name such
as ``default_protected_runtime_s``; each stays keyed by its field, so a form puts it beside
that field and the API names it."""

from __future__ import annotations

import re
from datetime import date
from decimal import Decimal
from typing import Any

import pytest
from django.core.exceptions import ValidationError
from domain_builders import priority_class, tenant, user

from gpupool.quotas.models import PriorityBudget, PriorityClass, Queue, QuotaRequest

pytestmark = pytest.mark.django_db

# An attribute name as the code spells it: words joined by underscores.
RAW_NAME = re.compile(r"\b[a-z]+(?:_[a-z]+)+\b")


def refused(instance: Any) -> dict[str, list[str]]:
    """``instance.clean()``'s messages by field."""
    with pytest.raises(ValidationError) as error:
        instance.clean()
    found: dict[str, list[str]] = error.value.message_dict
    return found


def only(messages: dict[str, list[str]], field: str) -> str:
    """The one message keyed ``field``, checked to name no attribute raw."""
    (message,) = messages[field]
    assert not RAW_NAME.search(message), message
    return message


def test_a_default_protection_above_the_queues_maximum_says_so_in_words() -> None:
    queue = Queue(name="nlp", default_protected_runtime_s=3600, max_protected_runtime_s=1800)
    assert only(refused(queue), "default_protected_runtime_s") == (
        "the default protected runtime (3600 s) is above the queue's maximum of 1800 s"
    )


def test_the_idle_policy_s_rules_read_as_the_queues_page_columns() -> None:
    backwards = refused(Queue(name="nlp", idle_alert_after_s=3600, idle_reclaim_after_s=600))
    assert only(backwards, "idle_reclaim_after_s") == (
        "reclaim after idle (600 s) must be longer than alert after idle (3600 s): the alert "
        "warns before the reclaim"
    )
    negative = refused(PriorityClass(name="low", value=1, idle_alert_after_s=0))
    assert only(negative, "idle_alert_after_s") == (
        "alert after idle must be a positive number of seconds, not 0"
    )


def test_a_budget_rate_on_the_default_class_says_its_budget_rate() -> None:
    default = PriorityClass(name="normal", value=0, default=True, budget_rate=Decimal(2))
    assert only(refused(default), "budget_rate") == (
        "the default class spends no budget: its budget rate must be 0, not 2"
    )


def test_a_budget_s_period_and_class_read_in_words() -> None:
    free = priority_class("normal", default=True)
    team = tenant("nlp")
    budget = PriorityBudget(
        tenant=team,
        priority_class=free,
        period_start=date(2026, 12, 10),
        period_end=date(2026, 12, 1),
        gpu_hours=Decimal(10),
    )
    messages = refused(budget)
    assert only(messages, "period_end") == (
        "the period's end (2026-12-01) must be after its start (2026-12-10)"
    )
    assert only(messages, "priority_class") == "normal has a budget rate of 0 and needs no budget"


def test_a_budget_request_s_period_and_class_read_in_words() -> None:
    free = priority_class("normal", default=True)
    request = QuotaRequest(
        kind="budget",
        tenant=tenant("nlp"),
        priority_class=free,
        period_start=date(2026, 12, 10),
        period_end=date(2026, 12, 1),
        payload={"gpu_hours": 10},
        justification="launch",
        requested_by=user("lead"),
    )
    messages = refused(request)
    assert only(messages, "period_end") == (
        "the period's end (2026-12-01) must be after its start (2026-12-10)"
    )
    assert only(messages, "priority_class") == "normal has a budget rate of 0 and needs no budget"
