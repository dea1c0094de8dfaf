"""Every API route x method x role (x own and other tenant) answers as the matrix says.

The cases are generated from the URL conf: a route or a method without a row in
``access_matrix.ROWS`` fails ``test_every_route_and_method_has_a_row``, so a new endpoint
cannot ship without deciding who may call it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from access_matrix import ROLES, ROWS
from django.urls import URLPattern, URLResolver, get_resolver, reverse

pytestmark = pytest.mark.django_db

IGNORED_METHODS = {"HEAD", "OPTIONS", "TRACE"}
STATUS = {"forbidden": {403}, "hidden": {404}, "unauthorized": {401}}


def _walk(patterns: list[Any], namespace: str = "") -> Iterator[tuple[str, Any]]:
    for pattern in patterns:
        if isinstance(pattern, URLResolver):
            inner = f"{namespace}:{pattern.namespace}" if namespace else pattern.namespace or ""
            yield from _walk(pattern.url_patterns, inner if pattern.namespace else namespace)
        elif isinstance(pattern, URLPattern) and pattern.name:
            yield (f"{namespace}:{pattern.name}" if namespace else pattern.name), pattern.callback


def api_routes() -> dict[str, set[str]]:
    """Every named route under the ``api`` namespace with the methods it serves."""
    routes: dict[str, set[str]] = {}
    for name, callback in _walk(get_resolver().url_patterns):
        if not name.startswith("api:"):
            continue
        actions = getattr(callback, "actions", None)
        view = getattr(callback, "cls", None) or callback.view_class
        served = set(view.http_method_names)
        if actions is not None:
            methods = {method.upper() for method in actions if method in served}
        else:
            methods = {m.upper() for m in served if hasattr(view, m)}
        routes.setdefault(name, set()).update(methods - IGNORED_METHODS)
    return routes


def test_every_route_and_method_has_a_row() -> None:
    routes = api_routes()
    missing = sorted(name for name in routes if name not in ROWS)
    assert not missing, f"routes without a row in tests/api/access_matrix.py: {missing}"
    stale = sorted(name for name in ROWS if name not in routes)
    assert not stale, f"rows for routes that no longer exist: {stale}"
    for name, methods in routes.items():
        assert set(ROWS[name].methods) == methods, f"{name}: serves {sorted(methods)}"


def _cases() -> Iterator[Any]:
    for name, row in sorted(ROWS.items()):
        scopes = ("own", "other") if row.target is not None else ("-",)
        for method in sorted(row.methods):
            for role in ROLES:
                for scope in scopes:
                    case = f"{name}-{method}-{role}-{scope}"
                    yield pytest.param(name, method, role, scope, id=case)


@pytest.mark.parametrize(("route", "method", "role", "scope"), list(_cases()))
def test_the_route_answers_the_role_as_the_matrix_says(
    world: Any, api_as: Any, route: str, method: str, role: str, scope: str
) -> None:
    row = ROWS[route]
    kwargs = row.target(world)[scope] if row.target is not None else {}
    url = reverse(route, kwargs=dict(kwargs))
    # (a row's payload is its writes' body: a GET would send it as query parameters)
    body = dict(row.payload(world)) if row.payload is not None and method != "GET" else {}
    response = getattr(api_as(role), method.lower())(url, body, format="json")
    expected = row.outcome(method, role, scope)
    if expected == "ok":
        allowed = {200, 201, 204} if method == "GET" or body else {200, 201, 204, 400}
        assert response.status_code in allowed, (expected, response.status_code, response.content)
    else:
        assert response.status_code in STATUS[expected], (
            expected,
            response.status_code,
            response.content[:300],
        )
