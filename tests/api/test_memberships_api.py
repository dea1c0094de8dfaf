"""Memberships through the API: a membership's user and tenant are fixed once created (a change
of either is a 400 naming it, and changes nothing), and who may manage a tenant's members is
checked before the request is, so a lead of one tenant learns nothing about another's members
(whether a user belongs to it) by trying to add or move one there."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model

from gpupool.audit.models import AuditEvent
from gpupool.tenancy.actions import do_set_membership
from gpupool.tenancy.models import Membership

pytestmark = pytest.mark.django_db

MEMBERSHIPS = "/api/v1/memberships/"


def user(username: str) -> Any:
    return get_user_model().objects.get(username=username)


def membership_of(world: Any, username: str) -> Membership:
    return Membership.objects.select_related("user", "tenant").get(user__username=username)


@pytest.mark.parametrize(
    ("change", "field"),
    [({"tenant": "vision"}, "tenant"), ({"user": "otto"}, "user")],
    ids=["tenant", "user"],
)
def test_a_patch_that_moves_a_membership_is_a_400_naming_the_field(
    api_as: Any, world: Any, change: dict[str, str], field: str
) -> None:
    max_in_nlp = membership_of(world, "max")
    events = AuditEvent.objects.count()
    response = api_as("admin").patch(
        f"{MEMBERSHIPS}{max_in_nlp.pk}/", change | {"role": "lead"}, format="json"
    )
    assert response.status_code == 400
    fields = response.json()["error"]["fields"]
    assert list(fields) == [field]
    assert "cannot be changed once created" in fields[field][0]
    max_in_nlp.refresh_from_db()
    assert (max_in_nlp.user.username, max_in_nlp.tenant.name, max_in_nlp.role) == (
        "max",
        "nlp",
        "member",
    )
    assert AuditEvent.objects.count() == events


def test_a_patch_naming_the_same_user_and_tenant_changes_the_role(api_as: Any, world: Any) -> None:
    max_in_nlp = membership_of(world, "max")
    response = api_as("lead").patch(
        f"{MEMBERSHIPS}{max_in_nlp.pk}/",
        {"user": "max", "tenant": "nlp", "role": "lead"},
        format="json",
    )
    assert response.status_code == 200, response.content
    assert response.json()["role"] == "lead"


def test_a_lead_of_another_tenant_learns_nothing_by_adding_its_member(
    api_as: Any, world: Any
) -> None:
    # otto belongs to vision, max does not: lena (nlp's lead) gets the same answer for both
    answers = [
        api_as("lead").post(
            MEMBERSHIPS, {"user": name, "tenant": "vision", "role": "member"}, format="json"
        )
        for name in ("otto", "max")
    ]
    assert [answer.status_code for answer in answers] == [403, 403]
    assert answers[0].json() == answers[1].json()
    assert not Membership.objects.filter(user__username="max", tenant__name="vision").exists()


def test_a_patch_to_another_tenant_says_nothing_of_its_members(api_as: Any, world: Any) -> None:
    # otto belongs to vision and (now) to nlp; max to nlp only. Moving either to vision is
    # refused alike: the answer does not tell which of them is in vision already.
    do_set_membership(user("otto"), world.own, role="member", acting_user=None)
    answers = [
        api_as("lead").patch(
            f"{MEMBERSHIPS}{Membership.objects.get(user__username=name, tenant=world.own).pk}/",
            {"tenant": "vision"},
            format="json",
        )
        for name in ("otto", "max")
    ]
    assert [answer.status_code for answer in answers] == [400, 400]
    assert answers[0].json() == answers[1].json()
    assert list(answers[0].json()["error"]["fields"]) == ["tenant"]


def test_a_member_is_refused_before_a_change_is_checked(api_as: Any, world: Any) -> None:
    # max (a member of nlp, not its lead) asks to move lena: refused for the role he holds
    response = api_as("member").patch(
        f"{MEMBERSHIPS}{membership_of(world, 'lena').pk}/", {"tenant": "vision"}, format="json"
    )
    assert response.status_code == 403


def test_the_tenants_lead_still_hears_that_the_user_already_belongs(
    api_as: Any, world: Any
) -> None:
    response = api_as("lead").post(
        MEMBERSHIPS, {"user": "max", "tenant": "nlp", "role": "lead"}, format="json"
    )
    assert response.status_code == 400
    assert list(response.json()["error"]["fields"]) == ["user"]
    assert membership_of(world, "max").role == "member"


def test_a_lead_adds_a_member_to_its_tenant(api_as: Any, world: Any) -> None:
    response = api_as("lead").post(
        MEMBERSHIPS, {"user": "otto", "tenant": "nlp", "role": "member"}, format="json"
    )
    assert response.status_code == 201, response.content
    assert Membership.objects.filter(user__username="otto", tenant__name="nlp").exists()


def test_an_unknown_tenant_is_the_validations_to_name(api_as: Any, world: Any) -> None:
    response = api_as("lead").post(
        MEMBERSHIPS, {"user": "otto", "tenant": "nowhere", "role": "member"}, format="json"
    )
    assert response.status_code == 400
    assert list(response.json()["error"]["fields"]) == ["tenant"]
