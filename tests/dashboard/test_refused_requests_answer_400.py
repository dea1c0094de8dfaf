"""A request the Requests page refuses (a field out of range, levels out of order, a kind it
cannot file) and a draft's change its edit page refuses are the page again answered 400, with
what was typed kept and the refusal beside its field, as the dashboard's other refused forms
are; they answered 200, as if they had gone through. A form shown (GET) answers 200."""

from __future__ import annotations

from typing import Any

from dashboard_pages import text
from test_requests_and_approvals import ask
from two_teams import quota_request

from gpupool.quotas.models import QuotaRequest


def test_a_request_with_a_level_out_of_range_is_refused_with_400_keeping_what_was_typed(
    pool: Any, page_as: Any
) -> None:
    client = page_as("lena")
    assert client.get("/requests/").status_code == 200
    response = client.post(
        "/requests/", ask(pool, capability="-3", justification="the launch week")
    )
    assert response.status_code == 400
    page = text(response)
    assert "Ensure this value is greater than or equal to 0." in page
    assert "the launch week</textarea>" in page
    assert 'name="capability" value="-3"' in page
    assert not QuotaRequest.objects.exists()


def test_a_budget_request_without_its_class_is_refused_with_400(pool: Any, page_as: Any) -> None:
    response = page_as("lena").post(
        "/requests/",
        {
            "kind": "budget",
            "tenant": pool.nlp.pk,
            "period_start": "2026-12-01",
            "period_end": "2026-12-31",
            "gpu_hours": "200",
            "justification": "launch",
        },
    )
    assert response.status_code == 400
    assert response.context["form"].errors["priority_class"]
    assert 'name="gpu_hours" value="200"' in text(response)
    assert not QuotaRequest.objects.exists()


def test_a_drafts_change_refused_is_its_edit_page_again_with_400(pool: Any, page_as: Any) -> None:
    draft = quota_request(pool)
    client = page_as("lena")
    assert client.get(f"/requests/{draft.pk}/edit/").status_code == 200
    response = client.post(f"/requests/{draft.pk}/edit/", ask(pool, guarantee="12", deserved="10"))
    assert response.status_code == 400
    page = text(response)
    assert "Guarantee (12) must not exceed Deserved (10)" in page
    assert 'name="guarantee" value="12"' in page
    draft.refresh_from_db()
    assert draft.payload == {"guarantee": "6", "deserved": "10", "capability": "16"}
