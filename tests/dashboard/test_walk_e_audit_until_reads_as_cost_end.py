"""Walk-through E: the Audit page's last day filter says its day is counted as the Cost page's
does ("End (included)") and as a budget's period reads ("... (included)"): "Until
(included)". It read "Until (inclusive)", the one place the product said it so."""

from __future__ import annotations

from typing import Any

from dashboard_pages import text


def test_the_audit_pages_last_day_reads_included_as_the_cost_pages_end(
    pool: Any, page_as: Any
) -> None:
    audit = text(page_as("ada").get("/audit/"))
    cost = text(page_as("ada").get("/cost/"))
    assert 'for="id_until">Until (included)</label>' in audit
    assert "End (included)" in cost
    assert "inclusive" not in audit
