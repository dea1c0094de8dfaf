"""Cancelling a workload from its page: offered only to who may cancel it (its submitter, a
lead of its team, an admin: ``workloads.actions.may_cancel``) while it waits or holds GPUs,
done by the API's own action (``do_cancel_workload``), recorded in its history with who and
why, and said as a message; a refused cancel says why and changes nothing."""

from __future__ import annotations

from typing import Any

import pytest
from dashboard_pages import text
from django.test import Client
from two_teams import submit

from gpupool.workloads.models import Workload, WorkloadTransition

CANCEL_URL = "/workloads/nlp/train/cancel/"
OFFERED = 'action="/workloads/nlp/train/cancel/"'


def test_the_submitter_cancels_from_the_page_and_its_history_says_who_and_why(
    pool: Any, page_as: Any
) -> None:
    submit(pool, "train", pool.nlp_queue, "max")
    client = page_as("max")
    page = text(client.get("/workloads/nlp/train/"))
    assert OFFERED in page and "Yes, cancel nlp/train" in page  # a second, deliberate step
    assert '<details class="cancel" id="cancel">' in page
    response = client.post(CANCEL_URL, {"reason": "wrong image"}, follow=True)
    assert response.redirect_chain[-1][0] == "/workloads/nlp/train/"
    assert "nlp/train is cancelled" in text(response)
    assert Workload.objects.get(name="train").state == "cancelled"
    last = WorkloadTransition.objects.filter(workload__name="train").latest("at", "id")
    assert (last.to_state, last.reason) == ("cancelled", "wrong image")
    assert last.actor == pool.users["max"]
    assert OFFERED not in text(response)  # over: nothing left to cancel


@pytest.mark.parametrize("who", ["lena", "ada"])
def test_a_lead_of_its_team_or_an_admin_is_offered_to_cancel(
    pool: Any, page_as: Any, who: str
) -> None:
    submit(pool, "train", pool.nlp_queue, "max")
    assert OFFERED in text(page_as(who).get("/workloads/nlp/train/"))


def test_a_member_who_did_not_submit_it_is_not_offered_and_a_forged_post_changes_nothing(
    pool: Any, page_as: Any
) -> None:
    submit(pool, "train", pool.nlp_queue, "lena")
    client = page_as("max")
    assert OFFERED not in text(client.get("/workloads/nlp/train/"))
    response = client.post(CANCEL_URL, {"reason": "mine now"}, follow=True)
    assert "nlp/train was not cancelled: Only its submitter, a lead of its tenant" in text(response)
    assert Workload.objects.get(name="train").state == "pending"
    assert not WorkloadTransition.objects.filter(to_state="cancelled").exists()


def test_finished_work_is_not_offered_and_a_late_cancel_says_why(pool: Any, page_as: Any) -> None:
    submit(pool, "train", pool.nlp_queue, "max")
    client = page_as("max")
    client.post(CANCEL_URL)
    page = text(client.post(CANCEL_URL, follow=True))
    assert "nlp/train was not cancelled: nlp/train has already ended: it is cancelled." in page
    assert OFFERED not in page
    assert WorkloadTransition.objects.filter(to_state="cancelled").count() == 1


def test_another_teams_workload_is_not_found(pool: Any, page_as: Any) -> None:
    submit(pool, "train", pool.nlp_queue, "max")
    assert page_as("vic").post(CANCEL_URL).status_code == 404
    assert page_as("fin").post(CANCEL_URL).status_code == 403  # finance opens no workload
    assert Workload.objects.get(name="train").state == "pending"


def test_cancel_is_a_post_with_the_csrf_token(pool: Any) -> None:
    submit(pool, "train", pool.nlp_queue, "max")
    client = Client(enforce_csrf_checks=True)
    client.force_login(pool.users["max"])
    assert client.get(CANCEL_URL).status_code == 405
    assert client.post(CANCEL_URL).status_code == 403
    page = text(client.get("/workloads/nlp/train/"))
    assert 'name="csrfmiddlewaretoken"' in page.split(OFFERED, 1)[1].split("</form>", 1)[0]
    assert Workload.objects.get(name="train").state == "pending"
