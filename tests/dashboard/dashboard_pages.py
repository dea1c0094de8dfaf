"""Helpers of the dashboard's page tests."""

from __future__ import annotations

from typing import Any

from django.test import Client

# One user of the ``pool`` fixture per role.
BY_ROLE = {"admin": "ada", "finance": "fin", "lead": "lena", "member": "max"}


def live(client: Client, url: str) -> Any:
    """What htmx gets when it refreshes the page's live part."""
    return client.get(url, HTTP_HX_REQUEST="true", HTTP_HX_TARGET="live")


def text(response: Any) -> str:
    """The response's body as text."""
    return str(response.content.decode())


def rows(page: str) -> str:
    """The page's table rows (its first ``<tbody>`` on), without its forms' options."""
    return page.split("<tbody>", 1)[1] if "<tbody>" in page else ""
