"""Membership and site-role changes: validated, and each one audited with who, before, after."""

import pytest
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from domain_builders import tenant, user

from gpupool.audit.models import AuditEvent
from gpupool.tenancy.actions import (
    do_grant_site_role,
    do_remove_membership,
    do_revoke_site_role,
    do_set_membership,
)
from gpupool.tenancy.models import Membership, is_site_admin, is_tenant_lead

pytestmark = pytest.mark.django_db


def test_adding_a_member_is_audited_with_the_actor() -> None:
    # given an admin and a tenant
    admin = user("root-admin", admin=True)
    team = tenant("nlp")
    alice = user("alice")
    # when the admin adds alice as a member
    do_set_membership(alice, team, role="member", acting_user=admin)
    # then the audit log says who added whom, with no "before"
    event = AuditEvent.objects.get(action="tenancy.set_membership")
    assert event.actor == admin
    assert event.actor_name == "root-admin"
    assert event.before is None
    assert event.after is not None and event.after["role"] == "member"


def test_promoting_to_lead_records_before_and_after() -> None:
    # given alice is a member
    admin = user("root-admin", admin=True)
    alice = user("alice")
    team = tenant("nlp", members=(alice,))
    # when she is made lead
    do_set_membership(alice, team, role="lead", acting_user=admin)
    # then she leads the tenant and the change is recorded from member to lead
    assert is_tenant_lead(alice, team)
    event = AuditEvent.objects.filter(action="tenancy.set_membership").first()
    assert event is not None
    assert (event.before or {})["role"] == "member"
    assert (event.after or {})["role"] == "lead"
    assert event.changed_fields() == ["role"]


def test_an_unknown_role_is_refused_naming_the_role_field() -> None:
    alice = user("alice")
    team = tenant("nlp")
    with pytest.raises(ValidationError) as error:
        do_set_membership(alice, team, role="owner", acting_user=None)
    assert "role" in error.value.message_dict
    assert not Membership.objects.exists()


def test_the_database_refuses_a_second_membership_of_the_same_tenant() -> None:
    alice = user("alice")
    team = tenant("nlp", members=(alice,))
    with pytest.raises(IntegrityError), transaction.atomic():
        Membership.objects.create(user=alice, tenant=team, role="lead")


def test_removing_a_member_is_audited_with_the_state_before() -> None:
    admin = user("root-admin", admin=True)
    alice = user("alice")
    tenant("nlp", members=(alice,))
    do_remove_membership(Membership.objects.get(user=alice), acting_user=admin)
    assert not Membership.objects.exists()
    event = AuditEvent.objects.get(action="tenancy.remove_membership")
    assert event.after is None and (event.before or {})["role"] == "member"


def test_site_roles_are_granted_once_and_revoked_with_audit() -> None:
    admin = user("root-admin", admin=True)
    bob = user("bob")
    # when admin is granted twice
    first = do_grant_site_role(bob, role="admin", acting_user=admin)
    second = do_grant_site_role(bob, role="admin", acting_user=admin)
    # then there is one role and one audit row for it
    assert first.pk == second.pk
    assert is_site_admin(bob)
    assert (
        AuditEvent.objects.filter(action="tenancy.grant_site_role", object_id=str(first.pk)).count()
        == 1
    )
    # when it is revoked, bob is no longer an admin
    do_revoke_site_role(first, acting_user=admin)
    assert not is_site_admin(bob)
    assert AuditEvent.objects.filter(action="tenancy.revoke_site_role").count() == 1


def test_an_unknown_site_role_is_refused_naming_the_role_field() -> None:
    with pytest.raises(ValidationError) as error:
        do_grant_site_role(user("bob"), role="owner", acting_user=None)
    assert "role" in error.value.message_dict
