"""Token authentication that accepts ``Authorization: Bearer <token>`` as well as DRF's
``Token <token>`` (command-line tools and curl users expect the former)."""

from __future__ import annotations

from typing import Any

from rest_framework.authentication import TokenAuthentication
from rest_framework.request import Request


class BearerTokenAuthentication(TokenAuthentication):
    """DRF's token authentication under either keyword, ``Bearer`` or ``Token``."""

    keywords = ("Bearer", "Token")

    def authenticate(self, request: Request) -> tuple[Any, Any] | None:
        """Try each keyword in turn (DRF's class reads only one)."""
        header = request.META.get("HTTP_AUTHORIZATION", "")
        for keyword in self.keywords:
            if header.split(" ", 1)[0].lower() == keyword.lower():
                self.keyword = keyword
                return super().authenticate(request)
        return None

    def authenticate_header(self, request: Request) -> str:
        """What a 401 names in ``WWW-Authenticate``."""
        return "Bearer"
