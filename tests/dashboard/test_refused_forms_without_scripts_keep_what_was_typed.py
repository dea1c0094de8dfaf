"""Without JavaScript, a what-if or a node's form (cordon, drain, GPU health) the server refuses
comes back on its own page, answered 400, with what was typed still in the form and the error
naming the field as the form labels it; it was a redirect that put the defaults back (the
days, the reason typed: gone). With htmx the what-if's part answers as it did (200, the part
alone)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from dashboard_pages import text
from test_requests_and_approvals import filed

from gpupool.audit.models import AuditEvent
from gpupool.inventory.models import Gpu, Node
from gpupool.quotas import whatif
from gpupool.quotas.models import WhatIfRun


@pytest.fixture
def dispatched(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The what-if runs handed to the background (none runs: the test drives them)."""
    runs: list[int] = []
    monkeypatch.setattr(whatif, "dispatch_what_if", runs.append)
    return runs


def tag(page: str, pattern: str) -> str:
    """The first tag of ``page`` that ``pattern`` (a regex of its start) finds."""
    found = re.search(pattern + r"[^>]*>", page)
    assert found is not None, pattern
    return found[0]


# ----------------------------------------------------------------------------- what-if


def test_a_refused_what_if_without_scripts_is_the_approval_page_again_with_the_days_typed(
    pool: Any, page_as: Any, dispatched: list[int]
) -> None:
    request = filed(pool)
    response = page_as("ada").post(f"/approvals/{request.pk}/what-if/", {"days": "0"})
    assert response.status_code == 400
    page = text(response)
    assert 'id="decide-title"' in page  # the whole approval page, not its what-if part
    assert (
        "The what-if did not start: Days to replay: Ensure this value is greater than or "
        "equal to 1." in page
    )
    days = tag(page, '<input id="what-if-days"')
    assert 'value="0"' in days
    assert 'aria-invalid="true"' in days and 'aria-describedby="what-if-error"' in days
    assert not WhatIfRun.objects.exists() and dispatched == []


def test_a_what_if_the_action_refuses_without_scripts_says_so_on_the_approval_page(
    pool: Any, page_as: Any, dispatched: list[int]
) -> None:
    request = filed(pool)
    client = page_as("ada")
    started = client.post(f"/approvals/{request.pk}/what-if/", {"days": "7"})
    assert started.status_code == 302  # started: back to the page, as before
    response = client.post(f"/approvals/{request.pk}/what-if/", {"days": "12"})
    assert response.status_code == 400
    page = text(response)
    assert 'id="decide-title"' in page
    assert "The what-if did not start: what-if #" in page and "is queued" in page
    assert WhatIfRun.objects.count() == 1


def test_a_refused_what_if_with_htmx_still_answers_its_part_alone(
    pool: Any, page_as: Any, dispatched: list[int]
) -> None:
    request = filed(pool)
    response = page_as("ada").post(
        f"/approvals/{request.pk}/what-if/", {"days": "0"}, HTTP_HX_REQUEST="true"
    )
    assert response.status_code == 200  # htmx swaps only 2xx answers
    page = text(response)
    assert page.lstrip().startswith('<div id="what-if"') and "<html" not in page
    assert 'value="0"' in tag(page, '<input id="what-if-days"')


# ----------------------------------------------------------------------------- cluster


def test_a_refused_drain_without_scripts_is_the_cluster_page_again_with_the_reason_typed(
    pool: Any, page_as: Any
) -> None:
    typed = "x" * 401
    response = page_as("ada").post(
        "/cluster/nodes/n2/drain/", {"reason": typed, "query": "flavor=h100"}
    )
    assert response.status_code == 400
    page = text(response)
    assert "n2 was not drained: Why: at most 400 characters, not 401" in page
    assert tag(page, '<details class="drain" id="drain-n2-confirm"').endswith(" open>")
    reason = tag(page, '<input id="drain-n2"')
    assert f'value="{typed}"' in reason
    assert 'aria-invalid="true"' in reason and 'aria-describedby="node-form-refused"' in reason
    assert 'id="node-form-refused"' in page
    # The filters it was posted from, and the live part polls the page, not the form's URL.
    assert '<option value="h100" selected>' in page
    assert 'hx-get="/cluster/?flavor=h100"' in page
    # The other nodes' forms are as they were.
    assert "aria-invalid" not in tag(page, '<input id="drain-n1"')
    assert Node.objects.get(name="n2").drain_requested_at is None
    assert not AuditEvent.objects.filter(action="inventory.drain_node").exists()


def test_a_refused_cordon_without_scripts_keeps_the_reason_typed(pool: Any, page_as: Any) -> None:
    typed = "y" * 401
    response = page_as("ada").post("/cluster/nodes/n2/cordon/", {"cordoned": "on", "reason": typed})
    assert response.status_code == 400
    page = text(response)
    assert "n2 was not changed: Why: at most 400 characters, not 401" in page
    reason = tag(page, '<input id="cordon-n2"')
    assert f'value="{typed}"' in reason and 'aria-invalid="true"' in reason
    assert 'hx-get="/cluster/"' in page
    assert not Node.objects.get(name="n2").cordoned


def test_a_refused_gpu_health_mark_without_scripts_keeps_the_gpu_chosen(
    pool: Any, page_as: Any
) -> None:
    response = page_as("ada").post("/cluster/nodes/n2/gpu-health/", {"index": "3", "reason": "   "})
    assert response.status_code == 400
    page = text(response)
    assert "n2 was not changed: Unhealthy because: say why the GPU is unhealthy" in page
    assert 'aria-invalid="true"' in tag(page, '<input id="why-n2"')
    choices = tag(page, '<select id="gpu-n2"') + page.split('<select id="gpu-n2"', 1)[1]
    assert '<option value="3" selected>' in choices.split("</select>", 1)[0]
    assert Gpu.objects.filter(node__name="n2", healthy=False).count() == 0


def test_a_refused_form_of_a_node_the_filters_hide_still_says_why(pool: Any, page_as: Any) -> None:
    """Posted from a page whose filters no longer list the node: the refusal is said all the
    same, without pointing to a form the page does not show."""
    response = page_as("ada").post(
        "/cluster/nodes/n2/drain/", {"reason": "z" * 401, "query": "show=problems"}
    )
    assert response.status_code == 400
    page = text(response)
    assert "n2 was not drained: Why: at most 400 characters, not 401" in page
    assert 'id="node-n2"' not in page and "Its form is below" not in page
