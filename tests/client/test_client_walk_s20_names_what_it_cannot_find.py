"""From a walk of the real Kubernetes path (s20), against a live test server: a name the API
answers 404 for is named in the client's error (``gpupool nodes drain nosuch`` said only
"gpupool: Not found."); ``gpupool why`` of pods gpupool will not schedule (a queue of another
tenant, a malformed annotation: no workload) says they are refused and why, as the My
workloads page does; and ``gpupool why`` shows the last checkpoint, and each move's state once."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from client_cli import run
from django.utils import timezone
from domain_builders import node
from two_teams import Pool, two_teams

from gpupool.api.actions import do_issue_token
from gpupool.control.choices import CycleStatus
from gpupool.control.models import SchedulingCycle
from gpupool.inventory.models import Node
from gpupool.workloads.actions import (
    PlacementSpec,
    PodSetSpec,
    do_submit_workload,
    do_transition_workload,
)
from gpupool.workloads.models import Workload

pytestmark = pytest.mark.django_db(transaction=True)

REFUSAL = (
    'gpupool will not schedule these pods: gpupool.io/queue: "vision-train" belongs to tenant '
    "vision, not to nlp, which owns namespace nlp"
)


@pytest.fixture
def pool(live_client: Any) -> Pool:
    """Teams nlp (member max) and vision, admin ada, one 8-GPU node n1; the client talks to
    the live server as max."""
    made = two_teams(
        lambda h100: node("n1", h100, gpus=8), ("fin", "lena", "max", "vera"), admins=("ada",)
    )
    live_client(made.users["max"])
    return made


def as_admin(pool: Pool, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUPOOL_TOKEN", do_issue_token(pool.users["ada"]).key)


def test_a_node_that_does_not_exist_is_named(pool: Pool, monkeypatch: pytest.MonkeyPatch) -> None:
    as_admin(pool, monkeypatch)
    for verb in ("drain", "end-drain"):
        status, _, err = run("nodes", verb, "nosuch")
        assert status == 1 and err == "gpupool: Not found: no node nosuch.\n", (verb, err)
    status, _, err = run("nodes", "drain", "nosuch", "--json")
    error = json.loads(err)["error"]  # the API's error object, as the server sent it
    assert status == 1 and (error["status"], error["code"]) == (404, "not_found")


def test_a_workload_or_request_that_does_not_exist_is_named(
    pool: Pool, monkeypatch: pytest.MonkeyPatch
) -> None:
    status, _, err = run("cancel", "nlp/nosuch")
    assert (
        status == 1
        and err == "gpupool: Not found: no workload nlp/nosuch among those you may see.\n"
    )
    status, _, err = run("why", "nlp/nosuch")  # no refused pods of that name either
    assert (
        status == 1
        and err == "gpupool: Not found: no workload nlp/nosuch among those you may see.\n"
    )
    monkeypatch.setenv("GPUPOOL_TOKEN", do_issue_token(pool.users["lena"]).key)  # a lead
    status, _, err = run("request", "withdraw", "9999")
    assert status == 1 and err == "gpupool: Not found: no request #9999 among those you may see.\n"


def test_why_of_refused_pods_says_they_are_refused_and_why(pool: Pool) -> None:
    SchedulingCycle.objects.create(
        started_at=timezone.now(),
        finished_at=timezone.now(),
        status=CycleStatus.SUCCEEDED,
        outcome={
            "refused_pods": {
                "count": 1,
                "workloads": [{"workload": "nlp/bad-queue", "pods": 2, "why": REFUSAL}],
            }
        },
    )
    status, out, err = run("why", "nlp/bad-queue")
    assert status == 1 and out == ""
    assert err == (
        "gpupool: nlp/bad-queue is not a workload: the 2 pods waiting under that name are "
        'refused: gpupool.io/queue: "vision-train" belongs to tenant vision, not to nlp, which '
        "owns namespace nlp\n"
    )
    status, _, err = run("why", "nlp/bad-queue", "--json")  # the API's 404, as sent
    assert status == 1 and json.loads(err)["error"]["code"] == "not_found"


def test_why_shows_the_last_checkpoint_and_each_move_s_state_once(pool: Pool) -> None:
    workload = do_submit_workload(
        "ckpt",
        queue=pool.nlp_queue,
        pod_sets=[PodSetSpec(count=1, gpus=8, flavor=pool.h100)],
        submitter=pool.users["max"],
    )
    pod = PlacementSpec("main", 0, Node.objects.get(name="n1"), list(range(8)))
    do_transition_workload(
        workload, "admitted", reason="admitted: quota and capacity allow it", placements=[pod]
    )
    do_transition_workload(workload, "running", reason="its pods run")
    checkpoint = (timezone.now() - timedelta(minutes=5)).replace(second=0, microsecond=0)
    Workload.objects.filter(pk=workload.pk).update(last_checkpoint_at=checkpoint)
    status, out, err = run("why", "nlp/ckpt")
    assert status == 0, err
    assert f"Last checkpoint: {checkpoint:%Y-%m-%d %H:%M} UTC" in out
    assert "pending -> admitted: quota and capacity allow it\n" in out
    assert "admitted: admitted" not in out
