"""A lead sees and files requests of the tenants they lead, and nothing of another tenant's:
another tenant's request is a 404, its queue an unknown name, its budget a 403."""

from __future__ import annotations

from typing import Any

import pytest

pytestmark = pytest.mark.django_db

URL = "/api/v1/quota-requests/"


def test_a_lead_of_another_tenant_neither_lists_nor_reads_your_request(
    api_as: Any, file_request: Any
) -> None:
    ours = file_request(submit=True)
    theirs = file_request(by="vera", queue="vision")
    listed = api_as("vera").get(URL).json()["results"]
    assert [r["id"] for r in listed] == [theirs["id"]]
    assert api_as("vera").get(f"{URL}{ours['id']}/").status_code == 404
    assert api_as("vera").post(f"{URL}{ours['id']}/submit/").status_code == 404


def test_a_lead_of_another_tenant_cannot_file_for_your_queue(api_as: Any) -> None:
    body = {
        "kind": "queue-quota",
        "queue": "nlp",
        "flavor": "h100",
        "payload": {"guarantee": 1, "deserved": 1, "capability": 1},
        "justification": "theirs looks idle",
    }
    response = api_as("vera").post(URL, body, format="json")
    assert response.status_code == 400
    assert "queue" in response.json()["error"]["fields"]


def test_a_lead_of_another_tenant_cannot_ask_for_your_budget(api_as: Any) -> None:
    body = {
        "kind": "budget",
        "tenant": "nlp",
        "priority_class": "high",
        "period_start": "2026-12-01",
        "period_end": "2027-01-01",
        "payload": {"gpu_hours": 10},
        "justification": "for them",
    }
    assert api_as("vera").post(URL, body, format="json").status_code == 403


def test_a_member_sees_no_requests_and_files_none(api_as: Any, file_request: Any) -> None:
    file_request()
    assert api_as("max").get(URL).status_code == 403
    assert api_as("max").post(URL, {}, format="json").status_code == 403


def test_an_admin_sees_every_tenant_s_requests(api_as: Any, file_request: Any) -> None:
    file_request(submit=True)
    file_request(by="vera", queue="vision", submit=True)
    tenants = [r["tenant"] for r in api_as("ada").get(URL).json()["results"]]
    assert sorted(tenants) == ["nlp", "vision"]


def test_requests_are_filtered_by_state_and_tenant(api_as: Any, file_request: Any) -> None:
    draft = file_request()
    # an admin's, as lena's own draft for the queue is open (``open_request_refusal``)
    submitted = file_request(by="ada", submit=True)
    file_request(by="vera", queue="vision", submit=True)
    admin = api_as("ada")
    waiting = admin.get(URL, {"state": "submitted", "tenant": "nlp"}).json()["results"]
    assert [r["id"] for r in waiting] == [submitted["id"]]
    drafts = api_as("lena").get(URL, {"state": "draft"}).json()["results"]
    assert [r["id"] for r in drafts] == [draft["id"]]
