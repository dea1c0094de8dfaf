"""The Submit form says, beside its protected runtime, the chosen queue's default and free
maximum (DESIGN 2, the protected-runtime contract: left empty, a workload gets its queue's
default; past the queue's maximum at a class with no budget, the submission is refused):
server-rendered for the queue chosen already (the only one, or the one a refused submit was
sent with), each of the user's queues' when none is chosen and they are few, and again in
every live dry-run's answer, out of band, so that it follows the queue the user picks. The
page said nothing of either: a user learnt the maximum only from the refusal."""

from __future__ import annotations

import re
from typing import Any

from dashboard_pages import SUBMIT_FORM, text
from domain_builders import queue

from gpupool.quotas.models import Queue

NLP = (
    "Queue nlp: 10 min (600 s) when left empty; at most 1 h (3600 s) at a class with no "
    "budget; longer needs a budgeted priority class."
)
VISION = "Queue vision: none (0 s) when left empty; free at any length (no maximum)."


def limits(page: str) -> str:
    """The hint beside the protected runtime, as the page (or a dry-run's answer) writes it."""
    found = re.search(r'<p class="help" id="protected-runtime-limits"[^>]*>(.*?)</p>', page, re.S)
    assert found is not None, page
    return found[1]


def protected_input(page: str) -> str:
    found = re.search(r'<input[^>]*name="protected_runtime_s"[^>]*>', page)
    assert found is not None, page
    return found[0]


def limited_nlp() -> None:
    Queue.objects.filter(name="nlp").update(
        default_protected_runtime_s=600, max_protected_runtime_s=3600
    )


def test_the_only_queue_chosen_already_has_its_limits_beside_the_field(
    pool: Any, page_as: Any
) -> None:
    limited_nlp()
    page = text(page_as("max").get("/workloads/"))
    assert limits(page) == NLP
    described = re.search(r'aria-describedby="([^"]*)"', protected_input(page))
    assert described is not None
    assert described[1].split() == ["id_protected_runtime_s_helptext", "protected-runtime-limits"]


def test_with_no_queue_chosen_each_of_a_few_queues_is_said(pool: Any, page_as: Any) -> None:
    limited_nlp()
    page = text(page_as("ada").get("/workloads/"))  # an admin submits to nlp and vision
    assert limits(page) == f"{NLP} {VISION}"


def test_the_dry_run_brings_the_limits_of_the_queue_picked(pool: Any, page_as: Any) -> None:
    limited_nlp()
    client = page_as("ada")
    for picked, said in (("vision", VISION), ("nlp", NLP)):
        answer = text(
            client.post(
                "/workloads/dry-run/", SUBMIT_FORM | {"queue": picked}, HTTP_HX_REQUEST="true"
            )
        )
        assert 'id="protected-runtime-limits" hx-swap-oob="true"' in answer
        assert limits(answer) == said


def test_a_refused_submit_keeps_the_limits_of_the_queue_it_was_sent_with(
    pool: Any, page_as: Any
) -> None:
    limited_nlp()
    sent = SUBMIT_FORM | {"queue": "nlp", "protected_runtime_s": "7200"}
    response = page_as("ada").post("/workloads/submit/", sent)
    assert response.status_code == 400
    page = text(response)
    assert "exceeds queue nlp&#x27;s free maximum of 3600s" in page
    assert limits(page) == NLP
    described = re.search(r'aria-describedby="([^"]*)"', protected_input(page))
    assert described is not None and "protected-runtime-limits" in described[1].split()
    assert "id_protected_runtime_s_error" in described[1].split()


def test_many_queues_and_none_chosen_points_to_the_preemptions_page(
    pool: Any, page_as: Any
) -> None:
    for number in range(12):
        queue(f"nlp-{number}", parent=pool.root, tenant=pool.nlp)
    page = text(page_as("max").get("/workloads/"))
    said = limits(page)
    assert said.startswith("Choose a queue to see its default protected runtime")
    assert 'href="/preemptions/#protection-title"' in said


def test_queues_alike_in_their_window_are_said_together(pool: Any, page_as: Any) -> None:
    """vision differs from nlp only in being reclaimable: one sentence names both."""
    Queue.objects.filter(name="vision").update(reclaimable=False)
    page = text(page_as("ada").get("/workloads/"))
    assert (
        limits(page)
        == "Queues nlp, vision: none (0 s) when left empty; free at any length (no maximum)."
    )
