"""Page-number pagination with a page size the client may choose (up to a bound)."""

from rest_framework.pagination import PageNumberPagination


class Pages(PageNumberPagination):
    """``?page=N&page_size=M`` (100 by default, at most 1,000)."""

    page_size = 100
    page_size_query_param = "page_size"
    max_page_size = 1000
