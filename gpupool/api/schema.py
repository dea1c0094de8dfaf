"""The OpenAPI schema's one addition to drf-spectacular's: the errors every operation may answer.

drf-spectacular documents the answers a view declares (200, 201, 204); the refusals come from
the API's shared machinery instead, so they are documented here, once, for every operation, in
the one shape ``errors.py`` gives them (``ErrorSerializer``):

- **400** for any write (a request body, or a refusal of the action's rules) and for any read
  that takes query parameters (a filter, ``ordering``, ``page``, ``page_size`` or ``cursor``
  it cannot read) or refuses those it does not take (every read an ``ActionRoles`` view
  answers: ``parameters.py``);
- **401** and **403** wherever a caller must be logged in and hold a role (``ActionRoles``);
- **404** wherever the path names an object, or the list is paged by number (a page past
  the last);
- **406** everywhere: a ``?format=`` (or ``Accept``) the operation does not answer in
  (``negotiation.py``);
- **409** where the view says its action plans the pool (``plans_the_pool``: the actions
  that ask the decision core, which answer 409 when the pool cannot be planned);
- **413** for a write whose body is larger than the API reads (``DATA_UPLOAD_MAX_MEMORY_SIZE``);
- **415** for a write whose body is in a type the API does not read;
- **429** where the view is throttled (``throttle_classes``: ``POST tokens/``).

A view that declares one of these codes itself keeps its own. Every read documents the
``format`` query parameter it takes (``format_parameter``): drf-spectacular documents it only
where a view offers more than one format (the CSV lists), while every read takes it
(``parameters.py`` lists it in its refusals).
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.openapi import AutoSchema
from drf_spectacular.utils import OpenApiResponse
from rest_framework.permissions import AllowAny
from rest_framework.renderers import BrowsableAPIRenderer
from rest_framework.settings import api_settings

from gpupool.api.errors import ErrorSerializer
from gpupool.api.permissions import ActionRoles

WHY = {
    "400": "The request cannot be read or breaks a rule, or names a query parameter the "
    "operation does not take; `fields` names what failed.",
    "401": "Not logged in: no token, or an unknown one.",
    "403": "Logged in, but the caller's role does not allow this.",
    "404": "No such object, or one the caller may not see (another tenant's); or no such page.",
    "406": "The format asked (`?format=` or `Accept`) is not one this operation answers in; "
    "the message names those it does.",
    "409": "The pool cannot be planned now (e.g. no default priority class).",
    "413": "The body is larger than the API reads; the message says how large it may be.",
    "415": "The body is in a type the API does not read (send application/json).",
    "429": "Too many requests from this client; `Retry-After` says when to try again.",
}
WRITES = frozenset({"POST", "PUT", "PATCH"})


def error_codes(
    method: str,
    operation: dict[str, Any],
    guarded: bool,
    *,
    plans: bool = False,
    throttled: bool = False,
    strict_query: bool = False,
) -> list[str]:
    """The error statuses an operation may answer (see the module's doc): ``guarded`` when a
    caller needs a role, ``plans`` when it plans the pool, ``throttled`` when it is,
    ``strict_query`` when a read refuses a query parameter it does not take."""
    parameters = operation.get("parameters", [])
    codes = []
    if method != "GET" or strict_query or any(each.get("in") == "query" for each in parameters):
        codes.append("400")
    if guarded:
        codes += ["401", "403"]
    paged = any(each.get("in") == "query" and each.get("name") == "page" for each in parameters)
    if paged or any(each.get("in") == "path" for each in parameters):
        codes.append("404")
    codes.append("406")
    if plans:
        codes.append("409")
    if method in WRITES:
        codes += ["413", "415"]
    if throttled:
        codes.append("429")
    return codes


def plans_the_pool(view: Any) -> bool:
    """Whether the view's action asks the decision core about the pool now (its view names
    the actions in ``plans_the_pool``), and so answers 409 when the pool cannot be planned."""
    return getattr(view, "action", None) in getattr(view, "plans_the_pool", ())


def format_parameter(view: Any) -> dict[str, Any] | None:
    """The ``format`` query parameter of a read: the formats its renderers answer in (the
    browsable API's HTML left out, as drf-spectacular leaves it out)."""
    name = api_settings.URL_FORMAT_OVERRIDE
    if not name:
        return None
    formats = [
        renderer.format
        for renderer in view.get_renderers()
        if not isinstance(renderer, BrowsableAPIRenderer)
    ]
    return {
        "in": "query",
        "name": name,
        "schema": {"type": "string", "enum": sorted(set(formats))},
        "description": "The answer's format; any other is a 406 naming those offered.",
    }


class ApiSchema(AutoSchema):
    """drf-spectacular's schema of an operation, with its error answers documented."""

    def get_operation(
        self, path: str, path_regex: str, path_prefix: str, method: str, registry: Any
    ) -> dict[str, Any] | None:
        """The operation, its responses completed by the errors it may answer."""
        operation = super().get_operation(path, path_regex, path_prefix, method, registry)
        if operation is None:
            return None
        if self.method == "GET":
            parameters = operation.setdefault("parameters", [])
            given = {(each.get("in"), each.get("name")) for each in parameters}
            format_ = format_parameter(self.view)
            if format_ is not None and ("query", format_["name"]) not in given:
                parameters.append(format_)
        permissions = getattr(self.view, "permission_classes", ())
        guarded = any(not issubclass(permission, AllowAny) for permission in permissions)
        responses = operation.setdefault("responses", {})
        codes = error_codes(
            self.method,
            operation,
            guarded,
            plans=plans_the_pool(self.view),
            throttled=bool(getattr(self.view, "throttle_classes", ())),
            # (the check of a read's query parameters is ActionRoles')
            strict_query=any(issubclass(permission, ActionRoles) for permission in permissions),
        )
        for code in codes:
            if code not in responses:
                responses[code] = self._get_response_for_code(  # type: ignore[no-untyped-call]
                    OpenApiResponse(ErrorSerializer, description=WHY[code]),
                    code,
                    media_types=["application/json"],
                )
        return operation
