"""A quota request whose levels are out of order twice (guarantee 10 above deserved 5, deserved
above capability 3) is refused with both, at once, naming ``payload`` and the levels by their
keys; it said only the first, and the second on the next try."""

from __future__ import annotations

from typing import Any

import pytest

from gpupool.quotas.models import QuotaRequest

pytestmark = pytest.mark.django_db


def test_both_levels_out_of_order_are_refused_at_once(file_request: Any, api_as: Any) -> None:
    body = {
        "kind": "queue-quota",
        "queue": "nlp",
        "flavor": "h100",
        "payload": {"guarantee": 10, "deserved": 5, "capability": 3},
        "justification": "more",
    }
    response = api_as("lena").post("/api/v1/quota-requests/", body, format="json")
    assert response.status_code == 400, response.json()
    said = (
        "guarantee (10) must not exceed deserved (5); deserved (5) must not exceed capability (3)"
    )
    assert response.json()["error"]["fields"] == {"payload": [said]}
    assert not QuotaRequest.objects.exists()
