"""Page-number pagination with a page size the client may choose (up to a bound)."""

from typing import Any

from rest_framework.exceptions import ValidationError
from rest_framework.pagination import PageNumberPagination
from rest_framework.request import Request


class Pages(PageNumberPagination):
    """``?page=N&page_size=M`` (100 by default, at most 1,000; another size is a 400 naming
    ``page_size``, where DRF would quietly answer the default)."""

    page_size = 100
    page_size_query_param = "page_size"
    max_page_size = 1000

    def get_page_size(self, request: Request) -> Any:
        """The size asked, 1 to ``max_page_size``; the default when none is asked."""
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
