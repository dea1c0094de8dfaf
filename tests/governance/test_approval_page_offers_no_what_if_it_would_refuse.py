"""The approval page offers a what-if only of a change that could be approved: for a request
whose guarantees the tree cannot hold (its impact's ``fits`` is false; the what-if action
refuses it), neither the page nor its htmx part has the replay button; both say why instead,
with the problems the impact gives. A request that fits keeps its button.

The pool (``conftest``): 32 healthy h100 GPUs under root ``pool``; nlp and vision at 4 / 8 /
16 each.
"""

from __future__ import annotations

import html
import re
from typing import Any

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db

URL = "/api/v1/quota-requests/"
TOO_MUCH = {"guarantee": 30, "deserved": 30, "capability": 32}  # 30 + vision's 4 > 32
FITS = {"guarantee": 28, "deserved": 28, "capability": 32}


def admin_page(pool: Any) -> Client:
    page = Client()
    page.force_login(pool.users["ada"])
    return page


def what_if_part(answer: Any) -> str:
    """The page's what-if part (``#what-if``), unescaped."""
    assert answer.status_code == 200
    text = answer.content.decode()
    return html.unescape(text[text.index('<div id="what-if"') :].split("</section>")[0])


def test_a_request_that_does_not_fit_offers_no_replay_and_says_why(
    pool: Any, api_as: Any, file_request: Any
) -> None:
    # given nlp's request for a guarantee the tree cannot hold
    made = file_request(payload=TOO_MUCH, submit=True)
    problems = api_as("ada").get(f"{URL}{made['id']}/impact/").json()["problems"]
    assert problems
    page = admin_page(pool)
    # when an admin opens its page, or htmx reads its what-if part
    for answer in (
        page.get(f"/approvals/{made['id']}/"),
        page.get(f"/approvals/{made['id']}/what-if/", HTTP_HX_REQUEST="true"),
    ):
        part = what_if_part(answer)
        # then no replay is offered
        assert "Replay recent demand" not in part and 'name="days"' not in part
        # and it says why, with the impact's problems
        notice = part[part.index("data-no-what-if") :]
        assert "a what-if replays only a change that could be approved" in notice
        assert re.findall(r"<li>([^<]*)</li>", notice) == problems
        assert "nlp can hold a guarantee of at most 28 h100 GPUs" in notice


def test_a_request_that_fits_still_offers_its_replay(pool: Any, file_request: Any) -> None:
    made = file_request(payload=FITS, submit=True)
    part = what_if_part(admin_page(pool).get(f"/approvals/{made['id']}/"))
    assert "Replay recent demand" in part and 'name="days"' in part
    assert "data-no-what-if" not in part
