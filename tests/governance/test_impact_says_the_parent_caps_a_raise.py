"""A raise of a queue's deserved quota that its parent's deserved quota cannot hold is not
refused (only guarantees must fit their parent's: ``quotas.models.guarantee_room``), but
the impact says the parent absorbs it, and what the queue's deserved share would really be
(``quotas.shares.capped_by_parent``), instead of a bare "fits" and "No queue's deserved share
changes" (walk finding 10: nlp gb200 deserved 18 -> 20 under research's 36, vision 18)."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from domain_builders import quota

pytestmark = pytest.mark.django_db

URL = "/api/v1/quota-requests/"


@pytest.fixture
def parent_is_full(pool: Any) -> Any:
    """The parent ``pool`` queue holds 16 / 16 / 16 of the 32 h100 GPUs; nlp and vision,
    each 8 / 8 / 16 inside it, deserve all 16 of it between them."""
    quota(pool.root, pool.h100, 16, 16, 16)
    quota(pool.nlp_queue, pool.h100, 8, 8, 16)
    quota(pool.vision_queue, pool.h100, 8, 8, 16)
    return pool


def test_a_raise_the_parent_absorbs_fits_with_a_note_of_the_real_share(
    parent_is_full: Any, api_as: Any, file_request: Any
) -> None:
    # given nlp asks for deserved 10 (children's deserved 18 > the parent's 16)
    request = file_request(payload={"guarantee": 8, "deserved": 10, "capability": 16}, submit=True)
    # when an admin reads its impact
    impact = api_as("ada").get(f"{URL}{request['id']}/impact/").json()
    # then it fits (nothing refuses it) and moves no share: the guarantees fill the parent
    assert impact["fits"] is True and impact["deserved_shares"] == []
    # and a note says the parent caps it, and nlp's deserved share stays 8, not 10
    (note,) = impact["notes"]
    assert "capped by its parent pool" in note
    assert "would total 18, more than pool's deserved 16" in note
    assert "nlp's deserved share would be 8, not 10" in note
    # and the approval page says the same beside "No queue's deserved share changes"
    admin = Client()
    admin.force_login(parent_is_full.users["ada"])
    page = admin.get(f"/approvals/{request['id']}/").content.decode().replace("&#x27;", "'")
    assert "No queue's deserved share changes" in page
    assert "nlp's deserved share would be 8, not 10" in page


def test_a_raise_within_the_parents_deserved_has_no_note(
    pool: Any, api_as: Any, file_request: Any
) -> None:
    request = file_request(payload={"guarantee": 8, "deserved": 20, "capability": 24}, submit=True)
    impact = api_as("ada").get(f"{URL}{request['id']}/impact/").json()
    assert impact["fits"] is True and impact["notes"] == []
