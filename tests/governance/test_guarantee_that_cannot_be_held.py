"""A quota request whose guarantee the tree cannot hold: its impact says plainly that it
cannot be approved as it stands, and why (the field and the guarantee the queue can hold),
instead of deserved shares scaled down to odd amounts; the requester is told so when filing.

The pool (``conftest``): 32 healthy h100 GPUs under root ``pool``; nlp and vision at 4 / 8 /
16 each. Guarantees at the top of the tree: 4 + 4 of 32.
"""

from __future__ import annotations

from typing import Any

import pytest

pytestmark = pytest.mark.django_db

URL = "/api/v1/quota-requests/"
TOO_MUCH = {"guarantee": 30, "deserved": 30, "capability": 32}


def test_the_impact_of_a_guarantee_the_pool_cannot_hold_shows_no_share_and_says_why(
    api_as: Any, file_request: Any
) -> None:
    # nlp asks for a guarantee of 30: 30 + vision's 4 = 34 of 32 GPUs
    made = file_request(payload=TOO_MUCH, submit=True)
    impact = api_as("ada").get(f"{URL}{made['id']}/impact/").json()
    assert impact["fits"] is False
    # no share scaled down as if it were approved (30 x 32 / 34 = 28.235...)
    assert impact["deserved_shares"] == []
    why = impact["deserved_shares_error"]
    assert why.startswith(f"request #{made['id']} cannot be approved as it stands")
    assert "guarantee: the top-level h100 guarantees would total 34 GPUs" in why
    # the amount that can be held: 32 less vision's 4
    assert "as the tree stands, nlp can hold a guarantee of at most 28 h100 GPUs" in why
    assert impact["problems"] == [why.split("no deserved share is shown: ", 1)[1]]


def test_the_requester_is_told_when_filing_what_guarantee_can_be_held(
    file_request: Any,
) -> None:
    made = file_request(payload=TOO_MUCH, submit=True)
    assert made["state"] == "submitted"  # filed: the pool may change before an admin decides
    assert made["approvable"] is False
    assert made["approval_refusal"].startswith("the change would not fit: guarantee: ")
    assert "nlp can hold a guarantee of at most 28 h100 GPUs" in made["approval_refusal"]


def test_a_request_that_fits_still_shows_the_shares_it_moves(
    api_as: Any, file_request: Any
) -> None:
    made = file_request(payload={"guarantee": 28, "deserved": 28, "capability": 32}, submit=True)
    impact = api_as("ada").get(f"{URL}{made['id']}/impact/").json()
    assert impact["fits"] is True and impact["deserved_shares_error"] is None
    assert {row["queue"]: row["after"] for row in impact["deserved_shares"]}["nlp"] == 28
