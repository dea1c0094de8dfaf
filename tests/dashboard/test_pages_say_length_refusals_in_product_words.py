"""A text past its field's length is refused by the pages in the product's words, after the
field's label or under the field: "Unhealthy because: at most 200 characters, not 201"
(``text_limits.TOO_LONG``, as the API says it), not Django's "Ensure this value has at most 200
characters (it has 201)."; the drain, cordon and decision forms' reasons are checked with what
they keep typed (tests/dashboard/test_refused_forms_without_scripts_keep_what_was_typed.py)."""

from __future__ import annotations

from typing import Any

from dashboard_pages import SUBMIT_FORM, text

from gpupool.inventory.models import Gpu
from gpupool.quotas.models import JUSTIFICATION_MAX_LENGTH, QuotaRequest
from gpupool.workloads.models import Workload


def test_an_unhealthy_gpus_reason_too_long_is_refused_in_the_products_words(
    pool: Any, page_as: Any
) -> None:
    response = page_as("ada").post(
        "/cluster/nodes/n2/gpu-health/", {"index": "3", "reason": "x" * 201}
    )
    assert response.status_code == 400
    page = text(response)
    assert "n2 was not changed: Unhealthy because: at most 200 characters, not 201." in page
    assert "Ensure" not in page
    # Refused for its length only, not also as missing (the form checked the reason its
    # length check had already dropped: helper E's walk)
    assert "say why the GPU is unhealthy" not in page
    assert Gpu.objects.filter(node__name="n2", healthy=False).count() == 0


def test_a_container_image_too_long_is_refused_in_the_products_words(
    pool: Any, page_as: Any
) -> None:
    response = page_as("max").post("/workloads/submit/", SUBMIT_FORM | {"image": "x" * 513})
    page = text(response)
    # (the submit form says a field's refusal under the field, labelled "Container image")
    said = '<ul class="errorlist" id="id_image_error"><li>at most 512 characters, not 513</li>'
    assert said in page
    assert "Ensure" not in page
    assert not Workload.objects.exists()


def test_a_justification_too_long_is_refused_in_the_products_words(pool: Any, page_as: Any) -> None:
    too_long = "x" * (JUSTIFICATION_MAX_LENGTH + 1)
    response = page_as("lena").post(
        "/requests/",
        {
            "kind": "queue-quota",
            "queue": pool.nlp_queue.pk,
            "flavor": pool.h100.pk,
            "guarantee": "6",
            "deserved": "10",
            "capability": "16",
            "justification": too_long,
        },
    )
    page = text(response)
    limit = JUSTIFICATION_MAX_LENGTH
    assert f"at most {limit:,} characters, not {limit + 1:,}" in page
    assert "Ensure" not in page
    assert not QuotaRequest.objects.exists()
