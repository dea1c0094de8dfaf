"""The approval's what-if form and the Cluster page's drain form name a field in their errors
by its label as the page shows it ("Days to replay", "Why"), not by the raw field ("days:",
"reason:"), as the request forms do (``forms.form_problems``, ``forms.field_label``); and a
what-if refused shows its form again with the days typed, not the default put back."""

from __future__ import annotations

import re
from typing import Any

import pytest
from dashboard_pages import text
from test_requests_and_approvals import filed

from gpupool.audit.models import AuditEvent
from gpupool.dashboard.forms import WhatIfForm
from gpupool.inventory.models import Node
from gpupool.quotas import whatif
from gpupool.quotas.models import WhatIfRun


@pytest.fixture
def dispatched(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The what-if runs handed to the background (none runs: the test drives them)."""
    runs: list[int] = []
    monkeypatch.setattr(whatif, "dispatch_what_if", runs.append)
    return runs


def days_input(page: str) -> str:
    """The what-if form's days input, as the page writes it."""
    found = re.search(r'<input id="what-if-days"[^>]*>', page)
    assert found is not None, page
    return found[0]


@pytest.mark.parametrize("typed", ["120", "0", "two"])
def test_a_refused_what_if_names_days_by_its_label_and_keeps_what_was_typed(
    pool: Any, page_as: Any, dispatched: list[int], typed: str
) -> None:
    request = filed(pool)
    response = page_as("ada").post(
        f"/approvals/{request.pk}/what-if/", {"days": typed}, HTTP_HX_REQUEST="true"
    )
    page = text(response)
    label = str(WhatIfForm.base_fields["days"].label)
    assert f"The what-if did not start: {label}: " in page
    assert "days:" not in page
    field = days_input(page)
    assert f'value="{typed}"' in field
    assert 'aria-invalid="true"' in field and 'aria-describedby="what-if-error"' in field
    assert not WhatIfRun.objects.exists() and dispatched == []


def test_a_refused_what_if_without_htmx_names_days_by_its_label(
    pool: Any, page_as: Any, dispatched: list[int]
) -> None:
    """Without htmx the approval page itself comes back (400), not a redirect to it."""
    request = filed(pool)
    response = page_as("ada").post(f"/approvals/{request.pk}/what-if/", {"days": "120"})
    assert response.status_code == 400
    page = text(response)
    assert (
        "The what-if did not start: Days to replay: Ensure this value is less than or equal "
        "to 90." in page
    )
    assert 'value="120"' in days_input(page)


def test_a_what_if_the_action_refuses_says_why_in_its_own_words(
    pool: Any, page_as: Any, dispatched: list[int]
) -> None:
    request = filed(pool)
    client = page_as("ada")
    client.post(f"/approvals/{request.pk}/what-if/", {"days": "7"})
    page = text(
        client.post(f"/approvals/{request.pk}/what-if/", {"days": "12"}, HTTP_HX_REQUEST="true")
    )
    assert "The what-if did not start: what-if #" in page and "is queued" in page
    assert "state:" not in page  # (the action's refusal of a step says its state itself)
    assert WhatIfRun.objects.count() == 1


def test_a_wrong_drain_form_names_the_reason_as_the_page_labels_it(pool: Any, page_as: Any) -> None:
    response = page_as("ada").post("/cluster/nodes/n2/drain/", {"reason": "x" * 401}, follow=True)
    page = text(response)
    assert Node.objects.get(name="n2").drain_requested_at is None
    assert not AuditEvent.objects.filter(action="inventory.drain_node").exists()
    # The page's label of the field: "Why (optional, kept in the audit log)".
    assert 'for="drain-n2">Why (optional' in text(page_as("ada").get("/cluster/"))
    assert "n2 was not drained: Why: at most 400 characters, not 401" in page
    assert "reason:" not in page
