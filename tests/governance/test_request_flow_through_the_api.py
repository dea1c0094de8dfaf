"""A quota request through the API: draft, change, submit, approve (which applies) or reject;
every step audited, every party told by mail, every refusal a 400 naming its field."""

from __future__ import annotations

from typing import Any

import pytest
from django.core import mail
from domain_builders import period_fields

from gpupool.audit.models import AuditEvent
from gpupool.quotas.models import QueueQuota

pytestmark = pytest.mark.django_db

URL = "/api/v1/quota-requests/"


def steps_of(request_id: int) -> list[tuple[str, str]]:
    """The request's audit rows: (action, actor's username), oldest first."""
    rows = AuditEvent.objects.filter(
        object_type="quotas.quotarequest", object_id=str(request_id)
    ).order_by("id")
    return [
        (row.action.removeprefix("quotas.").removesuffix("_quota_request"), row.actor_name)
        for row in rows
    ]


def test_a_lead_drafts_changes_and_submits_and_an_admin_approval_applies_it(
    pool: Any, api_as: Any, file_request: Any
) -> None:
    # given a lead's draft
    draft = file_request()
    assert draft["state"] == "draft" and draft["tenant"] == "nlp"
    assert draft["requested_by"] == "lena" and mail.outbox == []
    # when she changes it and submits it
    lena = api_as("lena")
    changed = lena.patch(f"{URL}{draft['id']}/", {"justification": "two models"}, format="json")
    assert changed.status_code == 200 and changed.json()["justification"] == "two models"
    submitted = lena.post(f"{URL}{draft['id']}/submit/")
    assert submitted.status_code == 200 and submitted.json()["state"] == "submitted"
    # then both admins are told, and nobody else
    assert sorted(m.to[0] for m in mail.outbox) == ["ada@example.org", "alan@example.org"]
    assert "waits for a decision" in mail.outbox[0].subject
    assert "two models" in mail.outbox[0].body
    mail.outbox.clear()
    # when an admin approves it with a comment
    approved = api_as("ada").post(
        f"{URL}{draft['id']}/approve/", {"decision_note": "fits"}, format="json"
    )
    # then it is applied at once: the queue has the new quota
    assert approved.status_code == 200, approved.json()
    body = approved.json()
    assert (body["state"], body["decided_by"], body["decision_note"]) == ("applied", "ada", "fits")
    applied = QueueQuota.objects.get(queue=pool.nlp_queue, flavor=pool.h100)
    assert (applied.guarantee, applied.deserved, applied.capability) == (8, 12, 24)
    # and every step is audited with who took it, the quota change too
    assert steps_of(draft["id"]) == [
        ("create", "lena"),
        ("update", "lena"),
        ("submit", "lena"),
        ("approve", "ada"),
        ("apply", "ada"),
    ]
    change = AuditEvent.objects.get(action="quotas.set_queue_quota", actor=pool.users["ada"])
    assert f"quota request #{draft['id']}" in change.reason
    # and the requester (nlp's only lead) gets one mail saying it is approved and applied
    assert [m.to for m in mail.outbox] == [["lena@example.org"]]
    assert "approved and applied" in mail.outbox[0].subject
    assert "fits" in mail.outbox[0].body


def test_a_request_can_be_submitted_at_once(file_request: Any) -> None:
    request = file_request(submit=True)
    assert request["state"] == "submitted" and request["submitted_at"]
    assert len(mail.outbox) == 2


def test_a_rejection_says_why_and_tells_the_requester(api_as: Any, file_request: Any) -> None:
    request = file_request(submit=True)
    mail.outbox.clear()
    url = f"{URL}{request['id']}/reject/"
    silent = api_as("ada").post(url, {}, format="json")
    assert silent.status_code == 400
    assert "decision_note" in silent.json()["error"]["fields"]
    rejected = api_as("ada").post(url, {"decision_note": "the pool is full"}, format="json")
    assert rejected.status_code == 200 and rejected.json()["state"] == "rejected"
    assert [m.to for m in mail.outbox] == [["lena@example.org"]]
    assert "rejected" in mail.outbox[0].subject and "the pool is full" in mail.outbox[0].body
    assert steps_of(request["id"])[-1] == ("reject", "ada")


@pytest.mark.parametrize(
    ("submitted", "step", "by"),
    [
        (False, "approve", "ada"),
        (False, "reject", "ada"),
        (False, "apply", "ada"),
        (True, "submit", "lena"),
        (True, "apply", "ada"),
    ],
    ids=[
        "a draft is not approved",
        "a draft is not rejected",
        "a draft is not applied",
        "a submitted request is not submitted again",
        "a submitted request is not applied before approval",
    ],
)
def test_a_step_out_of_order_answers_400_naming_state(
    api_as: Any, file_request: Any, submitted: bool, step: str, by: str
) -> None:
    # a draft of the admin's own: another's draft is hidden from them (404)
    request = file_request(submit=submitted, by="lena" if submitted else by)
    before = steps_of(request["id"])
    # (only a decision takes a note: submit/ and apply/ take no body, and refuse one)
    body = {"decision_note": "x"} if step in ("approve", "reject") else {}
    response = api_as(by).post(f"{URL}{request['id']}/{step}/", body)
    assert response.status_code == 400
    assert "state" in response.json()["error"]["fields"]
    assert steps_of(request["id"]) == before


