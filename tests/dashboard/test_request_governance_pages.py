"""A lead's request pages: the verdict an admin would get, one open request a target, a
draft's edit and withdrawal, and the budget form's errors said once, in the labels' words.

The pool (``conftest``): 15 healthy h100 GPUs; nlp and vision at 4 / 8 / 16; ``lena`` leads
nlp, ``vera`` vision, ``ada`` is an admin.
"""

from __future__ import annotations

from datetime import timedelta
from html import unescape
from typing import Any

import pytest
from dashboard_pages import text
from django.core.exceptions import ValidationError
from domain_builders import period_fields, this_month
from two_teams import budget_request, quota_request

from gpupool.audit.models import AuditEvent
from gpupool.quotas.actions import (
    decision_refusal,
    do_submit_quota_request,
    do_withdraw_quota_request,
)
from gpupool.quotas.models import QuotaRequest

QUOTA = {
    "kind": "queue-quota",
    "guarantee": "6",
    "deserved": "10",
    "capability": "16",
    "justification": "the new model needs more guaranteed GPUs",
}
# A budget request's period is the month three months on (still to come), from ``ask_budget``.
AHEAD = 3
BUDGET = {
    "kind": "budget",
    "gpu_hours": "100",
    "justification": "the launch needs protected runs",
}


def ask(pool: Any, **changes: Any) -> dict[str, Any]:
    """The form's fields for nlp's h100 quota, with ``changes``."""
    return QUOTA | {"queue": pool.nlp_queue.pk, "flavor": pool.h100.pk} | changes


def ask_budget(pool: Any, **changes: Any) -> dict[str, Any]:
    """The form's fields for GPU-hours added to nlp's budget at high for the month ``AHEAD``
    months on, with ``changes``."""
    fields = BUDGET | period_fields(months=AHEAD)
    return fields | {"tenant": pool.nlp.pk, "priority_class": pool.high.pk} | changes


def draft(pool: Any, by: str = "lena", submit: bool = False, **levels: Any) -> QuotaRequest:
    """A request of nlp for h100 (6 / 10 / 16 unless told), a draft unless ``submit``."""
    return quota_request(pool, by=by, submit=submit, **levels)


def errors(response: Any) -> dict[str, list[str]]:
    """The request form's errors on the page, by field ("__all__": above the form)."""
    return {name: list(found) for name, found in response.context["form"].errors.items()}


# ----------------------------------------------------------------------------- the verdict


def test_a_lead_is_told_after_filing_that_an_admin_could_not_approve_a_change_that_does_not_fit(
    pool: Any, page_as: Any
) -> None:
    big = ask(pool, guarantee="400", deserved="400", capability="400")
    response = page_as("lena").post("/requests/", big, follow=True)
    request = QuotaRequest.objects.get()
    assert request.state == "submitted"  # filed: the pool may grow before an admin decides
    page = unescape(text(response))
    assert f"Request #{request.pk} is submitted" in page
    # the warning after filing, and the request's page, both say it
    assert page.count("As things stand an admin could not approve this: the change would") == 2
    assert "guarantee: the top-level h100 guarantees would total 404 GPUs" in page


def test_the_request_page_gives_the_verdict_the_approval_refuses_with(
    pool: Any, page_as: Any
) -> None:
    request = draft(pool, submit=True, guarantee=400, deserved=400, capability=400)
    refusal = decision_refusal(request, acting_user=pool.users["ada"], approve=True)
    assert isinstance(refusal, ValidationError)
    page = unescape(text(page_as("lena").get(f"/requests/{request.pk}/")))
    assert f"As things stand an admin could not approve this: {refusal.messages[0]}" in page
    assert "does not fit" in text(page_as("ada").get(f"/approvals/{request.pk}/"))


def test_a_draft_that_does_not_fit_says_so_too_and_one_that_fits_says_nothing(
    pool: Any, page_as: Any
) -> None:
    too_big = draft(pool, guarantee=400, deserved=400, capability=400)
    page = text(page_as("lena").get(f"/requests/{too_big.pk}/"))
    assert "As things stand an admin could not approve this" in page
    do_withdraw_quota_request(too_big, acting_user=pool.users["lena"])
    fits = draft(pool)
    assert "could not approve" not in text(page_as("lena").get(f"/requests/{fits.pk}/"))


# ----------------------------------------------------------------------------- a new request


