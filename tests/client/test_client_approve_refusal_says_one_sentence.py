"""``gpupool approve`` of a change that would not fit printed "gpupool: payload: the change
would not fit: guarantee: ...", the field's name in front of a sentence that says what it is
about, while the request's page and the approval's Approve button said "the change would not
fit: ..." and the Approvals page "Not decided: requested amounts: the change would not fit:
...". The API's message, the CLI and the page now say the one sentence (the refusal's code,
``api.errors.SELF_NAMING``); the API's ``fields`` keep ``payload``. So does deciding one's
own request ("nobody approves their own request", keyed ``decided_by``)."""

from __future__ import annotations

import html
import json
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from test_client_requests import QUOTA, as_user, pool  # noqa: F401 (fixtures)

from gpupool.quotas.models import QueueQuota, QuotaRequest

pytestmark = pytest.mark.django_db(transaction=True)

# nlp-train and vision-train each ask a guarantee of 10 of the pool's 16 h100 GPUs.
TEN = (*QUOTA[:6], "--guarantee", "10", "--deserved", "10", "--capability", "16", *QUOTA[12:])


@pytest.fixture
def too_big(as_user: Any) -> QuotaRequest:  # noqa: F811 (the fixture imported above)
    """nlp-train's request for a guarantee of 10, once vision-train's 10 is applied: 20 of
    16 GPUs would not fit."""
    assert as_user("lena", *TEN)[0] == 0
    assert as_user("vera", "request", "quota", "--queue", "vision-train", *TEN[4:])[0] == 0
    vision = QuotaRequest.objects.get(queue__name="vision-train")
    assert as_user("ada", "approve", str(vision.pk))[0] == 0
    return QuotaRequest.objects.get(queue__name="nlp-train")


def test_approving_a_change_that_would_not_fit_says_one_sentence_everywhere(
    as_user: Any,  # noqa: F811
    too_big: QuotaRequest,
) -> None:
    # the request's own verdict, as its page and the approval's Approve button give it
    page = Client()
    page.force_login(get_user_model().objects.get(username="ada"))
    detail = page.get(f"/api/v1/quota-requests/{too_big.pk}/").json()
    sentence = detail["approval_refusal"]
    assert sentence.startswith("the change would not fit: guarantee: the top-level h100 ")
    # the CLI: that sentence, no field's name before it
    status, out, err = as_user("ada", "approve", str(too_big.pk))
    assert (status, out) == (1, "")
    assert err == f"gpupool: {sentence}\n"
    # the API: its message is the sentence, its fields keep the key
    status, _, err = as_user("ada", "--json", "approve", str(too_big.pk))
    error = json.loads(err)["error"]
    assert error["message"] == sentence
    assert error["fields"] == {"payload": [sentence]}
    # the Approvals page, approving anyway: the same sentence, not "requested amounts: ..."
    answer = html.unescape(
        page.post(
            f"/approvals/{too_big.pk}/", {"decision": "approve", "decision_note": "ok"}
        ).content.decode()
    )
    assert f"Not decided: {sentence}</p>" in answer
    assert "requested amounts: the change" not in answer
    too_big.refresh_from_db()
    assert too_big.state == "submitted"
    assert QueueQuota.objects.get(queue__name="nlp-train").guarantee == 0


def test_approving_ones_own_request_says_why_without_the_fields_name(
    as_user: Any,  # noqa: F811
) -> None:
    assert as_user("ada", *QUOTA)[0] == 0  # an admin files one for nlp-train
    own = QuotaRequest.objects.get()
    status, out, err = as_user("ada", "approve", str(own.pk))
    assert (status, out) == (1, "")
    assert err == "gpupool: nobody approves their own request\n"
    status, _, err = as_user("ada", "--json", "approve", str(own.pk))
    assert json.loads(err)["error"]["fields"] == {
        "decided_by": ["nobody approves their own request"]
    }
