"""On the tenant's admin page a membership row's user is fixed once the row exists, as the
API and the membership's own admin page hold it: choosing another user on an existing row
created a membership for that user through ``do_set_membership`` and left the old one in
place. Its role still changes in place, and a new row still chooses its user."""

from typing import Any

import pytest
from django.urls import reverse
from domain_builders import tenant, user

from gpupool.tenancy.models import Membership

pytestmark = pytest.mark.django_db


def members(team: Any) -> list[tuple[str, str]]:
    return sorted(Membership.objects.filter(tenant=team).values_list("user__username", "role"))


def test_changing_the_user_of_an_existing_row_changes_no_membership(
    submit_admin_form: Any,
) -> None:
    alice, bob = user("alice"), user("bob")
    team = tenant("nlp", members=(alice,))
    url = reverse("admin:tenancy_tenant_change", args=[team.pk])
    response = submit_admin_form(url, {"memberships-0-user": bob.pk, "memberships-0-role": "lead"})
    assert response.status_code == 302, response.content.decode()
    assert members(team) == [("alice", "lead")]  # not bob's, beside alice's


def test_an_existing_rows_user_is_shown_read_only_and_a_new_row_chooses_one(
    admin_client: Any, submit_admin_form: Any
) -> None:
    alice, bob = user("alice"), user("bob")
    team = tenant("nlp", members=(alice,))
    url = reverse("admin:tenancy_tenant_change", args=[team.pk])
    formset = next(
        inline.formset
        for inline in admin_client.get(url).context["inline_admin_formsets"]
        if inline.formset.model is Membership
    )
    [existing] = formset.forms
    assert existing.fields["user"].disabled
    assert not formset.empty_form.fields["user"].disabled
    assert str(existing["user"]) == '<div class="readonly">alice</div>'  # nothing to choose
    response = submit_admin_form(
        url,
        {
            "memberships-TOTAL_FORMS": "2",
            "memberships-1-user": bob.pk,
            "memberships-1-role": "member",
        },
    )
    assert response.status_code == 302, response.content.decode()
    assert members(team) == [("alice", "member"), ("bob", "member")]
