"""The OpenAPI schema is generated without warnings, validates, and the docs are served locally."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from django.core.management import call_command

pytestmark = pytest.mark.django_db


def test_the_schema_validates_without_warnings(tmp_path: Any) -> None:
    out = tmp_path / "schema.yaml"
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(out))
    schema = yaml.safe_load(out.read_text())
    assert schema["openapi"].startswith("3.")
    assert "/api/v1/flavors/" in schema["paths"]


def test_the_docs_page_is_served_without_a_cdn(api_as: Any) -> None:
    page = api_as("member").get("/api/v1/docs/")
    assert page.status_code == 200
    html = page.content.decode()
    assert "/static/drf_spectacular_sidecar/swagger-ui-dist/" in html
    assert "cdn" not in html.lower() and "unpkg" not in html.lower()
