"""Cancelling is refused once a workload has ended, preempted work that is not requeued
included (reclaimed for sitting idle, or a bare pod: the loop gives it its ``finished_at``);
preempted work about to be requeued may still be cancelled. One rule
(``actions.cancel_refusal``) for the action (so the API and the CLI) and the page's Cancel."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest
from django.core.exceptions import ValidationError
from domain_builders import flavor, node, priority_class, queue, tenant, user

from gpupool.dashboard.views import cancellable
from gpupool.inventory.models import Flavor, Node
from gpupool.quotas.models import Queue
from gpupool.workloads.actions import (
    PlacementSpec,
    PodSetSpec,
    do_cancel_workload,
    do_submit_workload,
    do_transition_workload,
)
from gpupool.workloads.models import Workload, WorkloadTransition

pytestmark = pytest.mark.django_db

T0 = datetime.fromisoformat("2026-11-29T09:00:00+00:00")
RECLAIMED_AT = T0 + timedelta(hours=2)


@pytest.fixture
def lead() -> Any:
    """Tenant nlp (lead lena) with leaf queue nlp-train and one 8-GPU node; returns lena."""
    h100 = flavor("h100")
    node("n1", h100, gpus=8)
    priority_class("normal", default=True)
    lena = user("lena")
    nlp = tenant("nlp", lead=lena, namespaces=("nlp",))
    queue("nlp-train", parent=queue("root"), tenant=nlp)
    return lena


def preempted(lead: Any, *, ends: bool) -> Workload:
    """A notebook run on n1 and preempted at RECLAIMED_AT; ``ends``: not requeued (the loop
    stamps ``finished_at`` on a preemption that ends the work, as for one reclaimed idle)."""
    workload = do_submit_workload(
        "notebook-00046",
        queue=Queue.objects.get(name="nlp-train"),
        pod_sets=[PodSetSpec(1, gpus=1, flavor=Flavor.objects.get(name="h100"), image="jupyter")],
        submitter=lead,
        at=T0,
    )
    placement = PlacementSpec("main", 0, Node.objects.get(name="n1"), [0])
    start = T0 + timedelta(minutes=1)
    do_transition_workload(workload, "admitted", reason="fits", at=start, placements=[placement])
    do_transition_workload(workload, "running", reason="started", at=start)
    do_transition_workload(workload, "preempted", reason="evicted (idle)", at=RECLAIMED_AT)
    if ends:
        Workload.objects.filter(pk=workload.pk).update(finished_at=RECLAIMED_AT)
    workload.refresh_from_db()
    return workload


def test_cancelling_work_reclaimed_for_idleness_is_refused_and_changes_nothing(lead: Any) -> None:
    workload = preempted(lead, ends=True)
    moves = WorkloadTransition.objects.count()
    with pytest.raises(ValidationError) as refused:
        do_cancel_workload(workload, acting_user=lead, at=RECLAIMED_AT + timedelta(hours=1))
    assert refused.value.message_dict == {
        "state": [
            "nlp/notebook-00046 has already ended: it is preempted, and not requeued. "
            "Nothing was changed."
        ]
    }
    workload.refresh_from_db()
    assert (workload.state, workload.finished_at) == ("preempted", RECLAIMED_AT)
    assert WorkloadTransition.objects.count() == moves


def test_preempted_work_about_to_be_requeued_may_still_be_cancelled(lead: Any) -> None:
    workload = preempted(lead, ends=False)
    do_cancel_workload(workload, acting_user=lead, at=RECLAIMED_AT)
    workload.refresh_from_db()
    assert (workload.state, workload.finished_at) == ("cancelled", RECLAIMED_AT)


def test_the_page_offers_cancel_exactly_when_the_action_takes_it(lead: Any) -> None:
    workload = preempted(lead, ends=False)
    assert cancellable(lead, workload)
    Workload.objects.filter(pk=workload.pk).update(finished_at=RECLAIMED_AT)
    workload.refresh_from_db()
    assert not cancellable(lead, workload)
