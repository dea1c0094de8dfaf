"""The OpenAPI schema's one addition to drf-spectacular's: the errors every operation may answer.

drf-spectacular documents the answers a view declares (200, 201, 204); the refusals come from
the API's shared machinery instead, so they are documented here, once, for every operation, in
the one shape ``errors.py`` gives them (``ErrorSerializer``):

- **400** for any write (a request body, or a refusal of the action's rules) and for any read
  that takes query parameters (a filter, ``ordering`` or ``page_size`` it cannot read);
- **401** and **403** wherever a caller must be logged in and hold a role (``ActionRoles``);
- **404** wherever the path names an object, or the list is paged (a page past the last).

A view that declares one of these codes itself keeps its own.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.openapi import AutoSchema
from drf_spectacular.utils import OpenApiResponse
from rest_framework.permissions import AllowAny

from gpupool.api.errors import ErrorSerializer

WHY = {
    "400": "The request cannot be read or breaks a rule; `fields` names what failed.",
    "401": "Not logged in: no token, or an unknown one.",
    "403": "Logged in, but the caller's role does not allow this.",
    "404": "No such object, or one the caller may not see (another tenant's); or no such page.",
}


def error_codes(method: str, operation: dict[str, Any], guarded: bool) -> list[str]:
    """The error statuses an operation may answer (see the module's doc)."""
    parameters = operation.get("parameters", [])
    codes = []
    if method != "GET" or any(each.get("in") == "query" for each in parameters):
        codes.append("400")
    if guarded:
        codes += ["401", "403"]
    paged = any(each.get("in") == "query" and each.get("name") == "page" for each in parameters)
    if paged or any(each.get("in") == "path" for each in parameters):
        codes.append("404")
    return codes


class ApiSchema(AutoSchema):
    """drf-spectacular's schema of an operation, with its error answers documented."""

    def get_operation(
        self, path: str, path_regex: str, path_prefix: str, method: str, registry: Any
    ) -> dict[str, Any] | None:
        """The operation, its responses completed by the errors it may answer."""
        operation = super().get_operation(path, path_regex, path_prefix, method, registry)
        if operation is None:
            return None
        guarded = any(
            not issubclass(permission, AllowAny)
            for permission in getattr(self.view, "permission_classes", ())
        )
        responses = operation.setdefault("responses", {})
        for code in error_codes(self.method, operation, guarded):
            if code not in responses:
                responses[code] = self._get_response_for_code(  # type: ignore[no-untyped-call]
                    OpenApiResponse(ErrorSerializer, description=WHY[code]),
                    code,
                    media_types=["application/json"],
                )
        return operation
