"""Walk-through s16: work evicted by a node's drain says so on its page -- which node was
drained, who drained it and why (the drain's audit row: the node keeps only when it was
asked), in the timeline's "evicted (admin)" row and in "Who preempted it" -- read in one
query for the page (``workloads.queries.eviction_drains``). A drain that ended before the
eviction, or that was under way before the workload was placed (a draining node is
cordoned), is not named."""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Any

from dashboard_pages import text
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from two_teams import submit

from gpupool.accounting.actions import do_record_preemption
from gpupool.inventory.actions import do_drain_node, do_end_drain
from gpupool.inventory.models import Node
from gpupool.workloads.actions import PlacementSpec, do_transition_workload
from gpupool.workloads.models import Workload

N2_DRAIN = "for the drain of node n2, drained by ada: firmware update"


def run_on(pool: Any, name: str, node: str) -> Workload:
    """max's 8-GPU workload, admitted and running on ``node``."""
    workload = submit(pool, name, pool.nlp_queue, "max")
    pod = PlacementSpec("main", 0, Node.objects.get(name=node), list(range(8)))
    do_transition_workload(workload, "admitted", reason="fits", placements=[pod])
    do_transition_workload(workload, "running", reason="its pods run")
    return workload


def evict(workload: Workload, reason: str = "admin") -> None:
    """What the control loop records when it evicts the workload and requeues it."""
    do_record_preemption(
        workload, reason=reason, at=timezone.now(), gpus_freed=8, lost_gpu_hours=Decimal(1)
    )
    do_transition_workload(workload, "preempted", reason=f"evicted ({reason})")
    do_transition_workload(workload, "pending", reason="requeued after its eviction")


def drain(name: str, by: Any, reason: str) -> None:
    do_drain_node(Node.objects.get(name=name), acting_user=by, reason=reason)


def test_the_page_names_the_drained_node_who_drained_it_and_why(pool: Any, page_as: Any) -> None:
    admin = pool.users["ada"]
    drain("n1", admin, "n1 had been draining since before")  # n1 cordoned: never placed there
    workload = run_on(pool, "train", "n2")
    drain("n2", admin, "firmware update")
    evict(workload)
    page = text(page_as("max").get("/workloads/nlp/train/"))
    timeline = re.search(r"evicted \(admin\)<br><span data-drain>(.*?)</span>", page)
    assert timeline is not None, page
    assert timeline.group(1) == N2_DRAIN
    table = re.search(r"admin \(drain or manual eviction\)<br><span data-drain>(.*?)</span>", page)
    assert table is not None and table.group(1) == N2_DRAIN
    assert "node n1" not in page


def test_a_drain_ended_before_the_eviction_explains_nothing(pool: Any, page_as: Any) -> None:
    admin = pool.users["ada"]
    workload = run_on(pool, "train", "n2")
    drain("n2", admin, "firmware update")
    do_end_drain(Node.objects.get(name="n2"), acting_user=admin, reason="done early")
    evict(workload)  # the pods were removed some other way
    page = text(page_as("max").get("/workloads/nlp/train/"))
    assert "data-drain" not in page
    assert "evicted (admin)" in page


def test_an_eviction_for_another_reason_reads_no_audit_row(pool: Any, page_as: Any) -> None:
    drain("n2", pool.users["ada"], "firmware update")
    workload = run_on(pool, "train", "n1")
    evict(workload, "budget")
    with CaptureQueriesContext(connection) as read:
        page = text(page_as("max").get("/workloads/nlp/train/"))
    assert "data-drain" not in page
    assert not [q for q in read.captured_queries if "audit_auditevent" in q["sql"]]


def test_the_drains_are_read_in_one_query_however_many_evictions(pool: Any, page_as: Any) -> None:
    admin = pool.users["ada"]
    workload = run_on(pool, "train", "n2")
    drain("n2", admin, "firmware update")
    evict(workload)
    client = page_as("max")
    with CaptureQueriesContext(connection) as once:
        client.get("/workloads/nlp/train/")
    do_end_drain(Node.objects.get(name="n2"), acting_user=admin)
    for node in ("n1", "n2"):
        workload.refresh_from_db()
        pod = PlacementSpec("main", 0, Node.objects.get(name=node), list(range(8)))
        do_transition_workload(workload, "admitted", reason="fits", placements=[pod])
        do_transition_workload(workload, "running", reason="its pods run")
        drain(node, admin, f"rack move {node}")
        evict(workload)
        do_end_drain(Node.objects.get(name=node), acting_user=admin)
    with CaptureQueriesContext(connection) as thrice:
        page = text(client.get("/workloads/nlp/train/"))
    assert page.count("drained by ada: rack move n1") == 2  # timeline and table
    assert page.count("drained by ada: rack move n2") == 2
    assert page.count(N2_DRAIN) == 2
    audit_reads = [q for q in thrice.captured_queries if "audit_auditevent" in q["sql"]]
    assert len(audit_reads) == 1, audit_reads
    assert len(thrice.captured_queries) == len(once.captured_queries)
