"""State changes the API itself makes: issuing a user's API token (audited, key not recorded)."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from rest_framework.authtoken.models import Token

from gpupool.audit.actions import record_audit_event


@transaction.atomic
def do_issue_token(user: Any, *, rotate: bool = False) -> Token:
    """The user's API token; ``rotate`` replaces an existing one (the old key stops working)."""
    token = Token.objects.filter(user=user).first()
    if token is not None and not rotate:
        return token
    if token is not None:
        token.delete()
    token = Token.objects.create(user=user)
    record_audit_event(
        acting_user=user,
        action="api.issue_token",
        instance=user,
        before={"token": "set" if rotate else "none"},
        after={"token": "issued"},
        reason="rotated" if rotate else "",
    )
    return token
