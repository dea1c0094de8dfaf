"""Requests (a lead files and follows) and Approvals (an admin sees the impact, replays recent
demand, and decides): the pages call the governance actions and queries the API calls."""

from __future__ import annotations

import csv
import html
import io
from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from dashboard_pages import live, text
from django.core import mail
from django.utils import timezone
from domain_builders import period_fields
from two_teams import budget_request, quota_request

from gpupool.audit.models import AuditEvent
from gpupool.quotas import whatif
from gpupool.quotas.actions import (
    do_begin_what_if,
    do_finish_what_if,
    do_record_what_if_progress,
    do_reject_quota_request,
)
from gpupool.quotas.models import QueueQuota, QuotaRequest, WhatIfRun

ASK = {
    "kind": "queue-quota",
    "queue": "",  # the test sets the queue's id
    "flavor": "",
    "guarantee": "6",
    "deserved": "10",
    "capability": "16",
    "justification": "the new model needs more guaranteed GPUs",
}


def ask(pool: Any, **changes: Any) -> dict[str, Any]:
    """The request form's fields for nlp's h100 quota, with ``changes``."""
    return ASK | {"queue": pool.nlp_queue.pk, "flavor": pool.h100.pk} | changes


def filed(pool: Any, by: str = "lena", **payload: Any) -> QuotaRequest:
    """A submitted request of nlp for h100 (guarantee 6, deserved 10, capability 16)."""
    return quota_request(pool, by=by, submit=True, **payload)


