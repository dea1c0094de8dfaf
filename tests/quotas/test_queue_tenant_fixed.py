"""A queue's tenant stays once the queue has held work: its workloads' visibility, cost and
history follow the queue's tenant, so a move would hand one tenant's work to another."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError
from django.utils import timezone
from domain_builders import flavor, priority_class, queue, tenant, user

from gpupool.audit.models import AuditEvent
from gpupool.inventory.models import Flavor
from gpupool.quotas.actions import (
    do_create_quota_request,
    do_save_queue,
    do_submit_quota_request,
)
from gpupool.quotas.models import Queue
from gpupool.tenancy.actions import do_set_membership
from gpupool.workloads.actions import PodSetSpec, do_submit_workload, do_transition_workload

pytestmark = pytest.mark.django_db


@pytest.fixture
def teams() -> dict[str, object]:
    flavor("h100")
    priority_class("normal", default=True)
    submitter = user("max")
    nlp = tenant("nlp", members=(submitter,), namespaces=("nlp",))
    ads = tenant("ads", namespaces=("ads",))
    root = queue("root")
    return {
        "nlp": nlp,
        "ads": ads,
        "submitter": submitter,
        "queue": queue("nlp", parent=root, tenant=nlp),
        "empty": queue("spare", parent=root, tenant=nlp),
    }


def submit(teams: dict, name: str) -> object:
    spec = PodSetSpec(1, gpus=1, flavor=Flavor.objects.get(name="h100"), image="pytorch", cpu=1)
    return do_submit_workload(
        name, queue=teams["queue"], pod_sets=[spec], submitter=teams["submitter"]
    )


def move(queue: Queue, to: object) -> Queue:
    queue = Queue.objects.get(pk=queue.pk)
    queue.tenant = to
    return do_save_queue(queue, acting_user=None)


def test_a_queue_holding_work_keeps_its_tenant(teams: dict) -> None:
    submit(teams, "train")
    audited = AuditEvent.objects.count()
    with pytest.raises(ValidationError) as error:
        move(teams["queue"], teams["ads"])
    assert list(error.value.message_dict) == ["tenant"]
    assert "has held 1 workload" in error.value.message_dict["tenant"][0]
    assert Queue.objects.get(name="nlp").tenant == teams["nlp"]
    assert AuditEvent.objects.count() == audited


def test_finished_work_keeps_the_tenant_too(teams: dict) -> None:
    workload = submit(teams, "done")
    do_transition_workload(workload, "cancelled", reason="not needed", at=timezone.now())
    with pytest.raises(ValidationError) as error:
        move(teams["queue"], None)
    assert "tenant" in error.value.message_dict


def test_a_queue_that_never_held_work_may_move(teams: dict) -> None:
    moved = move(teams["empty"], teams["ads"])
    assert Queue.objects.get(pk=moved.pk).tenant == teams["ads"]


def test_other_changes_to_a_queue_holding_work_are_kept(teams: dict) -> None:
    submit(teams, "train")
    nlp = Queue.objects.get(name="nlp")
    nlp.description = "still nlp's"
    do_save_queue(nlp, acting_user=None)
    assert Queue.objects.get(name="nlp").description == "still nlp's"


def test_an_open_request_of_the_old_tenant_is_refused_when_submitted(teams: dict) -> None:
    lead = user("lena")
    do_set_membership(lead, teams["nlp"], role="lead", acting_user=None)
    request = do_create_quota_request(
        kind="queue-quota",
        tenant=teams["nlp"],
        requested_by=lead,
        justification="more for the spare queue",
        payload={"guarantee": 0, "deserved": 1, "capability": 2},
        queue=teams["empty"],
        flavor=Flavor.objects.get(name="h100"),
    )
    move(teams["empty"], teams["ads"])
    with pytest.raises(ValidationError) as error:
        do_submit_quota_request(request, acting_user=lead)
    assert "queue" in error.value.message_dict
