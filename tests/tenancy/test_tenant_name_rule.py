"""A tenant's name follows the rule of a Kubernetes namespace's name (a tenant usually owns the
namespace of its name): 1 to 63 lowercase letters, digits and '-', starting and ending with a
letter or digit. A name that breaks it is refused wherever a tenant is created (the action, so
the seeds and the shell; the API; the admin site), naming ``name``, and nothing is written. A
tenant stored before the rule keeps its name, can still be edited, and is named by the system
check ``tenancy.W001``; nothing renames it."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse
from domain_builders import tenant, user
from rest_framework.test import APIClient

from gpupool.audit.models import AuditEvent
from gpupool.tenancy.actions import do_save_tenant
from gpupool.tenancy.checks import check_tenant_names
from gpupool.tenancy.models import Tenant

pytestmark = pytest.mark.django_db

BAD_NAMES = [
    pytest.param("Team_A", id="capitals and an underscore (a slug)"),
    pytest.param("nlp_eval", id="an underscore"),
    pytest.param("NLP", id="capitals"),
    pytest.param("-nlp", id="a leading dash"),
    pytest.param("nlp-", id="a trailing dash"),
    pytest.param("nlp.eval", id="a dot"),
    pytest.param("n" * 64, id="longer than 63"),
    pytest.param("nlp\n", id="a trailing newline"),
]
RULE = "1 to 63 lowercase letters, digits and '-'"


@pytest.fixture
def admin_api() -> APIClient:
    """An API client signed in as a site admin."""
    client = APIClient()
    client.force_authenticate(user("ada", admin=True))
    return client


@pytest.mark.parametrize("name", BAD_NAMES)
def test_the_action_refuses_a_bad_name_naming_the_field(name: str) -> None:
    with pytest.raises(ValidationError) as refused:
        do_save_tenant(Tenant(name=name, organization="org"), namespaces=[], acting_user=None)
    assert RULE in " ".join(refused.value.message_dict["name"])
    assert not Tenant.objects.exists()
    assert not AuditEvent.objects.exists()


@pytest.mark.parametrize("name", ["nlp", "vision-2", "7up", "n" * 63])
def test_names_that_keep_the_rule_are_accepted(name: str) -> None:
    assert do_save_tenant(Tenant(name=name), acting_user=None).name == name


# The API and the admin's forms trim surrounding whitespace from every text field first (DRF's
# and Django's way), so a trailing newline reaches only the action.
TYPED_BAD_NAMES = BAD_NAMES[:-1]


@pytest.mark.parametrize("name", TYPED_BAD_NAMES)
def test_the_api_refuses_a_bad_name_with_a_400_naming_the_field(
    name: str, admin_api: APIClient
) -> None:
    answer = admin_api.post("/api/v1/tenants/", {"name": name, "namespaces": []}, format="json")
    assert answer.status_code == 400, answer.content
    fields = answer.json()["error"]["fields"]
    assert list(fields) == ["name"]
    assert not Tenant.objects.filter(name=name).exists()


@pytest.mark.parametrize("name", ["Team_A", "nlp_eval"])
def test_the_admin_refuses_a_bad_name_on_the_field(name: str, submit_admin_form: Any) -> None:
    response = submit_admin_form(reverse("admin:tenancy_tenant_add"), {"name": name})
    assert response.status_code == 200  # the form again, not a redirect
    errors = response.context["adminform"].form.errors
    assert RULE in errors["name"][0]
    assert not Tenant.objects.exists()


def test_a_namespace_with_a_trailing_newline_is_refused() -> None:
    with pytest.raises(ValidationError) as refused:
        do_save_tenant(Tenant(name="nlp"), namespaces=["nlp\n"], acting_user=None)
    assert "Kubernetes namespace name" in refused.value.message_dict["namespaces"][0]
    assert not Tenant.objects.exists()


@pytest.fixture
def legacy() -> Tenant:
    """A tenant stored under a slug the rule now refuses (as one made before the rule)."""
    made = tenant("legacy")
    Tenant.objects.filter(pk=made.pk).update(name="Team_A")
    made.refresh_from_db()
    return made


def test_a_tenant_stored_before_the_rule_is_named_by_the_system_check(legacy: Tenant) -> None:
    tenant("nlp")
    warnings = check_tenant_names(databases=["default"])
    assert [warning.id for warning in warnings] == ["tenancy.W001"]
    assert "Team_A" in warnings[0].msg and "nlp" not in warnings[0].msg.split(": ")[-1]
    # the check is a database check: without databases it looks at none
    assert check_tenant_names(databases=None) == []


def test_the_system_check_is_silent_when_every_name_keeps_the_rule() -> None:
    tenant("nlp")
    assert check_tenant_names(databases=["default"]) == []


def test_a_tenant_stored_before_the_rule_keeps_its_name_and_can_be_edited(
    legacy: Tenant, admin_api: APIClient, submit_admin_form: Any
) -> None:
    # the action
    legacy.display_name = "Team A"
    do_save_tenant(legacy, acting_user=None)
    # the API, with its own name in the body
    answer = admin_api.patch(
        "/api/v1/tenants/Team_A/", {"name": "Team_A", "organization": "lab"}, format="json"
    )
    assert answer.status_code == 200, answer.content
    # the admin site (the name is shown, not offered)
    response = submit_admin_form(
        reverse("admin:tenancy_tenant_change", args=[legacy.pk]), {"display_name": "A"}
    )
    assert response.status_code == 302
    legacy.refresh_from_db()
    assert (legacy.name, legacy.organization, legacy.display_name) == ("Team_A", "lab", "A")


def test_a_tenant_stored_before_the_rule_is_not_renamed_to_a_bad_name(
    legacy: Tenant, admin_api: APIClient
) -> None:
    answer = admin_api.patch("/api/v1/tenants/Team_A/", {"name": "Team_B"}, format="json")
    assert answer.status_code == 400
    assert list(answer.json()["error"]["fields"]) == ["name"]
    legacy.refresh_from_db()
    assert legacy.name == "Team_A"
