"""The quota change (``PUT /api/v1/queues/<name>/quotas/<flavor>/``) says in its schema what
it refuses, the whole-number rule of flavors given whole included (``exclusive``: whole GPUs;
MIG: whole instances; ``quotas.validators.whole_gpu_errors``), as its refusal says it."""

from __future__ import annotations

from typing import Any

import pytest
from drf_spectacular.generators import SchemaGenerator

QUOTA_PATH = "/api/v1/queues/{name}/quotas/{flavor}/"


@pytest.fixture(scope="module")
def schema() -> dict[str, Any]:
    generated: dict[str, Any] = SchemaGenerator().get_schema(request=None, public=True)
    return generated


def test_the_put_s_description_states_the_whole_number_rule(schema: dict[str, Any]) -> None:
    put = schema["paths"][QUOTA_PATH]["put"]
    said = " ".join(put["description"].split())
    assert "whole numbers on a flavor given whole" in said
    assert "exclusive" in said and "MIG: whole instances" in said
    assert "only ``shared`` flavors take fractions" in said


def test_the_quota_input_s_schema_states_it_too(schema: dict[str, Any]) -> None:
    put = schema["paths"][QUOTA_PATH]["put"]
    ref = put["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    component = schema["components"]["schemas"][ref.rsplit("/", 1)[1]]
    said = " ".join(component["description"].split())
    assert "every level is a whole number" in said
    assert "only ``shared`` flavors take fractions" in said
