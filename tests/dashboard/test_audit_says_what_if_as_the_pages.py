"""The audit log names a what-if replay's run as the approval page and its action do,
"what-if run", in its rows and its Object type filter; it read "what if run", the model's
class name split into words."""

from __future__ import annotations

from typing import Any

import pytest
from dashboard_pages import text
from test_requests_and_approvals import filed

from gpupool.audit.words import object_kind
from gpupool.quotas import whatif


@pytest.fixture
def dispatched(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The what-if runs handed to the background (none runs here)."""
    runs: list[int] = []
    monkeypatch.setattr(whatif, "dispatch_what_if", runs.append)
    return runs


def test_a_what_if_run_is_a_what_if_run_on_the_audit_page(
    pool: Any, page_as: Any, dispatched: list[int]
) -> None:
    request = filed(pool)
    client = page_as("ada")
    assert client.post(f"/approvals/{request.pk}/what-if/", {"days": "7"}).status_code == 302
    page = text(client.get("/audit/"))
    assert "what-if run #" in page
    assert '<option value="quotas.whatifrun">what-if run</option>' in page
    assert "what if run" not in page
    assert object_kind("quotas.whatifrun") == "what-if run"
