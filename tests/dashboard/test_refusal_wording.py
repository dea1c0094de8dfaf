"""Refusals and outcomes said in the page's words: a refusal names its field as the form
labels it (the dry-run's ``pod_sets.0.gpu_milli`` is "GPU share per pod (milli-GPU)", the
approval's ``decision_note`` is beside its Comment field, a request's ``payload`` is its
requested amounts), never by a raw path; a cancel says what is true of the work cancelled
(pending work leaves its queue, work that held GPUs releases them), and cancelling work that
has ended says so, naming its state, and changes nothing."""

from __future__ import annotations

from typing import Any

from dashboard_pages import SUBMIT_FORM, field_errors, form_errors, text
from domain_builders import flavor, quota
from two_teams import quota_request, submit

from gpupool.dashboard.forms import WorkloadForm, readable_field
from gpupool.inventory.models import Node
from gpupool.quotas.models import QueueQuota, QuotaRequest
from gpupool.workloads.actions import PlacementSpec, do_transition_workload
from gpupool.workloads.models import Workload, WorkloadTransition

FORM = SUBMIT_FORM
CANCEL_URL = "/workloads/nlp/train/cancel/"


def dry_run(client: Any, **changes: str) -> str:
    """The live dry-run's answer to the form with ``changes``."""
    return text(client.post("/workloads/dry-run/", FORM | changes, HTTP_HX_REQUEST="true"))


def submitted_request(pool: Any, guarantee: int) -> QuotaRequest:
    """lena's submitted request of nlp for h100 (deserved 10, capability 16)."""
    return quota_request(pool, submit=True, guarantee=guarantee)


# ----------------------------------------------------------------------------- dry-run


def test_the_dry_runs_action_refusals_name_the_forms_labels_not_body_paths(
    pool: Any, page_as: Any
) -> None:
    # given a shared flavor, whose pods ask one GPU each and a share (the form lets 4 through)
    flavor("l40s-shared", sharing="shared", gpu_memory_gb=48)
    # when the dry-run tries 4 GPUs per pod on it
    answer = dry_run(page_as("max"), flavor="l40s-shared", gpus_per_pod="4")
    # then each refusal is named by its field's label, and no body path is shown
    assert "Refused:" in answer  # the action's refusal, not an incomplete form
    assert "GPUs per pod (MIG: instances): " in answer and "asks for 1 GPU, not 4" in answer
    assert "GPU share per pod (milli-GPU): l40s-shared is shared" in answer
    assert "pod_sets" not in answer and "gpu_milli" not in answer


def test_the_dry_runs_serializer_refusals_name_the_forms_labels(pool: Any, page_as: Any) -> None:
    answer = dry_run(page_as("max"), expected_hours="999999.99")
    assert "Expected runtime (hours): " in answer
    assert "expected_runtime_s" not in answer
    # (a name that is no DNS label is the form's own refusal now, with the same words)
    assert "Name: Enter a DNS label (RFC 1123)" in dry_run(page_as("max"), name="Train_1")


def test_a_path_no_field_of_the_form_holds_is_said_in_words() -> None:
    form = WorkloadForm(queues=["nlp"])
    assert form.refusal_label("pod_sets.0.gpu_milli") == "GPU share per pod (milli-GPU)"
    assert form.refusal_label("expected_runtime_s") == "Expected runtime (hours)"
    assert form.refusal_label("pod_sets.1.node_selector") == "pod sets #2 node selector"
    assert readable_field("payload") == "requested amounts"


# ----------------------------------------------------------------------------- approval


def test_a_rejection_without_a_comment_is_refused_beside_the_comment_field(
    pool: Any, page_as: Any
) -> None:
    request = submitted_request(pool, guarantee=4)
    page = text(
        page_as("ada").post(
            f"/approvals/{request.pk}/", {"decision": "reject", "decision_note": ""}
        )
    )
    assert "say why the request is rejected" in field_errors(page, "decision_note")
    assert form_errors(page) == ""
    assert "decision_note:" not in page
    request.refresh_from_db()
    assert request.state == "submitted"


def test_an_approval_that_does_not_fit_says_its_sentence_not_payload(
    pool: Any, page_as: Any
) -> None:
    # given nlp asks a guarantee of 6 inside a root that guarantees 8 (vision holds 4)
    quota(pool.root, pool.h100, 8, 16, 16)
    request = submitted_request(pool, guarantee=6)
    # when the admin approves anyway (a crafted POST: the page offers no Approve)
    page = text(
        page_as("ada").post(
            f"/approvals/{request.pk}/", {"decision": "approve", "decision_note": "ok"}
        )
    )
    # then the refusal says its sentence (which names what would not fit), no field's name
    # before it, as the API's message and the CLI say it; and nothing changed
    assert "Not decided: the change would not fit: guarantee: " in form_errors(page)
    assert "payload" not in page
    request.refresh_from_db()
    assert request.state == "submitted"
    assert QueueQuota.objects.get(queue=pool.nlp_queue, flavor=pool.h100).guarantee == 4


# ----------------------------------------------------------------------------- cancel


def test_cancelling_pending_work_says_it_leaves_the_queue_not_that_gpus_are_released(
    pool: Any, page_as: Any
) -> None:
    submit(pool, "train", pool.nlp_queue, "max")
    page = text(page_as("max").post(CANCEL_URL, {"reason": "wrong image"}, follow=True))
    assert "nlp/train is cancelled: it leaves queue nlp and will not be admitted" in page
    assert "GPUs are released" not in page
    assert Workload.objects.get(name="train").state == "cancelled"


def test_cancelling_running_work_says_its_gpus_are_released(pool: Any, page_as: Any) -> None:
    workload = submit(pool, "train", pool.nlp_queue, "max")
    placements = [PlacementSpec("main", 0, Node.objects.get(name="n2"), list(range(8)))]
    do_transition_workload(workload, "admitted", reason="fits", placements=placements)
    do_transition_workload(workload, "running", reason="started")
    page = text(page_as("max").post(CANCEL_URL, follow=True))
    assert "nlp/train is cancelled: its GPUs are released" in page
    assert "leaves queue" not in page


def test_cancelling_ended_work_says_it_has_ended_and_changes_nothing(
    pool: Any, page_as: Any
) -> None:
    submit(pool, "train", pool.nlp_queue, "max")
    client = page_as("max")
    client.post(CANCEL_URL)
    page = text(client.post(CANCEL_URL, follow=True))
    assert (
        "nlp/train was not cancelled: nlp/train has already ended: it is cancelled. "
        "Nothing was changed." in page
    )
    assert "can move to" not in page and "state:" not in page
    assert WorkloadTransition.objects.filter(to_state="cancelled").count() == 1
