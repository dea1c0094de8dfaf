"""Where a real answer holds a null the OpenAPI schema does not allow.

``nulls_off_schema(body, schema, components)`` walks a JSON body along the schema of its
answer and names (``$.results.0.decided_by``) every null found at a place the schema
declares non-nullable: a client generated from the schema would reject that answer. Only
nulls are judged; the rest of the shape is schemathesis's (``test_schemathesis.py``).
"""

from __future__ import annotations

from typing import Any

Schema = dict[str, Any]


def resolve(schema: Schema, components: Schema) -> Schema:
    """``schema`` with a ``$ref`` followed (``#/components/schemas/Name``)."""
    while "$ref" in schema:
        schema = components[schema["$ref"].rsplit("/", 1)[-1]]
    return schema


def accepts_null(schema: Schema, components: Schema) -> bool:
    """Whether ``schema`` allows a null: ``nullable``, an enum holding null, a branch of
    ``oneOf``/``anyOf`` that does, or no constraint at all (free-form)."""
    wrapper = schema
    schema = resolve(schema, components)
    if wrapper.get("nullable") or schema.get("nullable"):
        return True
    if None in schema.get("enum", ()):
        return True
    branches = schema.get("oneOf", []) + schema.get("anyOf", [])
    if any(accepts_null(branch, components) for branch in branches):
        return True
    constraining = ("type", "$ref", "allOf", "oneOf", "anyOf", "enum", "properties")
    return not any(key in schema for key in constraining)


def _members(schema: Schema, components: Schema) -> list[Schema]:
    """``schema`` and every schema it combines (``allOf``, ``oneOf``, ``anyOf``), resolved."""
    schema = resolve(schema, components)
    found = [schema]
    for key in ("allOf", "oneOf", "anyOf"):
        for branch in schema.get(key, []):
            found += _members(branch, components)
    return found


def nulls_off_schema(value: Any, schema: Schema, components: Schema, at: str = "$") -> list[str]:
    """The paths in ``value`` holding a null where ``schema`` does not allow one."""
    if value is None:
        return [] if accepts_null(schema, components) else [at]
    found: list[str] = []
    members = _members(schema, components)
    if isinstance(value, dict):
        for key, item in value.items():
            for member in members:
                inner = member.get("properties", {}).get(key)
                if inner is None and isinstance(member.get("additionalProperties"), dict):
                    inner = member["additionalProperties"]
                if inner is not None:
                    found += nulls_off_schema(item, inner, components, f"{at}.{key}")
                    break
    elif isinstance(value, list):
        for member in members:
            if "items" in member:
                for index, item in enumerate(value):
                    found += nulls_off_schema(item, member["items"], components, f"{at}.{index}")
                break
    return found


def answer_schema(schema: Schema, path: str, method: str, status: int) -> Schema:
    """The JSON schema of the answer ``status`` to ``method`` on ``path`` (a templated path
    of the schema, ``/api/v1/budgets/{id}/ledger/``)."""
    responses = schema["paths"][path][method.lower()]["responses"]
    return responses[str(status)]["content"]["application/json"]["schema"]
