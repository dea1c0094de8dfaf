"""Submitting work from the Workloads page that will never run as asked: that it is queued
is a success message, that it will not run as asked a warning (class ``warning``), not a
second success; work that fits gets its one success message as before."""

from __future__ import annotations

from typing import Any

import pytest
from dashboard_pages import SUBMIT_FORM
from django.contrib import messages

pytestmark = pytest.mark.django_db


def shown(response: Any) -> list[tuple[int, str]]:
    """The messages the page after the submission shows, as (level, text)."""
    return [(message.level, str(message)) for message in response.context["messages"]]


def test_work_that_never_fits_is_queued_as_a_success_and_warned_of_as_a_warning(
    pool: Any, page_as: Any
) -> None:
    huge = SUBMIT_FORM | {"name": "huge", "pods": "4", "gpus_per_pod": "8"}  # 32 > capability 16
    response = page_as("max").post("/workloads/submit/", huge, follow=True)
    said = shown(response)
    assert [level for level, _ in said] == [messages.SUCCESS, messages.WARNING]
    assert said[0][1] == "nlp/huge is queued."
    assert said[1][1].startswith("nlp/huge will not run as asked: ")
    assert said[1][1].endswith(
        "It has no place in line until its queue's quota or the pool changes."
    )
    page = response.content.decode()
    assert '<li class="warning">nlp/huge will not run as asked: ' in page
    assert '<li class="success">nlp/huge is queued.</li>' in page


def test_work_that_fits_gets_one_success(pool: Any, page_as: Any) -> None:
    response = page_as("max").post("/workloads/submit/", SUBMIT_FORM, follow=True)
    said = shown(response)
    assert [level for level, _ in said] == [messages.SUCCESS]
    assert said[0][1].startswith("nlp/train is queued: the next scheduling cycle starts it")
