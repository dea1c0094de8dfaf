"""The requests API: a request's detail says whether an admin could approve it as things
stand (``approvable``, ``approval_refusal``: the approval's own rule), a draft is withdrawn
with DELETE by its requester, and a request that changes nothing or repeats an open one is
refused naming the field."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from domain_builders import node
from rest_framework.test import APIClient
from two_teams import CommitsEachRequest, Pool, two_teams

from gpupool.audit.models import AuditEvent
from gpupool.quotas.actions import decision_refusal
from gpupool.quotas.models import QuotaRequest

URL = "/api/v1/quota-requests/"
ASK = {
    "kind": "queue-quota",
    "queue": "nlp",
    "flavor": "h100",
    "payload": {"guarantee": 6, "deserved": 10, "capability": 16},
    "justification": "the new model needs more guaranteed GPUs",
}


class CommittingClient(CommitsEachRequest, APIClient):
    """An API client whose calls commit (``two_teams.CommitsEachRequest``)."""


@pytest.fixture
def pool(db: Any) -> Pool:
    """16 h100 GPUs shared by nlp and vision (4 / 8 / 16 each); lena leads nlp (max is a
    member), vera vision, ada is an admin, fin finance."""

    def nodes(h100: Any) -> None:
        node("n1", h100, gpus=8)
        node("n2", h100, gpus=8)

    return two_teams(nodes, ("lena", "max", "vera", "fin"), admins=("ada",))


@pytest.fixture
def as_user(pool: Pool) -> Callable[[str], APIClient]:
    """An API client logged in as one of the pool's users."""

    def make(name: str) -> APIClient:
        client = CommittingClient()
        client.force_authenticate(pool.users[name])
        return client

    return make


def test_the_detail_says_whether_an_admin_could_approve_the_request(as_user: Any) -> None:
    lena = as_user("lena")
    too_big = {"guarantee": 400, "deserved": 400, "capability": 400}
    filed = lena.post(URL, ASK | {"payload": too_big, "submit": True}, format="json")
    assert filed.status_code == 201
    assert filed.json()["approvable"] is False
    detail = lena.get(f"{URL}{filed.json()['id']}/").json()
    assert detail["approvable"] is False
    assert detail["approval_refusal"].startswith("the change would not fit: guarantee: ")
    assert "approvable" not in lena.get(URL).json()["results"][0]  # not in the list


def test_the_verdict_is_the_approval_s_own(pool: Pool, as_user: Any) -> None:
    too_big = {"guarantee": 400, "deserved": 400, "capability": 400}
    as_user("lena").post(URL, ASK | {"payload": too_big, "submit": True}, format="json")
    request = QuotaRequest.objects.get()
    refusal = decision_refusal(request, acting_user=pool.users["ada"], approve=True)
    assert refusal is not None
    detail = as_user("ada").get(f"{URL}{request.pk}/").json()
    assert detail["approval_refusal"] == " ".join(refusal.messages)
    approved = as_user("ada").post(f"{URL}{request.pk}/approve/", {}, format="json")
    assert approved.status_code == 400 and "payload" in approved.json()["error"]["fields"]


def test_a_request_that_fits_is_approvable_and_a_decided_one_has_no_verdict(
    as_user: Any,
) -> None:
    filed = as_user("lena").post(URL, ASK | {"submit": True}, format="json").json()
    assert (filed["approvable"], filed["approval_refusal"]) == (True, None)
    as_user("ada").post(f"{URL}{filed['id']}/approve/", {}, format="json")
    decided = as_user("lena").get(f"{URL}{filed['id']}/").json()
    assert (decided["state"], decided["approvable"], decided["approval_refusal"]) == (
        "applied",
        None,
        None,
    )


def test_a_draft_is_withdrawn_with_delete_by_its_requester_audited(as_user: Any) -> None:
    draft = as_user("lena").post(URL, ASK, format="json").json()
    assert as_user("ada").delete(f"{URL}{draft['id']}/").status_code == 404  # not theirs
    assert as_user("lena").delete(f"{URL}{draft['id']}/").status_code == 204
    assert not QuotaRequest.objects.exists()
    event = AuditEvent.objects.get(action="quotas.withdraw_quota_request")
    assert event.before is not None and event.before["id"] == draft["id"] and event.after is None


def test_a_submitted_request_is_not_withdrawn(as_user: Any) -> None:
    filed = as_user("lena").post(URL, ASK | {"submit": True}, format="json").json()
    refused = as_user("lena").delete(f"{URL}{filed['id']}/")
    assert refused.status_code == 400 and "state" in refused.json()["error"]["fields"]
    assert QuotaRequest.objects.filter(pk=filed["id"], state="submitted").exists()


def test_a_request_for_the_queue_s_levels_answers_400_naming_payload(as_user: Any) -> None:
    same = {"guarantee": 4, "deserved": 8, "capability": 16}
    refused = as_user("lena").post(URL, ASK | {"payload": same}, format="json")
    assert refused.status_code == 400
    assert refused.json()["error"]["fields"] == {
        "payload": [
            "these are the queue's levels already (guarantee 4, deserved 8, capability 16): "
            "ask for a change"
        ]
    }


def test_a_second_open_request_answers_400_naming_queue(as_user: Any) -> None:
    first = as_user("lena").post(URL, ASK | {"submit": True}, format="json").json()
    again = ASK | {"payload": {"guarantee": 6, "deserved": 12, "capability": 16}}
    refused = as_user("lena").post(URL, again, format="json")
    assert refused.status_code == 400
    assert refused.json()["error"]["fields"] == {
        "queue": [
            f"request #{first['id']} for this queue and flavor is open (submitted, waiting for "
            "an admin's decision): ask again once it is decided"
        ]
    }
    assert QuotaRequest.objects.count() == 1


def test_a_draft_changed_beside_an_open_request_answers_400_naming_queue(as_user: Any) -> None:
    mine = as_user("lena").post(URL, ASK, format="json").json()
    # lena's draft is hers alone: the admin neither sees it nor is held up by it
    theirs = as_user("ada").post(URL, ASK | {"submit": True}, format="json").json()
    changed = {"payload": {"guarantee": 6, "deserved": 12, "capability": 16}}
    refused = as_user("lena").patch(f"{URL}{mine['id']}/", changed, format="json")
    assert refused.status_code == 400
    assert refused.json()["error"]["fields"]["queue"][0].startswith(f"request #{theirs['id']} ")
    assert as_user("lena").post(f"{URL}{mine['id']}/submit/").status_code == 400


def test_zero_gpu_hours_answer_400_naming_payload(pool: Pool, as_user: Any) -> None:
    budget = {
        "kind": "budget",
        "tenant": "nlp",
        "priority_class": "high",
        "period_start": "2027-03-01",
        "period_end": "2027-04-01",
        "payload": {"gpu_hours": 0},
        "justification": "nothing",
    }
    refused = as_user("lena").post(URL, budget, format="json")
    assert refused.status_code == 400
    assert refused.json()["error"]["fields"] == {
        "payload": ["adding 0 GPU-hours changes nothing: ask for more"]
    }