def test_a_decided_request_cannot_be_decided_again(api_as: Any, file_request: Any) -> None:
    request = file_request(submit=True)
    assert api_as("ada").post(f"{URL}{request['id']}/approve/").status_code == 200
    again = api_as("alan").post(f"{URL}{request['id']}/reject/", {"decision_note": "no"})
    assert again.status_code == 400 and "state" in again.json()["error"]["fields"]


def test_a_submitted_request_can_no_longer_be_changed(api_as: Any, file_request: Any) -> None:
    request = file_request(submit=True)
    response = api_as("lena").patch(f"{URL}{request['id']}/", {"justification": "more"})
    assert response.status_code == 400 and "state" in response.json()["error"]["fields"]


def test_an_admin_cannot_approve_their_own_request(
    pool: Any, api_as: Any, file_request: Any
) -> None:
    # given a request an admin filed for nlp's queue
    request = file_request(by="ada", submit=True)
    # then approving it themselves is refused naming decided_by, and it stays submitted
    own = api_as("ada").post(f"{URL}{request['id']}/approve/")
    assert own.status_code == 400 and "decided_by" in own.json()["error"]["fields"]
    assert api_as("ada").get(f"{URL}{request['id']}/").json()["state"] == "submitted"
    # while another admin may
    assert api_as("alan").post(f"{URL}{request['id']}/approve/").status_code == 200


def test_a_change_that_would_not_fit_the_pool_is_refused_naming_payload(
    pool: Any, api_as: Any, file_request: Any
) -> None:
    # the pool has 32 h100 GPUs and vision is guaranteed 4 of them
    request = file_request(payload={"guarantee": 30, "deserved": 30, "capability": 32}, submit=True)
    response = api_as("ada").post(f"{URL}{request['id']}/approve/")
    assert response.status_code == 400
    assert "pool's 32 healthy" in response.json()["error"]["fields"]["payload"][0]
    assert QueueQuota.objects.get(queue=pool.nlp_queue).guarantee == 4


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        ({"justification": ""}, "justification"),
        ({"payload": {"guarantee": 8, "deserved": 4, "capability": 24}}, "payload"),
        ({"payload": {"deserved": 4}}, "payload"),
        ({"queue": "nowhere"}, "queue"),
        ({"flavor": "tpu"}, "flavor"),
        ({"kind": "wish"}, "kind"),
        ({"period_start": "2026-12-01"}, "period_start"),
        ({"kind": "budget", "queue": None}, "tenant"),
    ],
    ids=[
        "no justification",
        "levels out of order",
        "levels missing",
        "unknown queue",
        "unknown flavor",
        "unknown kind",
        "a period on a queue quota",
        "a budget without its tenant",
    ],
)
def test_a_bad_request_answers_400_naming_the_field(
    api_as: Any, fields: dict[str, Any], named: str
) -> None:
    body = {
        "kind": "queue-quota",
        "queue": "nlp",
        "flavor": "h100",
        "payload": {"guarantee": 8, "deserved": 12, "capability": 24},
        "justification": "why",
    } | fields
    response = api_as("lena").post(URL, body, format="json")
    assert response.status_code == 400, response.json()
    assert named in response.json()["error"]["fields"], response.json()


def test_a_budget_request_goes_through_the_same_states(pool: Any, api_as: Any) -> None:
    response = api_as("lena").post(
        URL,
        {
            "kind": "budget",
            "tenant": "nlp",
            "priority_class": "high",
            **period_fields(),
            "payload": {"gpu_hours": 200},
            "justification": "deadline in December",
            "submit": True,
        },
        format="json",
    )
    assert response.status_code == 201, response.json()
    assert "200 GPU-hours more" in response.json()["summary"]
    approved = api_as("ada").post(f"{URL}{response.json()['id']}/approve/")
    assert approved.status_code == 200 and approved.json()["state"] == "applied"
    assert pool.nlp.budgets.get().gpu_hours == 200


def test_a_draft_saved_unchanged_adds_no_audit_row(api_as: Any, file_request: Any) -> None:
    draft = file_request()
    same = api_as("lena").patch(f"{URL}{draft['id']}/", {"justification": draft["justification"]})
    assert same.status_code == 200
    assert steps_of(draft["id"]) == [("create", "lena")]
