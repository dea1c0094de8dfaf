"""Submitting what pods run, to one's own tenant's queues; cancelling waiting or running work."""

from __future__ import annotations

from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.core.exceptions import PermissionDenied, ValidationError
from domain_builders import flavor, node, priority_class, queue, tenant, user

from gpupool.accounting.actions import do_open_usage
from gpupool.inventory.models import Node
from gpupool.workloads.actions import (
    PlacementSpec,
    PodSetSpec,
    do_cancel_workload,
    do_submit_workload,
    do_transition_workload,
)
from gpupool.workloads.models import Workload

pytestmark = pytest.mark.django_db

T0 = datetime.fromisoformat("2026-11-29T09:00:00+00:00")


@pytest.fixture
def pool() -> dict[str, Any]:
    """Tenant nlp (lead lena, members max and mia) with leaf queue nlp-train; one 8-GPU node."""
    h100 = flavor("h100")
    node("n1", h100, gpus=8)
    priority_class("normal", default=True)
    lena, max_, mia = user("lena"), user("max"), user("mia")
    nlp = tenant("nlp", lead=lena, members=(max_, mia), namespaces=("nlp",))
    vision = tenant("vision", namespaces=("vision",))
    root = queue("root")
    return {
        "h100": h100,
        "lead": lena,
        "submitter": max_,
        "colleague": mia,
        "outsider": user("otto"),
        "admin": user("ada", admin=True),
        "queue": queue("nlp-train", parent=root, tenant=nlp),
        "other_queue": queue("vision-train", parent=root, tenant=vision),
    }


def submit(pool: dict[str, Any], **fields: Any) -> Workload:
    values: dict[str, Any] = {
        "queue": pool["queue"],
        "submitter": pool["submitter"],
        "pod_sets": [PodSetSpec(1, gpus=4, flavor=pool["h100"], image="pytorch:24")],
        "at": T0,
    }
    return do_submit_workload("train", **(values | fields))


def run(workload: Workload) -> Workload:
    """Admit and start the workload on n1, charging its GPUs from T0 + 1 minute."""
    start = T0 + timedelta(minutes=1)
    placement = PlacementSpec("main", 0, Node.objects.get(name="n1"), [0, 1, 2, 3])
    do_transition_workload(workload, "admitted", reason="fits", at=start, placements=[placement])
    do_transition_workload(workload, "running", reason="started", at=start)
    do_open_usage(workload, flavor=workload.pod_sets.get().flavor, gpus=4, at=start)
    workload.refresh_from_db()
    return workload


def test_a_pod_set_keeps_the_image_command_and_environment_its_pods_run(pool: dict) -> None:
    spec = PodSetSpec(
        2,
        gpus=8,
        flavor=pool["h100"],
        image="nvcr.io/nvidia/pytorch:24.05-py3",
        command=["torchrun", "--nproc-per-node=8", "train.py"],
        env={"EPOCHS": "3", "NCCL_DEBUG": "INFO"},
    )
    made = submit(pool, pod_sets=[spec])
    pod_set = made.pod_sets.get()
    assert pod_set.image == "nvcr.io/nvidia/pytorch:24.05-py3"
    assert pod_set.command == ["torchrun", "--nproc-per-node=8", "train.py"]
    assert pod_set.env == {"EPOCHS": "3", "NCCL_DEBUG": "INFO"}


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"command": ["python", 3]}, "command"),
        ({"env": {"1BAD": "x"}}, "env"),
        ({"env": {"EPOCHS": 3}}, "env"),
        ({"image": "x" * 600}, "image"),
    ],
    ids=["a command item that is not a string", "a variable name starting with a digit",
         "a variable value that is not a string", "an image name too long"],
)  # fmt: skip
def test_what_the_pods_run_is_checked_and_named_by_pod_set(
    pool: dict, fields: dict, field: str
) -> None:
    good = PodSetSpec(1, name="first")
    bad = PodSetSpec(1, name="second", **fields)
    with pytest.raises(ValidationError) as error:
        submit(pool, pod_sets=[good, bad])
    assert f"pod_sets.1.{field}" in error.value.message_dict
    assert not Workload.objects.exists()


def test_a_person_submits_only_to_their_own_tenants_queues(pool: dict) -> None:
    with pytest.raises(ValidationError) as error:
        submit(pool, queue=pool["other_queue"])
    assert "not a member" in error.value.message_dict["queue"][0]
    assert submit(pool, queue=pool["other_queue"], submitter=pool["admin"]).namespace == "vision"


def test_a_name_is_used_once_in_a_namespace_and_the_error_names_it(pool: dict) -> None:
    submit(pool)
    with pytest.raises(ValidationError) as error:
        submit(pool)
    assert "name" in error.value.message_dict


def test_cancelling_running_work_releases_its_gpus_and_closes_its_usage(pool: dict) -> None:
    workload = run(submit(pool))
    then = T0 + timedelta(hours=2)
    transition = do_cancel_workload(workload, acting_user=pool["submitter"], at=then)
    workload.refresh_from_db()
    assert (transition.from_state, transition.to_state) == ("running", "cancelled")
    assert transition.actor == pool["submitter"] and transition.reason == "cancelled"
    assert workload.state == "cancelled" and workload.finished_at == then
    assert not workload.placements.exists()
    usage = workload.usage.get()
    assert usage.ended_at == then
    assert usage.gpu_hours(then) == Decimal(4) * Decimal(119) / Decimal(60)


def test_pending_work_is_cancelled_with_the_reason_given(pool: dict) -> None:
    transition = do_cancel_workload(
        submit(pool), acting_user=pool["lead"], reason="wrong data set", at=T0
    )
    assert transition.reason == "wrong data set" and transition.from_state == "pending"


@pytest.mark.parametrize("who", ["submitter", "lead", "admin"])
def test_the_submitter_a_lead_or_an_admin_may_cancel(pool: dict, who: str) -> None:
    do_cancel_workload(submit(pool), acting_user=pool[who], at=T0)
    assert Workload.objects.get().state == "cancelled"


@pytest.mark.parametrize("who", ["colleague", "outsider"])
def test_a_colleague_or_an_outsider_may_not_cancel(pool: dict, who: str) -> None:
    with pytest.raises(PermissionDenied):
        do_cancel_workload(submit(pool), acting_user=pool[who], at=T0)
    workload = Workload.objects.get()
    assert workload.state == "pending" and workload.transitions.count() == 1


def test_finished_work_cannot_be_cancelled(pool: dict) -> None:
    workload = run(submit(pool))
    do_transition_workload(workload, "succeeded", reason="done", at=T0 + timedelta(hours=1))
    with pytest.raises(ValidationError) as error:
        do_cancel_workload(workload, acting_user=None, at=T0 + timedelta(hours=2))
    assert "state" in error.value.message_dict
