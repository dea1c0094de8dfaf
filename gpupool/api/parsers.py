"""The API's JSON parser: a body nested deeper than ``MAX_DEPTH`` is a 400, not a 500.

DRF's ``JSONParser`` lets ``json.load`` raise ``RecursionError`` on a body of a few thousand
nested arrays (``[[[[...]]]]``), which Django answers as a server error, even to an anonymous
``POST tokens/``; and a body nested a few hundred levels, which parses, can still exhaust the
stack of whatever walks it next (a serializer, the error handler). No body the API takes
nests more than a handful of levels (a workload: body, ``pod_sets``, a pod set, ``env``), so
one nested deeper than ``MAX_DEPTH`` is refused as the body as a whole (``non_field_errors``),
before any serializer sees it. A body over Django's ``DATA_UPLOAD_MAX_MEMORY_SIZE`` is
refused before it is parsed (``errors.api_exception_handler``: 413).
"""

from __future__ import annotations

from typing import Any

from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

# Arrays and objects inside one another: far above any body the API takes, far below the
# depth that exhausts Python's stack.
MAX_DEPTH = 32
TOO_DEEP = f"the body nests arrays and objects more than {MAX_DEPTH} levels deep"


def nesting_depth(value: Any, limit: int = MAX_DEPTH) -> int:
    """How deep arrays and objects nest in ``value`` (a scalar: 0), counted without recursion
    and no further than ``limit + 1``."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        depth += 1
        deepest = max(deepest, depth)
        if deepest > limit:
            return deepest
        stack.extend((child, depth) for child in children)
    return deepest


class BoundedJSONParser(JSONParser):
    """DRF's JSON parser, refusing a body nested deeper than ``MAX_DEPTH`` (a 400)."""

    def parse(self, stream: Any, media_type: Any = None, parser_context: Any = None) -> Any:
        """The body's value; a ``ParseError`` for a body too deep to read."""
        try:
            data = super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise ParseError(TOO_DEEP) from None
        if nesting_depth(data) > MAX_DEPTH:
            raise ParseError(TOO_DEEP)
        return data
