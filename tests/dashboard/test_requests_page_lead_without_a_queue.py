"""A lead whose team has no queue still files what can succeed: the Requests page shows them
the form for a priority budget (chosen at first), and in place of the queue-quota fields says
why there is no quota to ask for; posting that kind anyway is refused on the kind, naming the
reason, and files nothing. Where no kind could succeed (no queue, and no class costs budget),
the page says why of each instead of showing a form."""

from __future__ import annotations

from collections.abc import Callable
from html import unescape
from typing import Any

import pytest
from django.test import Client
from domain_builders import period_fields, tenant, user

from gpupool.quotas.models import PriorityClass, QuotaRequest
from gpupool.tenancy.models import Tenant

pytestmark = pytest.mark.django_db

NO_QUEUE = (
    "No team you lead has a queue, so there is no queue quota to ask for: a quota request "
    "changes the quota of a team's queue, and an admin creates queues."
)


@pytest.fixture
def sam(pool: Any, page_as: Callable[[str], Client]) -> Client:
    """sam leads speech, a team with no queue (the pool's class high has a budget rate)."""
    pool.users["sam"] = user("sam")
    tenant("speech", lead=pool.users["sam"], namespaces=("speech",))
    return page_as("sam")


def test_the_lead_sees_the_budget_form_and_why_there_is_no_quota_to_ask(sam: Client) -> None:
    response = sam.get("/requests/")
    text = unescape(response.content.decode())
    assert "data-request-form" in text and "Priority budget: GPU-hours to add" in text
    assert response.context["form"]["kind"].value() == "budget"  # the kind that can succeed
    assert NO_QUEUE in text
    assert "You lead no team with a queue" not in text


def test_the_lead_files_a_budget_request(sam: Client) -> None:
    response = sam.post(
        "/requests/",
        {
            "kind": "budget",
            "tenant": Tenant.objects.get(name="speech").pk,
            "priority_class": PriorityClass.objects.get(name="high").pk,
            **period_fields(),
            "gpu_hours": "20",
            "justification": "the speech team's first month",
        },
    )
    filed = QuotaRequest.objects.get()
    assert response.status_code == 302 and response.url == f"/requests/{filed.pk}/"
    assert (filed.kind, filed.tenant.name, filed.state) == ("budget", "speech", "submitted")


def test_a_quota_request_posted_anyway_is_refused_on_the_kind(sam: Client) -> None:
    response = sam.post(
        "/requests/",
        {"kind": "queue-quota", "guarantee": "1", "deserved": "2", "capability": "4",
         "justification": "no queue yet"},
    )  # fmt: skip
    assert response.status_code == 400
    assert response.context["form"].errors["kind"] == [NO_QUEUE]
    assert not QuotaRequest.objects.exists()


def test_with_nothing_that_could_succeed_the_page_says_why_of_each(sam: Client) -> None:
    PriorityClass.objects.filter(budget_rate__gt=0).update(budget_rate=0)
    text = unescape(sam.get("/requests/").content.decode())
    assert "data-request-form" not in text and "data-nothing-to-file" in text
    assert NO_QUEUE in text
    assert "No priority class has a budget rate above 0" in text


def test_a_lead_with_a_queue_sees_both_kinds_as_before(page_as: Callable[[str], Client]) -> None:
    text = page_as("lena").get("/requests/").content.decode()
    assert "data-request-form" in text and "data-cannot-file" not in text
    assert 'name="queue"' in text and 'name="priority_class"' in text
