"""Walk-through s18: a workload's detail in the API (``GET /api/v1/workloads/<ns>/<name>/``)
says each of its preemptions as the Preemptions API does -- one serializer -- so a drain's
victim reads which node was drained, by whom and why in its ``drains`` (and the victim's
``nodes``), as its page says it; a team lead sees that for their team's work, with another
team's preemptor still unnamed; and the drains of all its preemptions take one query."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from two_teams import submit

from gpupool.accounting.actions import do_record_preemption
from gpupool.inventory.actions import do_drain_node
from gpupool.inventory.models import Node
from gpupool.workloads.actions import PlacementSpec, do_transition_workload
from gpupool.workloads.models import Workload

DETAIL = "/api/v1/workloads/nlp/train/"


def run_on(pool: Any, name: str, node: str, queue: Any = None, by: str = "max") -> Workload:
    """An 8-GPU workload, admitted and running on ``node``."""
    workload = submit(pool, name, queue or pool.nlp_queue, by)
    pod = PlacementSpec("main", 0, Node.objects.get(name=node), list(range(8)))
    do_transition_workload(workload, "admitted", reason="fits", placements=[pod])
    do_transition_workload(workload, "running", reason="its pods run")
    return workload


def drain(pool: Any, name: str, reason: str) -> None:
    do_drain_node(Node.objects.get(name=name), acting_user=pool.users["ada"], reason=reason)


def evict_for_drain(workload: Workload) -> Any:
    """The loop's eviction of ``workload`` for a drain, recorded with the nodes it ran on."""
    return do_record_preemption(
        workload, reason="admin", at=timezone.now(), gpus_freed=8, lost_gpu_hours=1
    )


def test_a_drain_victims_detail_names_the_node_who_drained_it_and_why(
    pool: Any, page_as: Any
) -> None:
    workload = run_on(pool, "train", "n1")
    drain(pool, "n2", "rack move")  # same flavor, not where it ran
    drain(pool, "n1", "swap PSU")
    event = evict_for_drain(workload)
    client = page_as("max")
    [said] = client.get(DETAIL).json()["preemptions"]
    assert said["nodes"] == ["n1"]
    assert [(d["node"], d["drained_by"], d["reason"]) for d in said["drains"]] == [
        ("n1", "ada", "swap PSU")
    ]
    # The same event, field for field, as the Preemptions API says it.
    assert said == client.get(f"/api/v1/preemptions/{event.pk}/").json()
    [row] = client.get("/api/v1/preemptions/").json()["results"]
    assert said == row


def test_a_lead_sees_their_teams_drain_and_not_another_teams_preemptor(
    pool: Any, page_as: Any
) -> None:
    workload = run_on(pool, "train", "n1")
    preemptor = submit(pool, "vis-reclaim", pool.vision_queue, "vic")
    do_record_preemption(
        workload,
        reason="reclaim",
        at=timezone.now(),
        gpus_freed=8,
        lost_gpu_hours=Decimal("0.5"),
        preemptor=preemptor,
    )
    drain(pool, "n1", "swap PSU")
    evict_for_drain(workload)
    answer = page_as("lena").get(DETAIL)
    assert answer.status_code == 200
    reclaim, evicted = sorted(answer.json()["preemptions"], key=lambda e: e["reason"] != "reclaim")
    assert [(d["node"], d["drained_by"], d["reason"]) for d in evicted["drains"]] == [
        ("n1", "ada", "swap PSU")
    ]
    assert (reclaim["preemptor_tenant"], reclaim["preemptor"], reclaim["preemptor_owner"]) == (
        "vision",
        None,
        None,
    )
    assert reclaim["drains"] == []
    body = answer.content.decode()
    assert "vis-reclaim" not in body and '"vic"' not in body  # its name, its owner
    # The other team's lead does not see nlp's work at all; an admin sees every name.
    assert page_as("vera").get(DETAIL).status_code == 404
    named = page_as("ada").get(DETAIL).json()["preemptions"]
    assert {e["preemptor"] for e in named} == {None, "vision/vis-reclaim"}


def test_the_drains_of_all_its_preemptions_take_one_query(pool: Any, page_as: Any) -> None:
    workload = run_on(pool, "train", "n1")
    drain(pool, "n1", "swap PSU")
    evict_for_drain(workload)
    client = page_as("max")
    client.get(DETAIL)  # the session and caches warmed
    with CaptureQueriesContext(connection) as one:
        client.get(DETAIL)
    for _ in range(3):
        evict_for_drain(workload)
    with CaptureQueriesContext(connection) as four:
        events = client.get(DETAIL).json()["preemptions"]
    assert len(events) == 4 and all(e["drains"] for e in events)
    assert len(four.captured_queries) == len(one.captured_queries)
