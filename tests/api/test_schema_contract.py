"""The OpenAPI schema says what the API answers: a field that can be null is ``nullable`` (a
request's ``decided_by`` before it is decided was declared a string), and every operation
documents the errors it may answer, in the one shape ``gpupool/api/errors.py`` gives them."""

from __future__ import annotations

import re
from typing import Any

import jsonschema
import pytest
from django.db import models
from drf_spectacular.generators import SchemaGenerator
from resources_pool import pool
from rest_framework import serializers
from schema_nulls import answer_schema, nulls_off_schema

from gpupool.quotas.actions import do_create_quota_request

pytestmark = pytest.mark.django_db

ERROR = {"$ref": "#/components/schemas/Error"}


@pytest.fixture
def generated(db: Any) -> tuple[Any, dict[str, Any]]:
    """The generator (its registry knows each component's serializer) and the schema."""
    generator = SchemaGenerator()
    return generator, generator.get_schema(request=None, public=True)


@pytest.fixture
def schema(generated: tuple[Any, dict[str, Any]]) -> dict[str, Any]:
    return generated[1]


def fill(path: str, row: dict[str, Any]) -> str | None:
    """``path`` with its parameters taken from a row of its list (None: a row lacks one)."""
    names = re.findall(r"{(\w+)}", path)
    if not all(name in row for name in names):
        return None
    for name in names:
        path = path.replace(f"{{{name}}}", str(row[name]))
    return path


def test_every_null_in_a_real_answer_is_nullable_in_the_schema(
    api_as: Any, world: Any, schema: dict[str, Any]
) -> None:
    """Every list of the API, and every object read through the first row of its list, as an
    admin on a pool with an object of each kind and a request not yet decided."""
    made = pool(world)
    do_create_quota_request(
        kind="queue-quota",
        tenant=world.own,
        requested_by=world.users["lead"],
        justification="more",
        payload={"guarantee": 0, "deserved": 8, "capability": 24},
        queue=made["nlp"],
        flavor=made["h100"],
        submit=True,
    )
    admin, components = api_as("admin"), schema["components"]["schemas"]
    first_rows: dict[str, dict[str, Any]] = {}
    off: list[str] = []
    read: list[str] = []
    gets = [path for path, operations in schema["paths"].items() if "get" in operations]
    for path in sorted(gets, key=lambda p: "{" in p):  # the lists first
        url = path if "{" not in path else fill(path, first_rows.get(path.split("{")[0], {}))
        if url is None:
            continue
        response = admin.get(url)
        if response.status_code != 200 or "json" not in response["Content-Type"]:
            continue
        body = response.json()
        rows = body.get("results", body) if isinstance(body, dict) else body
        if isinstance(rows, list) and rows and isinstance(rows[0], dict):
            first_rows[path] = rows[0]
        read.append(path)
        off += [
            f"{path} {where}"
            for where in nulls_off_schema(body, answer_schema(schema, path, "GET", 200), components)
        ]
    assert "/api/v1/quota-requests/{id}/" in read
    assert off == []


def _model_field(model: type[models.Model], source_attrs: list[str]) -> models.Field | None:
    """The model field a serializer field's source reaches (through forward relations), if
    every step of it is one; None for a property, a method or a reverse relation."""
    field = None
    for attr in source_attrs:
        try:
            field = model._meta.get_field(attr)
        except Exception:
            return None
        if field.auto_created and not field.concrete:
            return None  # a reverse relation: a list, never null
        if field.null:
            return field
        if not field.is_relation:
            continue
        model = field.related_model
    return field if field is not None and field.null else None


def test_a_field_read_from_a_nullable_column_is_nullable_in_the_schema(
    generated: tuple[Any, dict[str, Any]],
) -> None:
    """Every model serializer of the schema: a field whose source passes through a column
    that may be null (``decided_by``, ``decided_at``, ...) is ``nullable: true``."""
    generator, schema = generated
    components = schema["components"]["schemas"]
    declared_non_null = []
    for (name, kind), component in generator.registry._components.items():
        serializer = component.object
        if kind != "schemas" or not isinstance(serializer, serializers.ModelSerializer):
            continue
        model = serializer.Meta.model
        properties = components.get(name, {}).get("properties", {})
        for field_name, field in serializer.fields.items():
            if field.write_only or field_name not in properties or field.source == "*":
                continue
            if _model_field(model, field.source_attrs) is None:
                continue
            if not properties[field_name].get("nullable"):
                declared_non_null.append(f"{name}.{field_name}")
    assert declared_non_null == []


def test_a_write_endpoint_documents_400_with_the_error_shape(schema: dict[str, Any]) -> None:
    responses = schema["paths"]["/api/v1/memberships/"]["post"]["responses"]
    assert responses["400"]["content"]["application/json"]["schema"] == ERROR
    body = schema["components"]["schemas"]["ErrorBody"]
    assert set(body["properties"]) == {"status", "code", "message", "fields"}
    assert set(body["required"]) == {"status", "code", "message"}


def test_every_operation_documents_the_errors_it_may_answer(schema: dict[str, Any]) -> None:
    missing = []
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            parameters = operation.get("parameters", [])
            expected = {"401", "403"} if path != "/api/v1/tokens/" else {"401"}
            if method != "get" or any(p["in"] == "query" for p in parameters):
                expected.add("400")
            if "{" in path:
                expected.add("404")
            responses = operation["responses"]
            for code in sorted(expected):
                content = responses.get(code, {}).get("content", {})
                if content.get("application/json", {}).get("schema") != ERROR:
                    missing.append(f"{method.upper()} {path} {code}")
    assert missing == []


@pytest.mark.parametrize(
    ("role", "method", "url", "data", "status"),
    [
        ("admin", "post", "/api/v1/memberships/", {"user": "nobody"}, 400),
        ("anonymous", "get", "/api/v1/memberships/", None, 401),
        ("member", "post", "/api/v1/tenants/", {"name": "new"}, 403),
        ("member", "get", "/api/v1/memberships/999999/", None, 404),
        ("admin", "get", "/api/v1/budgets/?ordering=nothing", None, 400),
    ],
)
def test_real_error_answers_have_the_documented_shape(
    api_as: Any, schema: dict[str, Any], role: str, method: str, url: str, data: Any, status: int
) -> None:
    response = getattr(api_as(role), method)(url, data, format="json")
    assert response.status_code == status
    jsonschema.validate(response.json(), ERROR | {"components": schema["components"]})
