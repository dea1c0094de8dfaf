"""A text past its field's length is refused in the product's words, naming the field: "at
most 400 characters, not 401" (``text_limits.TOO_LONG``), not Django's or DRF's ("Ensure this
field has no more than 400 characters."), for declared fields, a model's own check (a
request's justification) and a list's items alike."""

from __future__ import annotations

from typing import Any

import pytest
from resources_pool import pool

from gpupool.quotas.models import JUSTIFICATION_MAX_LENGTH
from gpupool.text_limits import too_long
from gpupool.workloads.models import MAX_ARGUMENT_LENGTH

pytestmark = pytest.mark.django_db

WORKLOAD = {
    "name": "bert",
    "queue": "nlp-train",
    "pod_sets": [{"count": 1, "gpus": 1, "flavor": "h100", "image": "pytorch"}],
}
REQUEST = {
    "kind": "queue-quota",
    "queue": "nlp-train",
    "flavor": "h100",
    "payload": {"guarantee": 0, "deserved": 10, "capability": 16},
    "justification": "the new model needs more",
}


def pod_set(**changes: Any) -> dict[str, Any]:
    """The workload's body with its one pod set changed."""
    return {**WORKLOAD, "pod_sets": [{**WORKLOAD["pod_sets"][0], **changes}]}


# (who sends it, where, a body with a text one character too long, the field named, its limit)
CASES = {
    "a cancel's reason": (
        "lead",
        "/api/v1/workloads/nlp/train-1/cancel/",
        {"reason": "x" * 401},
        "reason",
        400,
    ),
    "a quota's reason": (
        "admin",
        "/api/v1/queues/nlp-train/quotas/h100/",
        {"guarantee": 0, "deserved": 8, "capability": 16, "reason": "x" * 401},
        "reason",
        400,
    ),
    "a cordon's reason": (
        "admin",
        "/api/v1/nodes/n1/cordon/",
        {"reason": "x" * 401},
        "reason",
        400,
    ),
    "a drain's reason": ("admin", "/api/v1/nodes/n1/drain/", {"reason": "x" * 401}, "reason", 400),
    "an unhealthy GPU's reason": (
        "admin",
        "/api/v1/nodes/n1/gpus/0/health/",
        {"healthy": False, "reason": "x" * 201},
        "reason",
        200,
    ),
    "a grant's reason": (
        "admin",
        "/api/v1/budgets/",
        {
            "tenant": "nlp",
            "priority_class": "urgent",
            "period_start": "2026-01-01",
            "period_end": "2026-02-01",
            "gpu_hours": 10,
            "reason": "x" * 201,
        },
        "reason",
        200,
    ),
    "an image": ("member", "/api/v1/workloads/", pod_set(image="x" * 513), "pod_sets.0.image", 512),
    "a command's argument": (
        "member",
        "/api/v1/workloads/",
        pod_set(command=["python", "x" * (MAX_ARGUMENT_LENGTH + 1)]),
        "pod_sets.0.command.1",
        MAX_ARGUMENT_LENGTH,
    ),
    "a justification": (
        "lead",
        "/api/v1/quota-requests/",
        {**REQUEST, "justification": "x" * (JUSTIFICATION_MAX_LENGTH + 1)},
        "justification",
        JUSTIFICATION_MAX_LENGTH,
    ),
}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_a_text_too_long_is_refused_in_the_products_words(
    api_as: Any, world: Any, case: tuple[str, str, dict[str, Any], str, int]
) -> None:
    pool(world)
    role, path, body, field, limit = case
    method = "put" if "/quotas/" in path else "post"
    response = getattr(api_as(role), method)(path, body, format="json")
    assert response.status_code == 400
    error = response.json()["error"]
    said = too_long(limit, limit + 1)
    assert said == f"at most {limit:,} characters, not {limit + 1:,}"
    assert error["fields"][field] == [said]
    assert f"{field}: {said}" in error["message"]
    assert "Ensure" not in response.content.decode()


def test_a_decision_note_too_long_is_refused_in_the_products_words(api_as: Any, world: Any) -> None:
    pool(world)
    filed = api_as("lead").post("/api/v1/quota-requests/", REQUEST, format="json")
    assert filed.status_code == 201, filed.content
    response = api_as("admin").post(
        f"/api/v1/quota-requests/{filed.json()['id']}/reject/",
        {"decision_note": "x" * 10_001},
        format="json",
    )
    assert response.status_code == 400
    assert response.json()["error"]["fields"] == {
        "decision_note": ["at most 10,000 characters, not 10,001"]
    }
