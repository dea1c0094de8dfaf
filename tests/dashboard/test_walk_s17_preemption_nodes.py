"""Walk-through s17: a preemption keeps the nodes its victim ran on (``PreemptionEvent.nodes``,
written with the loop's bulk record of evictions, one query a cycle), so a drain victim names
its own node's drain -- which node, who drained it, why -- on its page, on the Preemptions
page and its CSV, in the API and in its summary (``gpupool why``), never another drained node
of the same flavor. And a team lead's Preemptions list shows the preemptions their team's work
caused, as the churn table counts them, naming the other team's victim only as "a workload of
team nlp"."""

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
from gpupool.accounting.models import PreemptionEvent
from gpupool.control.actions import do_record_cycle
from gpupool.control.record import CycleRecord, EvictionRecord
from gpupool.inventory.actions import do_drain_node
from gpupool.inventory.models import Node
from gpupool.workloads.actions import PlacementSpec, do_transition_workload
from gpupool.workloads.choices import Origin
from gpupool.workloads.models import Workload
from gpupool.workloads.queries import preempted_summary

N1_DRAIN = "for the drain of node n1, drained by ada: swap PSU"


def run_on(pool: Any, name: str, node: str, queue: Any = None, by: str = "max") -> Workload:
    """An 8-GPU workload, admitted and running on ``node``."""
    workload = submit(pool, name, queue or pool.nlp_queue, by)
    pod = PlacementSpec("main", 0, Node.objects.get(name=node), list(range(8)))
    do_transition_workload(workload, "admitted", reason="fits", placements=[pod])
    do_transition_workload(workload, "running", reason="its pods run")
    return workload


def drain(pool: Any, name: str, reason: str) -> None:
    do_drain_node(Node.objects.get(name=name), acting_user=pool.users["ada"], reason=reason)


def drain_record(*victims: Workload) -> CycleRecord:
    """What the loop decides when it evicts ``victims`` for a drain (reason ``admin``), with
    the nodes it knows they run on."""
    return CycleRecord(
        at=timezone.now(),
        evictions=[
            EvictionRecord(
                v.pk,
                v.qualified_name(),
                "admin",
                None,
                Decimal(8),
                Decimal(1),
                tuple(sorted(v.placements.values_list("node__name", flat=True))),
            )
            for v in victims
        ],
    )


def write(record: CycleRecord) -> None:
    """What the loop writes for it."""
    do_record_cycle(record, started_at=record.at, nodes=2, workloads=len(record.evictions))


def record_drain_evictions(*victims: Workload) -> None:
    write(drain_record(*victims))


def test_the_victims_nodes_are_recorded_without_a_query_of_their_own(pool: Any) -> None:
    one = run_on(pool, "one", "n1")
    decided = drain_record(one)
    with CaptureQueriesContext(connection) as single:
        write(decided)
    do_transition_workload(one, "preempted", reason="evicted (admin)")  # its pods gone
    two, three = run_on(pool, "two", "n2"), run_on(pool, "three", "n1")
    decided = drain_record(two, three)
    with CaptureQueriesContext(connection) as double:
        write(decided)
    nodes = dict(PreemptionEvent.objects.values_list("victim__name", "nodes"))
    assert nodes == {"one": ["n1"], "two": ["n2"], "three": ["n1"]}
    assert len(double.captured_queries) == len(single.captured_queries)


def test_a_drain_victim_names_its_own_node_not_another_drained_node_of_its_flavor(
    pool: Any, page_as: Any
) -> None:
    workload = run_on(pool, "train", "n1")
    drain(pool, "n2", "rack move")  # same flavor, not where it ran
    drain(pool, "n1", "swap PSU")
    record_drain_evictions(workload)
    do_transition_workload(workload, "preempted", reason="evicted (admin)")
    page = text(page_as("max").get("/workloads/nlp/train/"))
    said = re.findall(r"<span data-drain>(.*?)</span>", page)
    assert said == [N1_DRAIN, N1_DRAIN], said  # the timeline and "Who preempted it"
    assert "rack move" not in page


