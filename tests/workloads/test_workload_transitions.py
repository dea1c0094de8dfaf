"""Every state change follows the state machine and is recorded with a time and a reason."""

from datetime import datetime, timedelta

import pytest
from django.core.exceptions import ValidationError
from domain_builders import flavor, node, priority_class, queue

from gpupool.inventory.models import Node
from gpupool.workloads.actions import (
    PlacementSpec,
    PodSetSpec,
    do_submit_workload,
    do_transition_workload,
)
from gpupool.workloads.models import Workload

pytestmark = pytest.mark.django_db

T0 = datetime.fromisoformat("2026-11-29T09:00:00+00:00")


@pytest.fixture
def workload() -> Workload:
    h100 = flavor("h100")
    node("n1", h100, gpus=8)
    node("n2", h100, gpus=8)
    priority_class("normal", default=True)
    return do_submit_workload(
        "train",
        queue=queue("team", parent=queue("root")),
        pod_sets=[PodSetSpec(2, gpus=8, flavor=h100)],
        at=T0,
    )


def gang(workload: Workload) -> list[PlacementSpec]:
    """Both pods of the workload, one per node, all eight GPUs each."""
    return [
        PlacementSpec("main", index, Node.objects.get(name=f"n{index + 1}"), list(range(8)))
        for index in range(2)
    ]


def test_a_workload_runs_preempts_requeues_and_finishes_with_every_step_recorded(
    workload: Workload,
) -> None:
    steps = [
        ("admitted", "fits on n1, n2", gang(workload)),
        ("running", "pods started", []),
        ("preempted", "preempted for urgent", []),
        ("pending", "requeued", []),
        ("admitted", "fits again", gang(workload)),
        ("running", "pods started", []),
        ("succeeded", "exit 0", []),
    ]
    for minute, (state, reason, placements) in enumerate(steps, start=1):
        do_transition_workload(
            workload,
            state,
            reason=reason,
            at=T0 + timedelta(minutes=minute),
            placements=placements,
        )
    workload.refresh_from_db()
    history = list(workload.transitions.values_list("from_state", "to_state", "reason"))
    assert history[0] == ("", "pending", "submitted")
    assert [to for _, to, _ in history[1:]] == [state for state, _, _ in steps]
    assert workload.state == "succeeded"
    assert workload.submitted_at == T0  # requeueing keeps the original submit time
    assert workload.finished_at == T0 + timedelta(minutes=7)
    assert workload.placements.count() == 2  # the final placement stays for the record


@pytest.mark.parametrize(
    ("path", "refused"),
    [
        ([], "running"),
        ([], "succeeded"),
        (["cancelled"], "pending"),
        (["admitted", "running", "succeeded"], "cancelled"),
    ],
    ids=[
        "pending to running",
        "pending to succeeded",
        "out of cancelled",
        "succeeded to cancelled",
    ],
)
def test_a_transition_outside_the_state_machine_is_refused(
    workload: Workload, path: list[str], refused: str
) -> None:
    for state in path:
        placements = gang(workload) if state == "admitted" else []
        do_transition_workload(workload, state, reason="step", placements=placements)
    before = workload.transitions.count()
    with pytest.raises(ValidationError) as error:
        do_transition_workload(workload, refused, reason="try")
    assert "state" in error.value.message_dict
    assert workload.transitions.count() == before


def test_admission_needs_the_whole_gang(workload: Workload) -> None:
    with pytest.raises(ValidationError) as error:
        do_transition_workload(workload, "admitted", reason="half", placements=gang(workload)[:1])
    assert "placements" in error.value.message_dict
    workload.refresh_from_db()
    assert workload.state == "pending" and not workload.placements.exists()


def test_every_transition_says_why(workload: Workload) -> None:
    with pytest.raises(ValidationError) as error:
        do_transition_workload(workload, "cancelled", reason="  ")
    assert "reason" in error.value.message_dict


def test_preemption_releases_the_placements(workload: Workload) -> None:
    do_transition_workload(workload, "admitted", reason="fits", placements=gang(workload))
    do_transition_workload(workload, "running", reason="started")
    do_transition_workload(workload, "preempted", reason="for urgent")
    assert not workload.placements.exists()
