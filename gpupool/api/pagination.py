"""Pagination of the API's lists, with one reading of what the client asks.

Lists are paged by number (``Pages``, the settings' default: ``?page=N&page_size=M``) or, for
logs too long to count, by cursor (``Cursors``: ``?cursor=`` from ``next`` and ``previous``).
Both read ``?page_size=`` alike (``AskedPageSize``: 100 by default, 1 to 1,000). What they
cannot read is a 400 naming the parameter, where DRF quietly answers the default size, caps
it, or answers 404 ("Invalid page.", "Invalid cursor"): ``?page_size=`` outside 1-1,000 or not
a number, ``?page=`` that is not a whole number from 1 (or ``last``), a ``?cursor=`` that is
not one the list gave. A page *past the last* stays a 404, as DRF documents it: the address
reads, and names nothing (as ``workloads/nlp/nope/`` does).
"""

from __future__ import annotations

from typing import Any

from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.pagination import CursorPagination, PageNumberPagination
from rest_framework.request import Request

DEFAULT_PAGE_SIZE = 100
MAX_PAGE_SIZE = 1000


class AskedPageSize:
    """Pagination mixin: ``?page_size=`` 1 to ``max_page_size`` (the default when not asked);
    anything else a 400 naming ``page_size``."""

    page_size: int | None = DEFAULT_PAGE_SIZE
    page_size_query_param: str | None = "page_size"
    max_page_size: int | None = MAX_PAGE_SIZE

    def get_page_size(self, request: Request) -> Any:
        """The size asked, 1 to ``max_page_size``; the default when none is asked."""
        assert self.page_size_query_param and self.max_page_size
        asked = request.query_params.get(self.page_size_query_param, "").strip()
        if not asked:
            return self.page_size
        try:
            size = int(asked)
        except ValueError:
            size = 0
        if not 1 <= size <= self.max_page_size:
            raise ValidationError(
                {self.page_size_query_param: f"a whole number from 1 to {self.max_page_size}"}
            )
        return size


class Pages(AskedPageSize, PageNumberPagination):
    """``?page=N&page_size=M``: a page that is no whole number from 1 (nor ``last``) is a 400
    naming ``page``; a page past the last is DRF's 404 ("Invalid page.")."""

    def get_page_number(self, request: Request, paginator: Any) -> Any:
        """The page asked (1 when none is), once it reads as a page number."""
        number = super().get_page_number(request, paginator)  # ("last": the last's number)
        try:
            readable = int(number) >= 1
        except (TypeError, ValueError):
            readable = False
        if not readable:
            raise ValidationError(
                {self.page_query_param: f"a whole number from 1 (or 'last'), not {number!r}"}
            )
        return number


class Cursors(AskedPageSize, CursorPagination):
    """``?cursor=`` from a page's ``next`` or ``previous`` and ``?page_size=``; a cursor the
    list did not give is a 400 naming ``cursor``."""

    def decode_cursor(self, request: Request) -> Any:
        """The cursor asked (None for the first page); one that does not read is a 400."""
        try:
            return super().decode_cursor(request)
        except NotFound:
            raise ValidationError(
                {
                    self.cursor_query_param: "not a cursor of this list: use the next or "
                    "previous link of a page (or leave it out for the first page)"
                }
            ) from None
