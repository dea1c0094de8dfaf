"""The REST API as the client calls it: JSON over HTTP with a bearer token (standard library
only), and the API's one error shape turned into a readable message."""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from gpupool.client.config import Settings

TIMEOUT_S = 30.0


class ApiError(Exception):
    """The server refused or failed a call; the message says why, naming fields."""

    def __init__(self, status: int, message: str, fields: dict[str, list[str]] | None = None):
        super().__init__(message)
        self.status = status
        self.fields = fields or {}


def _message(status: int, body: bytes) -> ApiError:
    """The API's error body (``{"error": {...}}``) as an ApiError."""
    try:
        error = json.loads(body)["error"]
    except (ValueError, KeyError, TypeError):
        text = body.decode(errors="replace").strip()[:300]
        return ApiError(status, f"HTTP {status}: {text or 'no details'}")
    fields = error.get("fields") or {}
    if fields:
        lines = [f"{name}: {' '.join(messages)}" for name, messages in fields.items()]
        return ApiError(status, "\n".join(lines), fields)
    return ApiError(status, str(error.get("message") or f"HTTP {status}"))


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
        except urllib.error.HTTPError as error:
            raise _message(error.code, error.read()) from None
        except urllib.error.URLError as error:
            raise ApiError(0, f"cannot reach {self.settings.url}: {error.reason}") from None
        return json.loads(payload) if payload else None

    def every(self, path: str, query: dict[str, Any] | None = None, limit: int = 1000) -> list[Any]:
        """All results of a paginated list, up to ``limit``."""
        found: list[Any] = []
        page = 1
        while len(found) < limit:
            answer = self.call("GET", path, query={**(query or {}), "page": page, "page_size": 200})
            found.extend(answer["results"])
            if not answer.get("next"):
                break
            page += 1
        return found[:limit]
