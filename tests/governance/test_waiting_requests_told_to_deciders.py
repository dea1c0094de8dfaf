"""The "waits for a decision" mail goes to those who can decide the request: every admin but
the one who filed it (nobody decides their own request). Where nobody can, the filer is told
so, once, when they submit it.

The pool (``conftest``): ``ada`` and ``alan`` are admins, ``lena`` leads nlp; each has an
address ``<name>@example.org``.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.core import mail
from two_teams import quota_request

from gpupool.quotas.actions import do_submit_quota_request
from gpupool.tenancy.actions import do_revoke_site_role
from gpupool.tenancy.models import SiteRole

pytestmark = pytest.mark.django_db


def file(pool: Any, by: str, *, submit: bool = True) -> Any:
    """A request of nlp's h100 quota (8 / 12 / 24), filed by ``by``."""
    return quota_request(
        pool,
        by=by,
        justification="the new model",
        submit=submit,
        guarantee=8,
        deserved=12,
        capability=24,
    )


def only_ada_is_admin(pool: Any) -> None:
    do_revoke_site_role(
        SiteRole.objects.get(user=pool.users["alan"]), acting_user=None, reason="left"
    )


def test_an_admin_s_request_waits_for_the_other_admins_only(
    pool: Any, django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        request = file(pool, "ada")
    [sent] = mail.outbox
    assert sent.to == ["alan@example.org"]
    assert sent.subject == f"[gpupool] request #{request.pk} from nlp waits for a decision"


def test_the_only_admin_is_told_once_that_nobody_can_decide_their_request(
    pool: Any, django_capture_on_commit_callbacks: Any
) -> None:
    only_ada_is_admin(pool)
    with django_capture_on_commit_callbacks(execute=True):
        draft = file(pool, "ada", submit=False)
    assert mail.outbox == []  # a draft waits for nobody
    with django_capture_on_commit_callbacks(execute=True):
        request = do_submit_quota_request(draft, acting_user=pool.users["ada"])
    [sent] = mail.outbox
    assert sent.to == ["ada@example.org"]
    assert sent.subject == f"[gpupool] request #{request.pk} waits for a decision nobody can make"
    assert "You are the only admin, and nobody decides their own request" in sent.body
    assert f"/requests/{request.pk}/" in sent.body


def test_a_lead_whose_pool_has_no_admin_is_told_nobody_can_decide(
    pool: Any, django_capture_on_commit_callbacks: Any
) -> None:
    for role in SiteRole.objects.filter(role="admin"):
        do_revoke_site_role(role, acting_user=None, reason="left")
    with django_capture_on_commit_callbacks(execute=True):
        file(pool, "lena")
    [sent] = mail.outbox
    assert sent.to == ["lena@example.org"]
    assert "The pool has no admin, so nobody can decide it" in sent.body


def test_a_lead_s_request_waits_for_every_admin(
    pool: Any, django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        file(pool, "lena")
    assert sorted(address for sent in mail.outbox for address in sent.to) == [
        "ada@example.org",
        "alan@example.org",
    ]
