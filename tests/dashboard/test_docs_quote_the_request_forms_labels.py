"""Where the docs quote a label of the request form (the request form's "Period until (not
included)"), they quote what the form says."""

from __future__ import annotations

import re
from pathlib import Path

from gpupool.dashboard.forms import QuotaRequestForm

DOCS = Path(__file__).resolve().parents[2] / "docs"


def test_the_docs_quote_the_request_forms_labels_as_the_form_says_them() -> None:
    labels = {str(field.label) for field in QuotaRequestForm.base_fields.values()}
    quoted = {
        (page.name, " ".join(found.split()))
        for page in DOCS.glob("*.md")
        for found in re.findall(r"the request form's \"([^\"]+)\"", page.read_text())
    }
    assert quoted  # docs/governance.md quotes the period's end
    assert {(name, label) for name, label in quoted if label not in labels} == set()