def test_the_preemptions_page_its_csv_and_the_api_say_which_node_who_and_why(
    pool: Any, page_as: Any
) -> None:
    workload = run_on(pool, "train", "n1")
    drain(pool, "n2", "rack move")
    drain(pool, "n1", "swap PSU")
    record_drain_evictions(workload)
    client = page_as("lena")
    page = text(client.get("/preemptions/"))
    assert re.findall(r"<span data-drain>(.*?)</span>", page) == [N1_DRAIN]
    [row] = client.get("/api/v1/preemptions/").json()["results"]
    assert row["nodes"] == ["n1"]
    assert [(d["node"], d["drained_by"], d["reason"]) for d in row["drains"]] == [
        ("n1", "ada", "swap PSU")
    ]
    answer = client.get("/api/v1/preemptions/?format=csv")
    lines = b"".join(answer.streaming_content).decode().splitlines()
    header, line = lines[0].split(","), lines[1]
    assert header[-2:] == ["nodes", "drains"]
    assert "n1" in line and "swap PSU" in line and "rack move" not in line


def test_an_old_event_without_nodes_keeps_the_old_wording(pool: Any, page_as: Any) -> None:
    workload = run_on(pool, "train", "n1")
    drain(pool, "n1", "swap PSU")
    do_record_preemption(
        workload, reason="admin", at=timezone.now(), gpus_freed=8, lost_gpu_hours=1, nodes=[]
    )
    page = text(page_as("lena").get("/preemptions/"))
    assert "admin (drain or manual eviction)" in page
    assert "data-drain" not in page  # the list does not guess a drain for an old event


def test_the_summary_of_a_drained_bare_pod_says_which_node_who_and_why(pool: Any) -> None:
    workload = run_on(pool, "pod", "n1")
    Workload.objects.filter(pk=workload.pk).update(origin=Origin.BARE)
    drain(pool, "n2", "rack move")
    drain(pool, "n1", "swap PSU")
    record_drain_evictions(workload)
    do_transition_workload(workload, "preempted", reason="evicted (admin)")
    workload = Workload.objects.get(pk=workload.pk)
    said = preempted_summary(workload)
    assert f" {N1_DRAIN}. A bare pod is gone once evicted" in said, said
    assert "rack move" not in said


def test_a_lead_sees_the_preemptions_their_teams_work_caused_without_the_victims_name(
    pool: Any, page_as: Any
) -> None:
    victim = run_on(pool, "mig-nlp-5", "n1")
    preemptor = submit(pool, "vis-reclaim2", pool.vision_queue, "vic")
    do_record_preemption(
        victim,
        reason="reclaim",
        at=timezone.now(),
        gpus_freed=8,
        lost_gpu_hours=Decimal("0.5"),
        preemptor=preemptor,
    )
    page = text(page_as("vera").get("/preemptions/"))
    churn = re.search(r"<td>vision</td>(.*?)</tr>", page)
    assert churn is not None
    caused = re.findall(r'<td class="number">([^<]*)</td>', churn.group(1))[-1]
    listed = page.split('id="history-title"')[1].split("</table>")[0]
    assert listed.count("<td data-side=") == int(caused) == 1
    assert 'data-side="caused"' in listed and "team vision's work caused it" in listed
    assert "a workload of team nlp" in listed
    assert "mig-nlp-5" not in page and "/workloads/nlp/" not in page
    assert "vision/vis-reclaim2" in listed  # its own work, named
    # nlp's lead sees the same event as their work stopped, with the preemptor unnamed.
    nlp_page = text(page_as("lena").get("/preemptions/"))
    assert 'data-side="suffered"' in nlp_page and "nlp/mig-nlp-5" in nlp_page
    assert "vis-reclaim2" not in nlp_page
