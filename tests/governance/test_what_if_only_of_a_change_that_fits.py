"""A what-if replays a change that could be approved: a request whose guarantees the tree
cannot hold (its impact's ``fits`` is false) starts none, through the API (400 naming
``payload``) or the approval page, with the problems its impact gives; nothing is queued.

The pool (``conftest``): 32 healthy h100 GPUs under root ``pool``; nlp and vision at 4 / 8 /
16 each.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from gpupool.audit.models import AuditEvent
from gpupool.quotas import whatif
from gpupool.quotas.models import WhatIfRun

pytestmark = pytest.mark.django_db

URL = "/api/v1/quota-requests/"
TOO_MUCH = {"guarantee": 30, "deserved": 30, "capability": 32}  # 30 + vision's 4 > 32


@pytest.fixture
def dispatched(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The runs handed to the background (none is run)."""
    runs: list[int] = []
    monkeypatch.setattr(whatif, "dispatch_what_if", runs.append)
    return runs


def test_a_request_that_does_not_fit_starts_no_what_if_and_says_why_on_payload(
    api_as: Any, file_request: Any, dispatched: list[int]
) -> None:
    # given nlp's request for a guarantee the tree cannot hold
    made = file_request(payload=TOO_MUCH, submit=True)
    admin = api_as("ada")
    impact = admin.get(f"{URL}{made['id']}/impact/").json()
    assert impact["fits"] is False and impact["problems"]
    # when an admin asks for its what-if
    response = admin.post(f"{URL}{made['id']}/what-if/", {"days": 2}, format="json")
    # then it is refused on the requested amounts, with the impact's problems
    assert response.status_code == 400, response.json()
    why = " ".join(response.json()["error"]["fields"]["payload"])
    assert why.endswith("; ".join(impact["problems"]))
    assert "nlp can hold a guarantee of at most 28 h100 GPUs" in why
    # and nothing started: no run, no audit row, nothing handed to the background
    assert dispatched == []
    assert not WhatIfRun.objects.exists()
    assert not AuditEvent.objects.filter(action="quotas.start_what_if").exists()
    assert admin.get(f"{URL}{made['id']}/what-if/").status_code == 404


def test_the_approval_page_says_why_the_what_if_did_not_start(
    pool: Any, file_request: Any, dispatched: list[int]
) -> None:
    made = file_request(payload=TOO_MUCH, submit=True)
    page = Client()
    page.force_login(pool.users["ada"])
    answer = page.post(f"/approvals/{made['id']}/what-if/", {"days": 2}, HTTP_HX_REQUEST="true")
    html = answer.content.decode()
    assert answer.status_code == 200
    # the sentence says what it is about: no field's name before it (api.errors.SELF_NAMING)
    assert (
        "The what-if did not start: a what-if replays only a change that could be approved" in html
    )
    assert "nlp can hold a guarantee of at most 28 h100 GPUs" in html
    assert dispatched == [] and not WhatIfRun.objects.exists()


def test_a_request_that_fits_still_starts_its_what_if(
    api_as: Any, file_request: Any, dispatched: list[int]
) -> None:
    made = file_request(payload={"guarantee": 28, "deserved": 28, "capability": 32}, submit=True)
    response = api_as("ada").post(f"{URL}{made['id']}/what-if/", {"days": 2}, format="json")
    assert response.status_code == 202, response.json()
    assert dispatched == [response.json()["id"]]
