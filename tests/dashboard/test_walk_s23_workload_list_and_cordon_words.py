"""My workloads says, for a state filter that lists nothing, that none of the teams' work (an
admin's: any team's) is in that state, not that none was "submitted in this state"; a
pending workload whose pods' labels cannot be used shows the sentence its page shows, not
"not looked at by a cycle yet". The Cluster page's cordon form refused names its field as
the page labels it ("Why"), as the drain and GPU-health forms do."""

from __future__ import annotations

from typing import Any

import pytest
from dashboard_pages import live, rows, text
from django.utils.html import escape
from domain_builders import explained
from two_teams import submit

from gpupool.audit.models import AuditEvent
from gpupool.inventory.models import Node

# How each state's empty list reads, after "No workload of your teams" / "of any team".
EMPTY = {
    "pending": "is pending",
    "admitted": "is admitted",
    "running": "is running",
    "succeeded": "has succeeded",
    "failed": "has failed",
    "preempted": "was preempted and is not requeued",
    "cancelled": "was cancelled",
}


@pytest.mark.parametrize("state", list(EMPTY))
@pytest.mark.parametrize(("user", "whose"), [("max", "your teams"), ("ada", "any team")])
def test_an_empty_state_filter_says_no_work_is_in_that_state(
    pool: Any, page_as: Any, state: str, user: str, whose: str
) -> None:
    # A workload of another state, so the list is empty only for the filter.
    other = submit(pool, "waits", pool.nlp_queue, "max")
    if state == "pending":
        other.state = "cancelled"
        other.save(update_fields=["state"])
    page = text(live(page_as(user), f"/workloads/?state={state}"))
    assert f"No workload of {whose} {EMPTY[state]}." in page
    assert "submitted work" not in page and "in this state" not in page
    assert 'href="/workloads/">Show every state</a>' in page


def test_an_empty_list_with_no_filter_still_says_how_work_arrives(pool: Any, page_as: Any) -> None:
    page = text(live(page_as("max"), "/workloads/"))
    assert "Your teams have not submitted work. Work arrives as pods" in page


def test_pending_work_whose_labels_cannot_be_used_says_its_pages_sentence(
    pool: Any, page_as: Any
) -> None:
    said = (
        "gpupool does not schedule it: its pods' gpupool.io labels or annotations cannot be "
        "used (gpupool.io/topology: 'ring' is not one of domain, preferred). Fix them and it "
        "is looked at again."
    )
    unreadable = submit(pool, "odd", pool.nlp_queue, "max")
    explained(unreadable, "", said, {"refused": "gpupool.io/topology: 'ring'"})
    submit(pool, "fresh", pool.nlp_queue, "max")  # no cycle has looked at it yet
    client = page_as("max")
    detail = text(client.get("/workloads/nlp/odd/"))
    assert escape(said) in detail  # the workload page's sentence

    table = rows(text(live(client, "/workloads/")))
    odd = table.split("nlp/odd", 1)[1].split("</tr>", 1)[0]
    fresh = table.split("nlp/fresh", 1)[1].split("</tr>", 1)[0]
    assert escape(said) in odd and "not looked at" not in odd
    assert "not looked at by a cycle yet" in fresh


def test_a_wrong_cordon_form_names_the_reason_as_the_page_labels_it(
    pool: Any, page_as: Any
) -> None:
    response = page_as("ada").post(
        "/cluster/nodes/n2/cordon/", {"cordoned": "on", "reason": "x" * 401}, follow=True
    )
    page = text(response)
    assert not Node.objects.get(name="n2").cordoned
    assert not AuditEvent.objects.filter(action__contains="cordon").exists()
    assert 'for="cordon-n2">Why cordon n2' in text(page_as("ada").get("/cluster/"))
    assert "n2 was not changed: Why: at most 400 characters, not 401" in page
    assert "not filled in right" not in page and "reason:" not in page
