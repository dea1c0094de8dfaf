"""The REST API as the client calls it: JSON over HTTP with a bearer token (standard library
only), and the API's one error shape turned into a readable message."""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gpupool.client.config import Settings

TIMEOUT_S = 30.0
PAGE_SIZE = 500  # rows a list call asks per page (the API allows up to 1,000)
MAX_ROWS = 10_000  # rows a list reads at most; past it the client says so and how to narrow


class ApiError(Exception):
    """The server refused or failed a call; the message says why, naming fields."""

    def __init__(
        self,
        status: int,
        message: str,
        fields: dict[str, list[str]] | None = None,
        body: dict[str, Any] | None = None,
    ):
        super().__init__(message)
        self.status = status
        self.fields = fields or {}
        # The API's error object as it sent it (``{"status", "code", "message", "fields"}``),
        # or one in its shape for an answer that had none (no server, no JSON): ``--json``
        # prints it.
        self.body: dict[str, Any] = body or {
            "status": status or None,
            "code": "unreachable" if status == 0 else "error",
            "message": message,
        }


def _message(status: int, body: bytes) -> ApiError:
    """The API's error body (``{"error": {...}}``) as an ApiError."""
    try:
        error = json.loads(body)["error"]
        if not isinstance(error, dict):
            raise TypeError
    except (ValueError, KeyError, TypeError):
        text = body.decode(errors="replace").strip()[:300]
        return ApiError(status, f"HTTP {status}: {text or 'no details'}")
    # The API's message, as it says it (a field whose sentence names what it is about, such
    # as ``state``, without its name: ``api.errors.SELF_NAMING_FIELDS``); ``fields`` as sent.
    message = str(error.get("message") or f"HTTP {status}")
    return ApiError(status, message, error.get("fields") or {}, error)


# The API's key for what a refusal says of the body as a whole, or of a nested object as a
# whole (``pod_sets.0.non_field_errors``): ``api.errors.NON_FIELD`` (the client has no Django:
# tests/client/test_client_refusal_of_no_field.py checks it against the server's).
NON_FIELD = "non_field_errors"


def field_lines(fields: dict[str, list[str]], label: Callable[[str], str]) -> str:
    """A refusal's messages by field as lines of "field: why", each field named by ``label``
    (a command's own words for the API's fields: the flag that sets it); what names no field
    is its sentence alone, as the API's message says it, and what a nested object is refused
    for as a whole names that object (``pod_sets.0``)."""
    lines = []
    for name, messages in fields.items():
        why = " ".join(messages)
        if name == NON_FIELD:
            lines.append(why)
        elif name.endswith(f".{NON_FIELD}"):
            lines.append(f"{label(name.removesuffix(f'.{NON_FIELD}'))}: {why}")
        else:
            lines.append(f"{label(name)}: {why}")
    return "\n".join(lines)


@dataclass(frozen=True)
class Listing:
    """The rows of a paginated list the client read, and how many the API has in all."""

    rows: list[Any]
    count: int  # the API's ``count``
    capped: bool  # more rows than ``MAX_ROWS``: the rest were not read


class Api:
    """Calls ``/api/v1/`` on one server with one token."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings

    def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        query: dict[str, Any] | None = None,
        auth: bool = True,
    ) -> Any:
        """``method`` on ``/api/v1/<path>``; the decoded JSON answer (None for no content)."""
        url = f"{self.settings.url}/api/v1/{path.lstrip('/')}"
        if query:
            url += "?" + urllib.parse.urlencode(query, doseq=True)
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(url, data=data, method=method)  # noqa: S310 - http(s) URLs the user gave
        request.add_header("Accept", "application/json")
        if data is not None:
            request.add_header("Content-Type", "application/json")
        if auth and self.settings.token:
            request.add_header("Authorization", f"Bearer {self.settings.token}")
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:  # noqa: S310
                payload = response.read()
                code = response.status
        except urllib.error.HTTPError as error:
            raise _message(error.code, error.read()) from None
        except urllib.error.URLError as error:
            raise ApiError(0, f"cannot reach {self.settings.url}: {error.reason}") from None
        try:
            return json.loads(payload) if payload else None
        except ValueError:
            text = payload.decode(errors="replace").strip()[:300]
            raise ApiError(code, f"HTTP {code}: the answer is not JSON: {text}") from None

    def every(self, path: str, query: dict[str, Any] | None = None) -> Listing:
        """Every row of a paginated list, page after page, up to ``MAX_ROWS``."""
        found: list[Any] = []
        page = 1
        while True:
            answer = self.call(
                "GET", path, query={**(query or {}), "page": page, "page_size": PAGE_SIZE}
            )
            found.extend(answer["results"])
            more = bool(answer.get("next"))
            if not more or len(found) >= MAX_ROWS:
                break
            page += 1
        count = max(int(answer.get("count", len(found))), len(found))
        capped = len(found) > MAX_ROWS or (more and len(found) >= MAX_ROWS)
        return Listing(found[:MAX_ROWS], count, capped)