@pytest.fixture
def dispatched(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The what-if runs handed to the background (none runs: the test drives them)."""
    runs: list[int] = []
    monkeypatch.setattr(whatif, "dispatch_what_if", runs.append)
    return runs


# ----------------------------------------------------------------------------- a lead files


def test_a_lead_files_a_quota_request_from_the_page_and_the_admins_are_told(
    pool: Any, page_as: Any
) -> None:
    response = page_as("lena").post("/requests/", ask(pool), follow=True)
    request = QuotaRequest.objects.get()
    assert response.redirect_chain[-1][0] == f"/requests/{request.pk}/"
    assert request.state == "submitted" and request.requested_by == pool.users["lena"]
    assert request.payload == {"guarantee": "6", "deserved": "10", "capability": "16"}
    assert "is submitted" in text(response) and "waits for an admin" in text(response)
    actions = set(AuditEvent.objects.values_list("action", flat=True))
    assert {"quotas.create_quota_request", "quotas.submit_quota_request"} <= actions
    assert [message.to for message in mail.outbox] == [["ada@example.org"]]


def test_a_lead_may_keep_a_request_as_a_draft(pool: Any, page_as: Any) -> None:
    page_as("lena").post("/requests/", ask(pool) | {"save_draft": "1"})
    assert QuotaRequest.objects.get().state == "draft"
    assert mail.outbox == []


def test_a_lead_asks_for_budget_for_a_period(pool: Any, page_as: Any) -> None:
    fields = {
        "kind": "budget",
        "tenant": pool.nlp.pk,
        "priority_class": pool.high.pk,
        **period_fields(),
        "gpu_hours": "200",
        "justification": "a deadline this month",
    }
    response = page_as("lena").post("/requests/", fields)
    assert response.status_code == 302, text(response)
    request = QuotaRequest.objects.get()
    assert (request.kind, request.payload, request.priority_class) == (
        "budget",
        {"gpu_hours": "200"},
        pool.high,
    )


def test_levels_out_of_order_are_refused_on_the_form_naming_them(pool: Any, page_as: Any) -> None:
    response = page_as("lena").post("/requests/", ask(pool, guarantee="12", deserved="10"))
    assert response.status_code == 400
    assert "Guarantee (12) must not exceed Deserved (10)" in text(response)
    assert not QuotaRequest.objects.exists()


def test_a_form_of_one_kind_needs_that_kinds_fields(pool: Any, page_as: Any) -> None:
    response = page_as("lena").post("/requests/", ask(pool, capability="", queue=""))
    assert text(response).count("needed for this kind of request") == 2
    assert not QuotaRequest.objects.exists()


def test_a_lead_may_ask_only_for_the_queues_of_the_teams_they_lead(pool: Any, page_as: Any) -> None:
    client = page_as("lena")
    form = text(client.get("/requests/"))
    assert f'<option value="{pool.nlp_queue.pk}"' in form
    assert f'<option value="{pool.vision_queue.pk}"' not in form
    response = client.post("/requests/", ask(pool, queue=pool.vision_queue.pk))
    assert "Select a valid choice" in text(response)
    assert not QuotaRequest.objects.exists()


def test_a_lead_sees_their_teams_requests_and_not_another_teams(pool: Any, page_as: Any) -> None:
    mine = filed(pool)
    theirs = quota_request(
        pool,
        by="vera",
        team="vision",
        justification="vision's private plans",
        guarantee=4,
        deserved=9,
    )
    client = page_as("lena")
    listing = text(client.get("/requests/"))
    assert f"/requests/{mine.pk}/" in listing
    assert f"/requests/{theirs.pk}/" not in listing and "deserved 9" not in listing
    assert client.get(f"/requests/{mine.pk}/").status_code == 200
    assert client.get(f"/requests/{theirs.pk}/").status_code == 404


def vision_request(pool: Any, *, submit: bool = True) -> QuotaRequest:
    """A request of vision for h100 (guarantee 4, deserved 9, capability 16), by vera."""
    return quota_request(
        pool,
        by="vera",
        team="vision",
        justification="vision's plans",
        submit=submit,
        guarantee=4,
        deserved=9,
        capability=16,
    )


def csv_link(client: Any, page: str, link_id: str) -> tuple[str, list[dict[str, str]]]:
    """The CSV link ``link_id`` of the page at ``page``, and what it downloads as rows."""
    shown = text(client.get(page))
    assert f'id="{link_id}"' in shown, f"{page} has no link {link_id}"
    href = shown.split(f'id="{link_id}" href="')[1].split('"')[0]
    answer = client.get(html.unescape(href))
    assert answer.status_code == 200 and answer["Content-Type"].startswith("text/csv")
    table = b"".join(answer.streaming_content).decode()
    return html.unescape(href), list(csv.DictReader(io.StringIO(table)))


def test_the_requests_page_links_every_request_its_viewer_sees_as_csv(
    pool: Any, page_as: Any
) -> None:
    mine = filed(pool)
    theirs = vision_request(pool)
    link, rows = csv_link(page_as("lena"), "/requests/", "csv-requests")
    assert link == "/api/v1/quota-requests/?format=csv&ordering=-created_at%2C-id"
    assert [(int(row["id"]), row["tenant"]) for row in rows] == [(mine.pk, "nlp")]
    assert (rows[0]["guarantee"], rows[0]["requested_by"]) == ("6", "lena")
    _, every = csv_link(page_as("ada"), "/requests/", "csv-requests")
    assert [int(row["id"]) for row in every] == [theirs.pk, mine.pk]


def test_a_member_who_leads_nothing_may_not_open_requests(pool: Any, page_as: Any) -> None:
    request = filed(pool)
    client = page_as("max")
    assert client.get("/requests/").status_code == 403
    assert client.get(f"/requests/{request.pk}/").status_code == 403
    assert client.post("/requests/", ask(pool)).status_code == 403
    assert QuotaRequest.objects.count() == 1


# ----------------------------------------------------------------------------- an admin decides


def test_the_approvals_page_lists_what_waits_oldest_first(pool: Any, page_as: Any) -> None:
    first = filed(pool)
    # another queue's: one open request a queue and flavor
    second = quota_request(pool, by="vera", team="vision", submit=True, capability=20)
    page = text(page_as("ada").get("/approvals/"))
    assert page.index(f"/approvals/{first.pk}/") < page.index(f"/approvals/{second.pk}/")
    assert "more guaranteed GPUs" in page


def test_the_approvals_page_links_what_waits_and_what_was_decided_as_csv(
    pool: Any, page_as: Any
) -> None:
    waiting = filed(pool)
    decided = do_reject_quota_request(
        vision_request(pool), acting_user=pool.users["ada"], note="not this quarter"
    )
    client = page_as("ada")
    link, pending = csv_link(client, "/approvals/", "csv-pending")
    assert link == "/api/v1/quota-requests/?format=csv&ordering=submitted_at%2Cid&state=submitted"
    assert [(int(row["id"]), row["state"]) for row in pending] == [(waiting.pk, "submitted")]
    link, done = csv_link(client, "/approvals/", "csv-decided")
    assert link == (
        "/api/v1/quota-requests/?format=csv&ordering=-last_step_at%2C-id"
        "&state=approved&state=applied&state=rejected&state=withdrawn"
    )
    assert [(int(row["id"]), row["decided_by"], row["decision_note"]) for row in done] == [
        (decided.pk, "ada", "not this quarter")
    ]


def test_an_admin_sees_the_impact_before_deciding(pool: Any, page_as: Any) -> None:
    request = filed(pool)
    page = text(page_as("ada").get(f"/approvals/{request.pk}/"))
    assert "fits" in page and "does not fit" not in page
    # 15 healthy GPUs (one broken); top-level guarantees go from 4 + 4 to 6 + 4
    assert "<strong>15 GPUs</strong> healthy h100" in page
    assert "<strong>8 GPUs</strong> to <strong>10 GPUs</strong>" in page
    # the shares: nlp's floor rises from 8 to 10 of 15, vision keeps its 4 guaranteed + rest
    assert "Whose deserved share moves" in page and "+" in page
    assert 'name="decision" value="approve"' in page


def test_a_request_that_would_not_fit_says_why(pool: Any, page_as: Any) -> None:
    request = filed(pool, guarantee=12, deserved=12)
    page = text(page_as("ada").get(f"/approvals/{request.pk}/"))
    assert "does not fit" in page and "guarantee" in page


def test_an_admin_approves_with_a_comment_and_the_queue_quota_changes_on_the_page(
    pool: Any, page_as: Any
) -> None:
    request = filed(pool)
    client = page_as("ada")
    before = text(client.get("/queues/?flavor=h100"))
    assert '<td class="number" data-level="guarantee">4 GPUs</td>' in before
    response = client.post(
        f"/approvals/{request.pk}/",
        {"decision": "approve", "decision_note": "fits; revisit in June"},
        follow=True,
    )
    assert response.redirect_chain[-1][0] == "/approvals/"
    assert "approved and applied" in text(response)
    request.refresh_from_db()
    assert (request.state, request.decision_note) == ("applied", "fits; revisit in June")
    quota = QueueQuota.objects.get(queue=pool.nlp_queue, flavor=pool.h100)
    assert (quota.guarantee, quota.deserved, quota.capability) == (6, 10, 16)
    after = text(client.get("/queues/?flavor=h100"))
    assert '<td class="number" data-level="guarantee">6 GPUs</td>' in after
    assert "lena@example.org" in {address for message in mail.outbox for address in message.to}


def test_rejecting_needs_a_comment(pool: Any, page_as: Any) -> None:
    request = filed(pool)
    client = page_as("ada")
    response = client.post(f"/approvals/{request.pk}/", {"decision": "reject"})
    assert response.status_code == 400
    assert "say why the request is rejected" in text(response)
    client.post(f"/approvals/{request.pk}/", {"decision": "reject", "decision_note": "not now"})
    request.refresh_from_db()
    assert (request.state, request.decision_note) == ("rejected", "not now")


def test_an_admin_does_not_decide_their_own_request(pool: Any, page_as: Any) -> None:
    request = filed(pool, by="ada")
    client = page_as("ada")
    assert "another admin decides it" in text(client.get(f"/approvals/{request.pk}/"))
    response = client.post(
        f"/approvals/{request.pk}/", {"decision": "approve", "decision_note": ""}
    )
    assert "Not decided: You filed this request, so another admin decides it." in text(response)
    request.refresh_from_db()
    assert request.state == "submitted"


def test_a_change_that_no_longer_fits_is_refused_and_nothing_changes(
    pool: Any, page_as: Any
) -> None:
    request = filed(pool, guarantee=12, deserved=12)
    response = page_as("ada").post(
        f"/approvals/{request.pk}/", {"decision": "approve", "decision_note": "ok"}
    )
    assert "the change would not fit" in text(response)
    request.refresh_from_db()
    assert request.state == "submitted"
    assert QueueQuota.objects.get(queue=pool.nlp_queue, flavor=pool.h100).guarantee == 4


def test_only_admins_open_a_request_to_decide_it(pool: Any, page_as: Any) -> None:
    request = filed(pool)
    for name in ("lena", "vera", "max", "fin"):
        client = page_as(name)
        assert client.get(f"/approvals/{request.pk}/").status_code == 403
        response = client.post(
            f"/approvals/{request.pk}/", {"decision": "approve", "decision_note": ""}
        )
        assert response.status_code == 403
    request.refresh_from_db()
    assert request.state == "submitted"


# ----------------------------------------------------------------------------- the what-if


def test_an_admin_starts_a_what_if_and_its_progress_bar_is_polled_until_it_ends(
    pool: Any, page_as: Any, dispatched: list[int]
) -> None:
    request = filed(pool)
    client = page_as("ada")
    assert "No what-if yet" in text(client.get(f"/approvals/{request.pk}/"))
    part = client.post(f"/approvals/{request.pk}/what-if/", {"days": "7"}, HTTP_HX_REQUEST="true")
    run = WhatIfRun.objects.get()
    assert dispatched == [run.pk] and run.days == 7
    assert 'hx-trigger="every 1s"' in text(part)
    # the background takes it and reports half-way
    started = do_begin_what_if(run.pk, at=timezone.now())
    assert started is not None
    do_record_what_if_progress(started, progress=0.5, message="replaying with the change")
    polled = text(client.get(f"/approvals/{request.pk}/what-if/"))
    assert '<progress id="what-if-progress" max="1" value="0.500000">50%</progress>' in polled
    assert "replaying with the change" in polled and 'hx-trigger="every 1s"' in polled
    # it ends with each team's change in waits: the poll stops and the result shows
    result = {
        "jobs": 7,
        "window_start": (timezone.now() - timedelta(days=7)).isoformat(),
        "window_end": timezone.now().isoformat(),
        "wait_changes": {
            "nlp": {"wait_mean_s": {"before": 3600.0, "after": 1800.0, "change": -1800.0}},
            "vision": {"wait_mean_s": {"before": 0.0, "after": 600.0, "change": 600.0}},
        },
    }
    do_finish_what_if(started, at=timezone.now(), result=result)
    done = text(client.get(f"/approvals/{request.pk}/what-if/"))
    assert "hx-trigger" not in done
    assert "replayed 7 workloads of 7 days" in done
    assert "\u221230 min" in done and "+10 min" in done
    assert 'id="what-if-chart-figure"' in done
    assert "Replay again" in done


def test_a_second_what_if_while_one_runs_is_refused_saying_why(
    pool: Any, page_as: Any, dispatched: list[int]
) -> None:
    request = filed(pool)
    client = page_as("ada")
    client.post(f"/approvals/{request.pk}/what-if/", {"days": "7"})
    response = client.post(
        f"/approvals/{request.pk}/what-if/", {"days": "7"}, HTTP_HX_REQUEST="true"
    )
    assert "The what-if did not start" in text(response) and "is queued" in text(response)
    assert WhatIfRun.objects.count() == 1


def test_a_failed_what_if_says_why(pool: Any, page_as: Any, dispatched: list[int]) -> None:
    request = filed(pool)
    client = page_as("ada")
    client.post(f"/approvals/{request.pk}/what-if/", {"days": "3"})
    run = do_begin_what_if(WhatIfRun.objects.get().pk, at=timezone.now())
    assert run is not None
    do_finish_what_if(run, at=timezone.now(), error="proposed: 2 jobs never finish")
    page = text(client.get(f"/approvals/{request.pk}/"))
    assert "failed: proposed: 2 jobs never finish" in page


def test_a_budget_request_offers_no_what_if(pool: Any, page_as: Any) -> None:
    request = budget_request(pool, "50", justification="deadline", submit=True)
    page = text(page_as("ada").get(f"/approvals/{request.pk}/"))
    assert "Replay recent demand" not in page
    assert "moves no deserved share" in page
    assert "50 GPU-h" in page


def test_the_live_part_of_a_page_comes_alone_when_htmx_asks(pool: Any, page_as: Any) -> None:
    part = text(live(page_as("ada"), "/queues/?flavor=h100"))
    assert "<html" not in part and 'data-queue="nlp"' in part
    assert Decimal("4") == QueueQuota.objects.get(queue=pool.nlp_queue).guarantee


def test_a_draft_is_submitted_from_its_page_by_its_requester_only(pool: Any, page_as: Any) -> None:
    page_as("lena").post("/requests/", ask(pool) | {"save_draft": "1"})
    draft = QuotaRequest.objects.get()
    assert "Submit for approval" in text(page_as("lena").get(f"/requests/{draft.pk}/"))
    # an admin does not see another's draft (it is its requester's until submitted)
    assert page_as("ada").post(f"/requests/{draft.pk}/").status_code == 404
    draft.refresh_from_db()
    assert draft.state == "draft"
    page_as("lena").post(f"/requests/{draft.pk}/")
    draft.refresh_from_db()
    assert draft.state == "submitted"
