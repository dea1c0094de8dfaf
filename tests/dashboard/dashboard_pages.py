"""Helpers of the dashboard's page tests."""

from __future__ import annotations

from typing import Any

from django.test import Client

# One user of the ``pool`` fixture per role.
BY_ROLE = {"admin": "ada", "finance": "fin", "lead": "lena", "member": "max"}

# The submit form as max fills it for nlp: one 4-GPU h100 pod for two hours (a test changes
# what it needs with ``SUBMIT_FORM | {...}``).
SUBMIT_FORM = {
    "name": "train",
    "queue": "nlp",
    "priority_class": "",
    "flavor": "h100",
    "pods": "1",
    "gpus_per_pod": "4",
    "topology": "",
    "expected_hours": "2",
    "image": "python:3.12",
}


def live(client: Client, url: str) -> Any:
    """What htmx gets when it refreshes the page's live part."""
    return client.get(url, HTTP_HX_REQUEST="true", HTTP_HX_TARGET="live")


def text(response: Any) -> str:
    """The response's body as text."""
    return str(response.content.decode())


def rows(page: str) -> str:
    """The page's table rows (its first ``<tbody>`` on), without its forms' options."""
    return page.split("<tbody>", 1)[1] if "<tbody>" in page else ""


def field_errors(page: str, name: str) -> str:
    """The error list rendered beside a form's field ``name`` ("" when it has none)."""
    marker = f'id="id_{name}_error"'
    return page.split(marker, 1)[1].split("</ul>", 1)[0] if marker in page else ""


def form_errors(page: str) -> str:
    """A form's general errors ("" when it has none)."""
    marker = '<div class="form-errors" role="alert">'
    return page.split(marker, 1)[1].split("</div>", 1)[0] if marker in page else ""