def test_a_request_for_the_queue_s_levels_already_is_refused_beside_the_amounts(
    pool: Any, page_as: Any
) -> None:
    response = page_as("lena").post("/requests/", ask(pool, guarantee="4", deserved="8"))
    assert response.status_code == 400 and not QuotaRequest.objects.exists()
    found = errors(response)  # about the whole request, not one amount: above the form
    assert found == {
        "__all__": [
            "requested amounts: these are the queue's levels already (guarantee 4, deserved 8, "
            "capability 16): ask for a change"
        ]
    }


def test_a_second_open_request_for_the_queue_and_flavor_is_refused_beside_the_queue(
    pool: Any, page_as: Any
) -> None:
    first = draft(pool)
    response = page_as("lena").post("/requests/", ask(pool, capability="20"))
    assert QuotaRequest.objects.count() == 1
    assert errors(response)["queue"] == [
        f"request #{first.pk} for this queue and flavor is open (your draft): change or "
        "withdraw it first"
    ]


def test_a_submitted_request_keeps_another_from_being_submitted(pool: Any) -> None:
    mine = draft(pool)
    # lena's draft is hers alone: an admin neither sees it nor is held up by it
    theirs = draft(pool, by="ada", submit=True, capability=20)
    with pytest.raises(ValidationError) as refused:
        do_submit_quota_request(mine, acting_user=pool.users["lena"])
    assert refused.value.message_dict == {
        "queue": [
            f"request #{theirs.pk} for this queue and flavor is open (submitted, waiting for "
            "an admin's decision): ask again once it is decided"
        ]
    }


def test_a_second_open_budget_request_for_an_overlapping_period_is_refused(
    pool: Any, page_as: Any
) -> None:
    client = page_as("lena")
    client.post("/requests/", ask_budget(pool, save_draft="1"))
    first = QuotaRequest.objects.get()
    overlapping = this_month(months=AHEAD)[0] + timedelta(days=14)
    response = client.post("/requests/", ask_budget(pool, period_start=overlapping.isoformat()))
    assert QuotaRequest.objects.count() == 1
    assert errors(response)["period_start"] == [
        f"request #{first.pk} for this team, class and period is open (your draft): change or "
        "withdraw it first"
    ]


# ----------------------------------------------------------------------------- a draft


def test_the_draft_page_offers_its_author_edit_and_withdraw(pool: Any, page_as: Any) -> None:
    request = draft(pool)
    page = text(page_as("lena").get(f"/requests/{request.pk}/"))
    assert f'href="/requests/{request.pk}/edit/"' in page
    assert 'name="withdraw"' in page
    submitted = text(page_as("lena").get(f"/requests/{draft(pool, by='ada').pk}/"))
    assert "withdraw" not in submitted  # an admin's draft: lena does not even see it
    do_submit_quota_request(request, acting_user=pool.users["lena"])
    page = text(page_as("lena").get(f"/requests/{request.pk}/"))
    # Submitted: no edit; withdrawing it keeps it, behind a confirmation
    # (test_walk_s16_withdraw_submitted.py).
    assert "/edit/" not in page and 'id="withdraw-confirm"' in page


def test_the_draft_s_author_changes_it_with_the_same_form_prefilled(
    pool: Any, page_as: Any
) -> None:
    request = draft(pool)
    client = page_as("lena")
    form = client.get(f"/requests/{request.pk}/edit/").context["form"]
    assert form["deserved"].value() == "10" and form["queue"].value() == pool.nlp_queue.pk
    response = client.post(
        f"/requests/{request.pk}/edit/", ask(pool, deserved="12", save="1"), follow=True
    )
    request.refresh_from_db()
    assert request.state == "draft"
    assert request.payload == {"guarantee": "6", "deserved": "12", "capability": "16"}
    assert f"Request #{request.pk} is a draft" in text(response)
    assert AuditEvent.objects.filter(action="quotas.update_quota_request").count() == 1


def test_the_draft_s_author_saves_and_submits_it_from_the_edit_form(
    pool: Any, page_as: Any
) -> None:
    request = draft(pool)
    page_as("lena").post(f"/requests/{request.pk}/edit/", ask(pool, deserved="12", submit="1"))
    request.refresh_from_db()
    assert request.state == "submitted" and request.payload["deserved"] == "12"


def test_an_edit_refused_by_the_action_comes_back_beside_the_field(pool: Any, page_as: Any) -> None:
    request = draft(pool)
    response = page_as("lena").post(
        f"/requests/{request.pk}/edit/", ask(pool, guarantee="4", deserved="8")
    )
    assert errors(response)["__all__"][0].startswith(
        "requested amounts: these are the queue's levels already"
    )


