"""A draft is its requester's own until they submit it (DESIGN 2: ``draft -> submitted``; only
the requester changes or submits a draft): the API answers another person's draft as unknown
(404), to the admins and to the tenant's other leads alike, and lists it to nobody else; once
submitted, it is theirs to see. The admin site lists and opens it to nobody else either."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.test import Client
from domain_builders import user

from gpupool.quotas import whatif
from gpupool.quotas.actions import do_start_what_if
from gpupool.quotas.models import QuotaRequest, WhatIfRun
from gpupool.tenancy.actions import do_set_membership

URL = "/api/v1/quota-requests/"


@pytest.fixture
def co_lead(pool: Any) -> Any:
    """``lars``, a second lead of nlp."""
    lars = user("lars")
    do_set_membership(lars, pool.nlp, role="lead", acting_user=None)
    pool.users["lars"] = lars
    return lars


def listed(api_as: Any, name: str) -> list[int]:
    """The ids of the requests ``name`` is listed."""
    return [r["id"] for r in api_as(name).get(URL).json()["results"]]


def test_another_persons_draft_is_unknown_to_admins_and_to_the_other_leads(
    api_as: Any, file_request: Any, co_lead: Any
) -> None:
    # given lena's draft
    draft = file_request()
    url = f"{URL}{draft['id']}/"
    # then an admin and nlp's other lead neither list nor open it
    for name in ("ada", "lars"):
        assert draft["id"] not in listed(api_as, name)
        assert api_as(name).get(url).status_code == 404
        assert api_as(name).get(URL, {"state": "draft"}).json()["results"] == []
    # nor do the admins' routes reach it
    admin = api_as("ada")
    assert admin.get(f"{url}impact/").status_code == 404
    assert admin.post(f"{url}what-if/", {"days": 2}, format="json").status_code == 404
    assert admin.post(f"{url}approve/", {"decision_note": "x"}).status_code == 404
    assert admin.post(f"{url}reject/", {"decision_note": "x"}).status_code == 404
    assert WhatIfRun.objects.count() == 0
    assert QuotaRequest.objects.get(pk=draft["id"]).state == "draft"
    # while its requester lists and opens it
    assert listed(api_as, "lena") == [draft["id"]]
    assert api_as("lena").get(url).status_code == 200


def test_once_submitted_the_admins_and_the_tenants_leads_see_it(
    api_as: Any, file_request: Any, co_lead: Any
) -> None:
    draft = file_request()
    assert api_as("lena").post(f"{URL}{draft['id']}/submit/").status_code == 200
    for name in ("ada", "lars", "lena"):
        assert listed(api_as, name) == [draft["id"]]
        assert api_as(name).get(f"{URL}{draft['id']}/").json()["state"] == "submitted"


def test_an_admins_own_draft_is_theirs_alone(
    api_as: Any, file_request: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    dispatched: list[int] = []
    monkeypatch.setattr(whatif, "dispatch_what_if", dispatched.append)  # no replay runs
    draft = file_request(by="ada")
    assert listed(api_as, "ada") == [draft["id"]]
    assert api_as("alan").get(f"{URL}{draft['id']}/").status_code == 404
    assert api_as("lena").get(f"{URL}{draft['id']}/").status_code == 404
    # the admin may replay their own draft before submitting it
    started = api_as("ada").post(f"{URL}{draft['id']}/what-if/", {"days": 2}, format="json")
    assert started.status_code == 202 and dispatched == [started.json()["id"]]


def test_the_what_if_action_refuses_another_persons_draft_naming_state(
    pool: Any, file_request: Any
) -> None:
    draft = QuotaRequest.objects.get(pk=file_request()["id"])
    with pytest.raises(ValidationError) as refused:
        do_start_what_if(draft, acting_user=pool.users["ada"], days=2)
    assert "state" in refused.value.message_dict
    assert WhatIfRun.objects.count() == 0


def test_the_admin_site_lists_and_opens_no_other_persons_draft(
    pool: Any, file_request: Any
) -> None:
    draft = file_request()
    # an admin's, as lena's own draft for the queue is open (``open_request_refusal``)
    submitted = file_request(by="ada", submit=True)
    root = user("root-admin", admin=True)
    root.is_staff = root.is_superuser = True
    root.save()
    client = Client()
    client.force_login(root)
    listing = client.get("/admin/quotas/quotarequest/").content.decode()
    assert f"/admin/quotas/quotarequest/{submitted['id']}/change/" in listing
    assert f"/admin/quotas/quotarequest/{draft['id']}/change/" not in listing
    opened = client.get(f"/admin/quotas/quotarequest/{draft['id']}/change/")
    assert opened.status_code == 302  # Django's admin: "not found", back to the list
