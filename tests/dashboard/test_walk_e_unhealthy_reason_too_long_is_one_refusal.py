"""Walk-through E: an admin who marks a GPU unhealthy with a reason past its 200 characters is
told that, and only that: the page also said "say why the GPU is unhealthy", as if no reason
had been given, because the form's own check read the reason the length check had dropped."""

from __future__ import annotations

from typing import Any

from dashboard_pages import text

from gpupool.inventory.models import Gpu


def test_a_reason_too_long_is_refused_for_its_length_not_as_missing(
    pool: Any, page_as: Any
) -> None:
    response = page_as("ada").post(
        "/cluster/nodes/n2/gpu-health/", {"index": "3", "reason": "x" * 201}
    )
    assert response.status_code == 400
    page = text(response)
    assert "n2 was not changed: Unhealthy because: at most 200 characters, not 201." in page
    assert "say why the GPU is unhealthy" not in page
    assert Gpu.objects.filter(node__name="n2", healthy=False).count() == 0


def test_a_blank_reason_is_still_refused_as_missing(pool: Any, page_as: Any) -> None:
    response = page_as("ada").post("/cluster/nodes/n2/gpu-health/", {"index": "3", "reason": " "})
    assert response.status_code == 400
    assert "Unhealthy because: say why the GPU is unhealthy" in text(response)
    assert Gpu.objects.filter(node__name="n2", healthy=False).count() == 0
