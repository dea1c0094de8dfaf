"""Walk-through s16: the quota request form's radio group ("What to ask for") is linked to its
error list for screen readers as the other fields are (``partials/field.html``: the error
list's id is "<auto_id>_error"): once the form is refused on it, each radio carries
``aria-invalid`` and an ``aria-describedby`` naming that list; before, neither."""

from __future__ import annotations

import re
from typing import Any

from dashboard_pages import field_errors, text


def radios(page: str) -> list[str]:
    """The form's radio inputs of ``kind``, as written."""
    return re.findall(r'<input type="radio" name="kind"[^>]*>', page)


def test_a_refused_choice_describes_each_radio_with_the_error_list(pool: Any, page_as: Any) -> None:
    fields = {"queue": pool.nlp_queue.pk, "flavor": pool.h100.pk, "justification": "more"}
    page = text(page_as("lena").post("/requests/", fields | {"kind": "everything"}))
    assert "Select a valid choice" in field_errors(page, "kind")  # id="id_kind_error"
    found = radios(page)
    assert len(found) == 2
    for radio in found:
        assert 'aria-invalid="true"' in radio
        assert 'aria-describedby="id_kind_error"' in radio


def test_a_choice_not_refused_names_no_error_list(pool: Any, page_as: Any) -> None:
    page = text(page_as("lena").get("/requests/"))
    found = radios(page)
    assert len(found) == 2
    assert not any("aria-describedby" in radio or "aria-invalid" in radio for radio in found)
