"""The idle policy's rules on classes and queues, through the actions and the admin: positive
timeouts, the reclaim after the alert when both are set, errors naming the field; null is the
default (a class: never; a queue: the class's)."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse
from domain_builders import priority_class, queue

from gpupool.quotas.actions import do_save_priority_class, do_save_queue
from gpupool.quotas.models import PriorityClass, Queue

pytestmark = pytest.mark.django_db


def test_the_idle_policy_is_off_by_default() -> None:
    klass = priority_class("normal", default=True)
    team = queue("team-a")
    assert (klass.idle_alert_after_s, klass.idle_reclaim_after_s) == (None, None)
    assert (team.idle_alert_after_s, team.idle_reclaim_after_s) == (None, None)


@pytest.mark.parametrize(
    ("alert", "reclaim", "field"),
    [
        (0, None, "idle_alert_after_s"),
        (None, 0, "idle_reclaim_after_s"),
        (3600, 600, "idle_reclaim_after_s"),
        (600, 600, "idle_reclaim_after_s"),
    ],
    ids=["an alert after 0 s", "a reclaim after 0 s", "the reclaim before the alert",
         "the reclaim with the alert"],
)  # fmt: skip
def test_a_bad_idle_policy_is_refused_naming_the_field(
    alert: int | None, reclaim: int | None, field: str
) -> None:
    klass = priority_class("interactive", 50)
    klass.idle_alert_after_s, klass.idle_reclaim_after_s = alert, reclaim
    with pytest.raises(ValidationError) as error:
        do_save_priority_class(klass, acting_user=None)
    assert field in error.value.message_dict
    assert PriorityClass.objects.get(name="interactive").idle_alert_after_s is None
    team = queue("team-a")
    team.idle_alert_after_s, team.idle_reclaim_after_s = alert, reclaim
    with pytest.raises(ValidationError) as error:
        do_save_queue(team, acting_user=None)
    assert field in error.value.message_dict
    assert Queue.objects.get(name="team-a").idle_reclaim_after_s is None


def test_the_admin_sets_a_class_idle_policy_and_refuses_a_reclaim_before_the_alert(
    submit_admin_form: Any,
) -> None:
    klass = priority_class("interactive", 50)
    change = reverse("admin:quotas_priorityclass_change", args=[klass.pk])
    refused = submit_admin_form(
        change, {"idle_alert_after_s": "3600", "idle_reclaim_after_s": "600"}
    )
    assert refused.status_code == 200 and "must be longer than alert after idle" in (
        refused.content.decode()
    )
    assert PriorityClass.objects.get(pk=klass.pk).idle_reclaim_after_s is None
    done = submit_admin_form(change, {"idle_alert_after_s": "1200", "idle_reclaim_after_s": "3600"})
    assert done.status_code == 302
    klass.refresh_from_db()
    assert (klass.idle_alert_after_s, klass.idle_reclaim_after_s) == (1200, 3600)
