"""A bulk delete on the admin site that an action refuses part-way ends there: the batch is
rolled back whole and the page says why (it went on deleting in the doomed transaction, and
the next query failed: a 500)."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse
from domain_builders import tenant, user

from gpupool.audit.models import AuditEvent
from gpupool.tenancy.models import Membership

pytestmark = pytest.mark.django_db


def test_bulk_deleting_two_last_lead_memberships_is_refused_whole(admin_client: Client) -> None:
    alice, bob, dora, carol = user("alice"), user("bob"), user("dora"), user("carol")
    tenant("nlp", lead=alice, members=(bob,))
    tenant("vision", lead=dora, members=(carol,))
    leads = Membership.objects.filter(role="lead").order_by("pk")
    assert leads.count() == 2
    response = admin_client.post(
        reverse("admin:tenancy_membership_changelist"),
        {
            "action": "delete_selected",
            "_selected_action": [m.pk for m in leads],
            "post": "yes",
        },
        follow=True,
    )
    assert response.status_code == 200
    text = response.content.decode()
    assert "Not saved:" in text
    assert "lead" in text
    assert Membership.objects.count() == 4  # nothing removed, the refusal rolled back all
    assert not AuditEvent.objects.filter(action="tenancy.remove_membership").exists()
