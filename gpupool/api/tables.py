"""Tables as CSV, the one way every ``?format=csv`` of the API answers (the reports and the
usage intervals, utilisation, preemptions, workloads, budgets): RFC 4180 text (``csv`` module
defaults, CRLF line ends) in UTF-8, typed ``text/csv; charset=utf-8`` whether rendered or
streamed (``CSV_CONTENT_TYPE``), under a header of the columns, downloaded as a file. A cell
holding a list or an object (a preemption's ``nodes`` and ``drains``) is its JSON text, as the
JSON answer has it (``csv_cell``); a boolean stays as every CSV writes one (``True``/``False``),
and None is empty. An error
answers the same fields as JSON's ``{"error": {...}}`` (``errors.py``) as one row, so a script
reading the CSV sees why."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from itertools import islice
from typing import Any

from django.http import StreamingHttpResponse
from rest_framework import renderers
from rest_framework.request import Request
from rest_framework.utils.encoders import JSONEncoder

# Rows a streamed CSV reads and renders at a time: one query and one serializer per batch.
CSV_BATCH = 2000

# The error body's fields a CSV row carries (``fields`` is in ``message`` already: "since: ...").
ERROR_COLUMNS = ("status", "code", "message")

# Every CSV answer's type, rendered (``CSVRenderer``) or streamed (``CSVExport``) alike.
CSV_MEDIA_TYPE = "text/csv"
CSV_CHARSET = "utf-8"
CSV_CONTENT_TYPE = f"{CSV_MEDIA_TYPE}; charset={CSV_CHARSET}"


def csv_cell(value: Any) -> Any:
    """``value`` as a CSV cell: None (or missing) empty, a list or an object its JSON text (in
    the JSON answer's order, written by DRF's encoder as the JSON answer is), anything else as
    the ``csv`` module writes it."""
    if value is None:
        return ""
    if isinstance(value, list | tuple | Mapping):
        return json.dumps(value, cls=JSONEncoder, ensure_ascii=False)
    return value


def csv_lines(columns: Sequence[str], rows: Any) -> Iterator[str]:
    """The CSV text of ``rows`` (mappings; each value a cell: ``csv_cell``) under a header of
    ``columns``, a line at a time (a streamed answer sends each as it is made)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(columns)
    yield buffer.getvalue()
    for row in rows:
        buffer.seek(0)
        buffer.truncate()
        writer.writerow([csv_cell(row.get(c)) for c in columns])
        yield buffer.getvalue()


def attachment(name: str) -> str:
    """The ``Content-Disposition`` of a CSV download named ``name``."""
    return f'attachment; filename="{name}.csv"'


class CSVRenderer(renderers.BaseRenderer):
    """``?format=csv``: a list of rows under the view's ``csv_fields`` (else the first row's
    keys), as a download named by the view's ``csv_name``; an error body as one row of
    ``ERROR_COLUMNS``; any other mapping as one row of its keys."""

    media_type = CSV_MEDIA_TYPE
    format = "csv"
    charset = CSV_CHARSET  # DRF adds it to the answer's type: CSV_CONTENT_TYPE

    def render(
        self,
        data: Any,
        accepted_media_type: str | None = None,
        renderer_context: Mapping[str, Any] | None = None,
    ) -> bytes:
        """``data`` as CSV text."""
        context = renderer_context or {}
        view = context.get("view")
        response = context.get("response")
        columns: Sequence[str]
        if isinstance(data, Mapping) and isinstance(data.get("error"), Mapping):
            columns, rows = ERROR_COLUMNS, [data["error"]]
        else:
            rows = [data] if isinstance(data, Mapping) else list(data or [])
            columns = getattr(view, "csv_fields", ()) or (list(rows[0]) if rows else [])
            if response is not None and not response.has_header("Content-Disposition"):
                response["Content-Disposition"] = attachment(getattr(view, "csv_name", "table"))
        return "".join(csv_lines(columns, rows)).encode(self.charset)


class CSVExport:
    """Viewset mixin: ``?format=csv`` answers every row of the list (filtered and scoped as
    its JSON pages are) as a streamed download of the serializer's fields; JSON stays paged.
    A viewset whose list is not a queryset (a report) builds its rows and calls
    ``csv_response`` itself."""

    renderer_classes: Sequence[type[renderers.BaseRenderer]] = (
        renderers.JSONRenderer,
        renderers.BrowsableAPIRenderer,
        CSVRenderer,
    )
    csv_name = "table"
    request: Any
    get_serializer: Any
    get_serializer_class: Any
    filter_queryset: Any
    get_queryset: Any

    def get_renderers(self) -> list[renderers.BaseRenderer]:
        """CSV for the list only: a detail, a submission or an action's answer is no table
        (asked as CSV: a 406 naming the formats it answers)."""
        offered: list[renderers.BaseRenderer] = super().get_renderers()  # type: ignore[misc]
        if getattr(self, "action", "list") == "list":
            return offered
        return [renderer for renderer in offered if not isinstance(renderer, CSVRenderer)]

    def wants_csv(self) -> bool:
        """Whether the client asked for CSV."""
        renderer = getattr(self.request, "accepted_renderer", None)
        return getattr(renderer, "format", None) == "csv"

    def csv_response(self, columns: Sequence[str], rows: Iterable[Mapping[str, Any]]) -> Any:
        """Every row as a CSV attachment, streamed."""
        response = StreamingHttpResponse(csv_lines(columns, rows), content_type=CSV_CONTENT_TYPE)
        response["Content-Disposition"] = attachment(self.csv_name)
        return response

    def list(self, request: Request, *args: Any, **kwargs: Any) -> Any:
        """The JSON page (the viewset's own list), or with ``?format=csv`` every row."""
        if not self.wants_csv():
            return super().list(request, *args, **kwargs)  # type: ignore[misc]
        rows = self.filter_queryset(self.get_queryset())
        columns = list(self.get_serializer().fields)
        return self.csv_response(columns, self._rendered(rows.iterator(chunk_size=CSV_BATCH)))

    def _rendered(self, rows: Iterator[Any]) -> Iterator[Mapping[str, Any]]:
        """The rows as the serializer renders a page of them, a batch at a time."""
        while batch := list(islice(rows, CSV_BATCH)):
            yield from self.get_serializer(batch, many=True).data
