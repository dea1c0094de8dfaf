"""Walk-through s16, the API: a submitted request is withdrawn with ``POST
quota-requests/<id>/withdraw/`` by its requester (kept, ``withdrawn``, ``withdrawn_at``
stamped); ``DELETE`` still deletes a draft and tells a submitted request's requester where
withdrawing it is; a withdrawn request is filtered by its state and not decided."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from domain_builders import node
from rest_framework.test import APIClient
from two_teams import CommitsEachRequest, Pool, two_teams

from gpupool.quotas.models import QuotaRequest

URL = "/api/v1/quota-requests/"
ASK = {
    "kind": "queue-quota",
    "queue": "nlp",
    "flavor": "h100",
    "payload": {"guarantee": 6, "deserved": 10, "capability": 16},
    "justification": "filed by mistake",
}


class CommittingClient(CommitsEachRequest, APIClient):
    """An API client whose calls commit (``two_teams.CommitsEachRequest``)."""


@pytest.fixture
def as_user(db: Any) -> Callable[[str], APIClient]:
    """16 h100 GPUs shared by nlp and vision; lena leads nlp, ada is an admin."""

    def nodes(h100: Any) -> None:
        node("n1", h100, gpus=8)
        node("n2", h100, gpus=8)

    pool: Pool = two_teams(nodes, ("lena", "max", "vera", "fin"), admins=("ada",))

    def make(name: str) -> APIClient:
        client = CommittingClient()
        client.force_authenticate(pool.users[name])
        return client

    return make


def test_the_requester_withdraws_a_submitted_request_which_stays_withdrawn(as_user: Any) -> None:
    filed = as_user("lena").post(URL, ASK | {"submit": True}, format="json").json()
    assert as_user("ada").post(f"{URL}{filed['id']}/withdraw/").status_code == 403
    answer = as_user("lena").post(f"{URL}{filed['id']}/withdraw/")
    assert answer.status_code == 200, answer.content
    assert answer.json()["state"] == "withdrawn" and answer.json()["withdrawn_at"]
    listed = as_user("ada").get(URL, {"state": "withdrawn"}).json()["results"]
    assert [row["id"] for row in listed] == [filed["id"]]
    refused = as_user("ada").post(f"{URL}{filed['id']}/reject/", {"decision_note": "no"})
    assert refused.status_code == 400
    (why,) = refused.json()["error"]["fields"]["state"]
    assert why.startswith(f"request #{filed['id']} was withdrawn by its requester")
    again = as_user("lena").post(URL, ASK | {"submit": True}, format="json")
    assert again.status_code == 201  # no longer open: the target may be asked for again


def test_delete_still_deletes_a_draft_and_points_a_submitted_request_to_withdraw(
    as_user: Any,
) -> None:
    lena = as_user("lena")
    filed = lena.post(URL, ASK | {"submit": True}, format="json").json()
    refused = lena.delete(f"{URL}{filed['id']}/")
    assert refused.status_code == 400
    (why,) = refused.json()["error"]["fields"]["state"]
    assert f"POST quota-requests/{filed['id']}/withdraw/" in why
    assert QuotaRequest.objects.get(pk=filed["id"]).state == "submitted"
    lena.post(f"{URL}{filed['id']}/withdraw/")
    draft = lena.post(URL, ASK, format="json").json()
    not_here = lena.post(f"{URL}{draft['id']}/withdraw/")
    assert not_here.status_code == 400
    assert "withdraw it with DELETE" in not_here.json()["error"]["fields"]["state"][0]
    assert lena.delete(f"{URL}{draft['id']}/").status_code == 204
    assert not QuotaRequest.objects.filter(pk=draft["id"]).exists()
