"""A user who filed or decided a quota or budget request stays, as the request's history names
them: the admin's delete page says which requests keep the account and that it is deactivated
instead (Active off), not that the admin lacks a permission nobody has."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse
from domain_builders import flavor, queue, quota, tenant, user

from gpupool.quotas.actions import do_create_quota_request, do_reject_quota_request
from gpupool.quotas.models import QuotaRequest

pytestmark = pytest.mark.django_db


@pytest.fixture
def filed() -> dict[str, Any]:
    """lena (lead of nlp) filed two requests; rex, an admin, rejected the second."""
    lena, rex = user("lena"), user("rex", admin=True)
    nlp = tenant("nlp", lead=lena)
    h100 = flavor("h100")
    root = queue("pool")
    quota(root, h100, 0, 16, 16)
    asks = [
        do_create_quota_request(
            kind="queue-quota",
            tenant=nlp,
            requested_by=lena,
            justification="more",
            payload={"guarantee": 0, "deserved": 1, "capability": 2},
            queue=queue(name, parent=root, tenant=nlp),
            flavor=h100,
            submit=True,
        )
        for name in ("nlp", "nlp-eval")
    ]
    do_reject_quota_request(asks[1], acting_user=rex, note="not now")
    return {"lena": lena, "rex": rex, "asks": asks}


def still_there(*names: str) -> bool:
    return get_user_model().objects.filter(username__in=names).count() == len(names)


def test_the_delete_page_names_the_requests_and_says_to_deactivate(
    admin_client: Client, filed: dict[str, Any]
) -> None:
    first, second = (ask.pk for ask in filed["asks"])
    url = reverse("admin:auth_user_delete", args=[filed["lena"].pk])
    for response in (admin_client.get(url), admin_client.post(url, {"post": "yes"})):
        assert response.status_code == 200
        text = response.content.decode()
        assert f"User lena filed requests #{first} and #{second}" in text
        assert "deactivate it instead (untick Active on its page)" in text
        assert "permission to delete" not in text
    assert still_there("lena")
    assert QuotaRequest.objects.filter(requested_by=filed["lena"]).count() == 2


def test_a_user_who_decided_a_request_is_kept_too(
    admin_client: Client, filed: dict[str, Any]
) -> None:
    second = filed["asks"][1].pk
    response = admin_client.post(
        reverse("admin:auth_user_changelist"),
        {
            "action": "delete_selected",
            "_selected_action": [filed["rex"].pk, filed["lena"].pk],
            "post": "yes",
        },
    )
    assert response.status_code == 200
    text = response.content.decode()
    assert f"User rex decided request #{second}" in text
    assert "User lena filed requests" in text
    assert "permission to delete" not in text
    assert still_there("lena", "rex")


def test_a_user_without_requests_is_still_deleted(
    admin_client: Client, filed: dict[str, Any]
) -> None:
    ghost = user("ghost")
    response = admin_client.post(
        reverse("admin:auth_user_delete", args=[ghost.pk]), {"post": "yes"}
    )
    assert response.status_code == 302
    assert not get_user_model().objects.filter(username="ghost").exists()
