"""The API's CSV downloads read back as rows, beside the JSON pages they must equal."""

from __future__ import annotations

import csv
import io
from typing import Any


def downloaded(client: Any, url: str, name: str | None = None) -> list[dict[str, str]]:
    """``url`` with ``format=csv``: a 200 CSV attachment (named ``name``.csv when given), as
    rows."""
    answer = client.get(url + ("&" if "?" in url else "?") + "format=csv")
    assert answer.status_code == 200, answer.content
    assert answer["Content-Type"].startswith("text/csv")
    assert "attachment" in answer["Content-Disposition"]
    if name is not None:
        assert answer["Content-Disposition"] == f'attachment; filename="{name}.csv"'
    text = b"".join(answer.streaming_content).decode()
    return list(csv.DictReader(io.StringIO(text)))


def json_pages(client: Any, url: str) -> list[dict[str, Any]]:
    """Every row of a JSON list, following its ``next`` pages."""
    rows: list[dict[str, Any]] = []
    page: str | None = url
    while page:
        answer = client.get(page)
        assert answer.status_code == 200, answer.content
        rows += answer.json()["results"]
        page = answer.json()["next"]
    return rows


def as_csv_text(rows: list[dict[str, Any]]) -> list[dict[str, str]]:
    """JSON rows with each value as the CSV writes it (None empty)."""
    return [{k: "" if v is None else str(v) for k, v in row.items()} for row in rows]


def paged_as_csv(client: Any, url: str) -> list[dict[str, str]]:
    """Every JSON row of ``url`` in pages of two (more pages than a test has rows), as the
    CSV writes them."""
    return as_csv_text(json_pages(client, url + ("&" if "?" in url else "?") + "page_size=2"))
