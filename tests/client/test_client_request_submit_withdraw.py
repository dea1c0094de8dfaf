"""A lead's own requests from the command line, as the request's page and the API have them
(``gpupool request submit|withdraw REQUEST``): a draft is submitted to the admins; withdrawn,
a draft is deleted and a submitted request is kept, withdrawn. Only the requester does
either; a step out of order, and another's request, are the server's refusal, printed with
the field it names. ``gpupool requests --tenant`` with a name that names no tenant says so."""

from __future__ import annotations

import json
from typing import Any

import pytest
from test_client_requests import QUOTA, as_user, budget, pool, run

from gpupool.quotas.models import QuotaRequest

__all__ = ["as_user", "pool"]  # the live server's fixtures, shared with the filing tests


def draft(as_user: Any, *argv: str) -> QuotaRequest:
    """lena's draft of ``argv`` (the quota request unless told)."""
    status, _, err = as_user("lena", *(argv or QUOTA), "--draft")
    assert status == 0, err
    return QuotaRequest.objects.get(state="draft")


@pytest.mark.django_db(transaction=True)
def test_a_lead_submits_her_draft_from_the_command_line(as_user: Any) -> None:
    filed = draft(as_user)
    status, out, err = as_user("lena", "request", "submit", f"#{filed.pk}")
    assert status == 0, err
    assert out == (
        f"Request #{filed.pk} is submitted to the admins: queue nlp-train h100: guarantee 2 "
        "GPUs, deserved 8 GPUs, capability 24 GPUs.\n"
    )
    filed.refresh_from_db()
    assert filed.state == "submitted" and filed.submitted_at is not None
    # submitted already: where it stands, naming state; nothing changes
    status, out, err = as_user("lena", "request", "submit", str(filed.pk))
    assert (status, out) == (1, "")
    assert err.startswith(f"gpupool: request #{filed.pk} ") and "state:" not in err


@pytest.mark.django_db(transaction=True)
def test_filing_a_draft_says_how_to_submit_it(as_user: Any) -> None:
    status, out, err = as_user("lena", *budget(), "--draft")
    assert status == 0, err
    filed = QuotaRequest.objects.get()
    assert f"submit it with `gpupool request submit {filed.pk}`" in out


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("other", ["vera", "ada"])
def test_nobody_else_submits_or_withdraws_a_draft(as_user: Any, other: str) -> None:
    filed = draft(as_user)
    for verb in ("submit", "withdraw"):
        status, out, err = as_user(other, "request", verb, str(filed.pk))
        assert (status, out) == (1, ""), err
        assert err.startswith("gpupool: ")
    filed.refresh_from_db()
    assert filed.state == "draft"


@pytest.mark.django_db(transaction=True)
def test_withdrawing_a_draft_deletes_it(as_user: Any) -> None:
    filed = draft(as_user, *budget())
    status, out, err = as_user("lena", "request", "withdraw", str(filed.pk))
    assert status == 0, err
    assert out.startswith(f"Draft #{filed.pk} is withdrawn: budget of nlp at high, ")
    assert not QuotaRequest.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_withdrawing_a_draft_with_json_prints_it_deleted(as_user: Any) -> None:
    filed = draft(as_user)
    status, out, err = as_user("lena", "--json", "request", "withdraw", str(filed.pk))
    assert status == 0, err
    printed = json.loads(out)
    assert (printed["id"], printed["kind"], printed["deleted"]) == (filed.pk, "queue-quota", True)
    assert not QuotaRequest.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_withdrawing_a_submitted_request_keeps_it_withdrawn(as_user: Any) -> None:
    status, _, err = as_user("lena", *QUOTA)
    assert status == 0, err
    filed = QuotaRequest.objects.get()
    status, out, err = as_user("vera", "request", "withdraw", str(filed.pk))
    assert (status, out) == (1, "")  # vision's lead: not hers to see
    status, out, err = as_user("lena", "request", "withdraw", str(filed.pk))
    assert status == 0, err
    assert out.startswith(f"Request #{filed.pk} is withdrawn: queue nlp-train h100")
    assert "no admin will decide it" in out
    filed.refresh_from_db()
    assert filed.state == "withdrawn" and filed.withdrawn_at is not None
    status, out, err = as_user("lena", "--json", "request", "withdraw", str(filed.pk))
    assert (status, out) == (1, "")
    assert "state" in json.loads(err)["error"]["fields"]
    status, out, err = as_user("lena", "requests", "--state", "withdrawn")
    assert status == 0 and f"#{filed.pk}" in out and "withdrawn" in out


@pytest.mark.django_db(transaction=True)
def test_requests_of_an_unknown_tenant_is_an_error_naming_it(as_user: Any) -> None:
    assert as_user("lena", *QUOTA)[0] == 0
    status, out, err = as_user("lena", "requests", "--tenant", "nosuch")
    assert (status, out) == (1, "")
    assert err == "gpupool: tenant: No tenant named nosuch.\n"
    status, out, err = as_user("fin", "--json", "requests", "--tenant", "nosuch")
    assert (status, out) == (1, "")
    assert json.loads(err)["error"]["fields"] == {"tenant": ["No tenant named nosuch."]}
    # a team that exists and asked nothing: no requests, as before
    status, out, err = as_user("fin", "requests", "--tenant", "vision")
    assert (status, out) == (0, "No requests.\n"), err


@pytest.mark.parametrize("verb", ["submit", "withdraw"])
def test_a_request_number_that_is_none_is_a_usage_error(
    verb: str, nowhere: None, capsys: Any
) -> None:
    for argv in (("request", verb, "twelve"), ("request", verb)):
        status, out, err = run(*argv)
        assert status == 2 and out == ""
        assert "REQUEST" in err + capsys.readouterr().err