def test_the_draft_s_author_withdraws_it_and_the_withdrawal_is_audited(
    pool: Any, page_as: Any
) -> None:
    request = draft(pool)
    response = page_as("lena").post(f"/requests/{request.pk}/", {"withdraw": "1"}, follow=True)
    assert response.redirect_chain[-1][0] == "/requests/"
    assert f"Draft #{request.pk} is withdrawn" in text(response)
    assert not QuotaRequest.objects.exists()
    event = AuditEvent.objects.get(action="quotas.withdraw_quota_request")
    assert event.before is not None and event.before["state"] == "draft"


def test_a_submitted_request_is_not_changed(pool: Any, page_as: Any) -> None:
    """(Withdrawing a submitted request keeps it, withdrawn: test_walk_s16_withdraw_submitted.)"""
    request = draft(pool, submit=True)
    client = page_as("lena")
    assert client.get(f"/requests/{request.pk}/edit/").status_code == 302
    client.post(f"/requests/{request.pk}/edit/", ask(pool, deserved="12"))
    request.refresh_from_db()
    assert request.state == "submitted" and request.payload["deserved"] == "10"


def test_nobody_else_edits_or_withdraws_a_draft(pool: Any, page_as: Any) -> None:
    request = draft(pool)
    for who in ("ada", "vera"):
        client = page_as(who)
        assert client.get(f"/requests/{request.pk}/edit/").status_code == 404
        assert client.post(f"/requests/{request.pk}/", {"withdraw": "1"}).status_code == 404
    assert QuotaRequest.objects.filter(pk=request.pk, state="draft").exists()


# ----------------------------------------------------------------------------- the form


def test_a_period_until_before_period_from_reads_as_the_labels(pool: Any, page_as: Any) -> None:
    response = page_as("lena").post(
        "/requests/", ask_budget(pool, period_start="2026-12-10", period_end="2026-12-01")
    )
    assert errors(response)["period_end"] == [
        "the period's end (2026-12-01) must be after its start (2026-12-10)"
    ]
    page = text(response)
    assert "period_end (" not in page and "period_start (" not in page


def test_negative_gpu_hours_get_one_error(pool: Any, page_as: Any) -> None:
    response = page_as("lena").post("/requests/", ask_budget(pool, gpu_hours="-5"))
    assert errors(response) == {"gpu_hours": ["add more than 0 GPU-hours"]}


def test_zero_gpu_hours_are_refused_on_the_form_and_by_the_action(pool: Any, page_as: Any) -> None:
    client = page_as("lena")
    assert 'min="0.001"' in text(client.get("/requests/")).split('name="gpu_hours"', 1)[1][:200]
    response = client.post("/requests/", ask_budget(pool, gpu_hours="0"))
    assert list(errors(response)) == ["gpu_hours"] and not QuotaRequest.objects.exists()
    with pytest.raises(ValidationError) as refused:
        budget_request(pool, 0, period=this_month(months=AHEAD), justification="nothing")
    assert refused.value.message_dict == {
        "payload": ["adding 0 GPU-hours changes nothing: ask for more"]
    }


def test_a_guarantee_above_deserved_is_said_once_beside_the_guarantee(
    pool: Any, page_as: Any
) -> None:
    response = page_as("lena").post("/requests/", ask(pool, guarantee="12"))
    assert errors(response) == {
        "guarantee": ["Guarantee (12) must not exceed Deserved (10)"],
        "deserved": ["see the error under Guarantee (GPUs or MIG instances)"],
    }  # capability is not named by the refusal: no pointer under it
    assert "see above" not in text(response)


def test_a_budget_draft_is_changed_with_its_team_kept(pool: Any, page_as: Any) -> None:
    client = page_as("lena")
    client.post("/requests/", ask_budget(pool, save_draft="1"))
    request = QuotaRequest.objects.get()
    form = client.get(f"/requests/{request.pk}/edit/").context["form"]
    assert form["kind"].value() == "budget" and form["gpu_hours"].value() == "100"
    # a team posted (vision's) is ignored: the draft's team stays
    client.post(
        f"/requests/{request.pk}/edit/",
        ask_budget(pool, tenant=pool.vision.pk, kind="queue-quota", gpu_hours="150", save="1"),
    )
    request.refresh_from_db()
    assert (request.kind, request.tenant, request.payload) == (
        "budget",
        pool.nlp,
        {"gpu_hours": "150"},
    )
