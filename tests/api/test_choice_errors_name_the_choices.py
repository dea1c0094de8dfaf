"""A value outside a choice field's choices is refused naming the values the field takes, in
a query (``reports/usage/?period=``) and in a body (a membership's ``role``) alike, as a
choice filter's refusal does (``?state=bogus``): one rule for every choice field
(``gpupool.api.fields.NamedChoiceField``), nothing written."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework import serializers

from gpupool.accounting.reports import PERIODS
from gpupool.tenancy.choices import MembershipRole
from gpupool.tenancy.models import Membership

pytestmark = pytest.mark.django_db


def refusal(answer: Any, field: str) -> str:
    assert answer.status_code == 400, answer.content
    [said] = answer.json()["error"]["fields"][field]
    return str(said)


def test_a_report_period_outside_its_choices_names_them(api_as: Any, world: Any) -> None:
    said = refusal(api_as("admin").get("/api/v1/reports/usage/?period=week"), "period")
    assert said == f'"week" is not a valid choice: one of {", ".join(PERIODS)}.'


def test_a_membership_role_outside_its_choices_names_them_and_adds_no_one(
    api_as: Any, world: Any
) -> None:
    before = Membership.objects.count()
    answer = api_as("admin").post(
        "/api/v1/memberships/", {"user": "otto", "tenant": "nlp", "role": "owner"}, format="json"
    )
    said = refusal(answer, "role")
    assert said == f'"owner" is not a valid choice: one of {", ".join(MembershipRole.values)}.'
    assert Membership.objects.count() == before


def test_a_field_with_its_own_refusal_keeps_it() -> None:
    field = serializers.ChoiceField(choices=["a"], error_messages={"invalid_choice": "no {input}"})
    with pytest.raises(serializers.ValidationError) as refused:
        field.run_validation("b")
    assert refused.value.detail == ["no b"]
