"""The submit form of My workloads and its live dry-run: the API's input shape and the
submission action, the decision core on the last cycle's snapshot (never one per keystroke),
and nothing written by a dry-run."""

from __future__ import annotations

from typing import Any

from dashboard_pages import SUBMIT_FORM, live, text

from gpupool.control import queries
from gpupool.workloads.models import Workload

FORM = SUBMIT_FORM


def dry_run(client: Any, **changes: str) -> str:
    """What htmx swaps in after a keystroke."""
    return text(client.post("/workloads/dry-run/", FORM | changes, HTTP_HX_REQUEST="true"))


def test_a_fitting_workload_would_start_now_and_nothing_is_written(pool: Any, page_as: Any) -> None:
    answer = dry_run(page_as("max"))
    assert "It would start now" in answer
    assert "quota" in answer and "capacity" in answer and "placement" in answer
    assert not Workload.objects.exists()


def test_a_too_big_workload_names_the_layer_that_fails(pool: Any, page_as: Any) -> None:
    answer = dry_run(page_as("max"), pods="3", gpus_per_pod="4")
    assert "It would wait: the" in answer and 'class="failing"' in answer
    assert not Workload.objects.exists()


def test_work_that_could_never_run_is_said_so_not_that_it_would_wait(
    pool: Any, page_as: Any
) -> None:
    """Above every capability on its queue's path: submitted, it has no place in line (the
    dry-run said "It would wait: the quota layer fails", as for work that waits its turn)."""
    answer = dry_run(page_as("max"), pods="64", gpus_per_pod="8")
    assert "It would never run" in answer and "It would wait" not in answer
    assert "can never hold 512 h100 GPUs" in answer


def test_a_half_filled_form_says_what_is_missing(pool: Any, page_as: Any) -> None:
    answer = dry_run(page_as("max"), pods="")
    assert "Not checked yet" in answer and "Pods" in answer


def test_another_teams_queue_is_not_offered(pool: Any, page_as: Any) -> None:
    answer = dry_run(page_as("max"), queue="vision")
    assert "Not checked yet" in answer and "Queue" in answer
    page = text(page_as("max").get("/workloads/"))
    assert '<option value="nlp"' in page and '<option value="vision"' not in page


def test_keystrokes_between_two_cycles_read_one_snapshot(
    pool: Any, page_as: Any, monkeypatch: Any
) -> None:
    built: list[object] = []
    original = queries.build_snapshot

    def counting(*args: Any, **kwargs: Any) -> Any:
        built.append(args)
        return original(*args, **kwargs)

    monkeypatch.setattr(queries, "build_snapshot", counting)
    client = page_as("max")
    for pods in ("1", "2", "1"):
        assert "It would" in dry_run(client, pods=pods)
    assert len(built) == 1


def test_submitting_queues_the_workload_and_opens_its_page(pool: Any, page_as: Any) -> None:
    response = page_as("max").post("/workloads/submit/", FORM, follow=True)
    assert response.redirect_chain[-1][0] == "/workloads/nlp/train/"
    workload = Workload.objects.get(name="train")
    assert (workload.submitter.username, workload.expected_runtime_s) == ("max", 7200)
    assert "nlp/train is queued" in text(response)


def test_a_refused_submission_comes_back_onto_the_form(pool: Any, page_as: Any) -> None:
    client = page_as("max")
    client.post("/workloads/submit/", FORM)
    again = client.post("/workloads/submit/", FORM)
    assert again.status_code == 400
    # beside the name it refuses (tests/dashboard/test_submit_refusals_on_their_fields.py)
    name_errors = text(again).split('id="id_name_error"', 1)[1].split("</ul>", 1)[0]
    assert "already has a workload of this name: nlp/train" in name_errors
    assert Workload.objects.filter(name="train").count() == 1


def test_finance_may_not_try_or_submit(pool: Any, page_as: Any) -> None:
    assert page_as("fin").post("/workloads/dry-run/", FORM).status_code == 403
    assert page_as("fin").post("/workloads/submit/", FORM).status_code == 403


def test_a_refused_submissions_page_refreshes_and_filters_from_the_list(
    pool: Any, page_as: Any
) -> None:
    """The page a refused submit answers stays at the POST's URL (``/workloads/submit/``),
    which answers no GET: its live part and its state filter ask the list's own URL, or the
    refresh said "This part could not be refreshed (405)"."""
    client = page_as("max")
    client.post("/workloads/submit/", FORM)
    page = text(client.post("/workloads/submit/", FORM))
    assert 'id="live" hx-get="/workloads/"' in page
    assert '<form class="filters" method="get" action="/workloads/">' in page
    assert "/workloads/submit/" not in page.split('id="live"', 1)[1].split(">", 1)[0]
    assert live(client, "/workloads/").status_code == 200
    assert client.get("/workloads/submit/").status_code == 405  # why the page must not ask it


def test_the_live_part_keeps_the_state_shown(pool: Any, page_as: Any) -> None:
    page = text(page_as("max").get("/workloads/?state=pending&junk=1"))
    assert 'hx-get="/workloads/?state=pending"' in page
