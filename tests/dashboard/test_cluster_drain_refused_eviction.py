"""A draining node whose workload's eviction a PodDisruptionBudget refused (the control loop
keeps it on the row, ``Workload.eviction_refusal``, and asks again after the back-off): the
Cluster page's Health column, its state badge and its draining panel, and the nodes API's
``health``, say the eviction was refused and that it keeps running -- not "its workloads are
being evicted", which stays the words of a drain nobody refused. The panel (admins) words
each refusal as the workload page does, one partial for both."""

from __future__ import annotations

import html
import re
from typing import Any

from dashboard_pages import text
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from domain_builders import node

from gpupool.control.actions import do_record_apply_outcome
from gpupool.inventory.actions import do_drain_node
from gpupool.inventory.models import Node
from gpupool.workloads.actions import (
    PlacementSpec,
    PodSetSpec,
    do_submit_workload,
    do_transition_workload,
)
from gpupool.workloads.models import Workload

PLAIN = "draining: its workloads are being evicted"


def running_on(pool: Any, name: str, on: str, gpus: list[int]) -> Workload:
    """An nlp workload of one pod on node ``on``'s GPUs ``gpus``, running."""
    workload = do_submit_workload(
        name,
        queue=pool.nlp_queue,
        pod_sets=[PodSetSpec(count=1, gpus=len(gpus), flavor=pool.h100)],
        submitter=pool.users["max"],
    )
    placed = [PlacementSpec("main", 0, Node.objects.get(name=on), gpus)]
    do_transition_workload(workload, "admitted", reason="fits", placements=placed)
    do_transition_workload(workload, "running", reason="its pods run")
    return workload


def refuse(workload: Workload, node_name: str = "n2") -> None:
    """The loop's record of a drain's eviction of ``workload`` that ``nlp/guard`` refused."""
    Workload.objects.filter(pk=workload.pk).update(eviction_reason="admin")
    at = timezone.now()
    do_record_apply_outcome(
        at=at,
        bind_failed={},
        refused={workload.pk: "refused"},
        refusals={
            workload.pk: {
                "at": at.isoformat(),
                "budget": "nlp/guard",
                "needs": "1 healthy pods and has 1 currently",
                "reason": "admin",
                "nodes": [node_name],
                "detail": "Eviction (a drain) refused by PodDisruptionBudget nlp/guard",
            }
        },
    )


def drain(pool: Any, name: str = "n2") -> None:
    do_drain_node(Node.objects.get(name=name), acting_user=pool.users["ada"], reason="RMA")


def health_of(page: str, name: str) -> str:
    """The Health cell of node ``name``'s row on the Cluster page, as text: its reasons, the
    note under them of who drained it and why left out (``test_cluster_says_why_a_node_is_
    cordoned``)."""
    row = page.split(f'<tr id="node-{name}">', 1)[1].split("</tr>", 1)[0]
    cells = re.findall(r"<td>(.*?)</td>", row, flags=re.S)
    reasons = re.sub(r'<div class="cordon-note">.*?</div>', "", cells[2], flags=re.S)
    return html.unescape(re.sub(r"<[^>]+>", " ", reasons))


def sentence(page: str, marker: str) -> str:
    """The refusal's sentence (the shared partial) after ``marker``, tags and spaces folded."""
    part = page.split(marker, 1)[1]
    part = part.split("eviction refused</span>", 1)[1].split("while it still wants it evicted.")[0]
    return " ".join(re.sub(r"<[^>]+>", "", html.unescape(part)).split())


def test_a_node_whose_only_workload_was_refused_is_not_said_to_be_evicting(
    pool: Any, page_as: Any
) -> None:
    guarded = running_on(pool, "guarded", "n2", list(range(8)))
    drain(pool)
    refuse(guarded)
    page = text(page_as("ada").get("/cluster/"))
    health = health_of(page, "n2")
    assert "being evicted" not in health.replace("nothing here is being evicted now", "")
    assert (
        "draining: a PodDisruptionBudget refused the eviction of its workload: it keeps "
        "running, and gpupool asks again after the refusal's back-off; nothing here is being "
        "evicted now"
    ) in " ".join(health.split())
    assert PLAIN not in page
    badge = page.split('<tr id="node-n2">', 1)[1].split("</td>", 1)[0]  # its title
    assert "refused the eviction of its workload" in html.unescape(badge)
    # The admin's panel names the workload, with the workload page's own sentence.
    panel = page.split("data-drain-refused", 1)[1].split("</ul>", 1)[0]
    assert 'href="/workloads/nlp/guarded/"' in panel
    said = sentence(page, "data-drain-refused")
    assert said.startswith("At ") and "PodDisruptionBudget nlp/guard refused its eviction" in said
    assert "for a drain (node n2): it needs 1 healthy pods and has 1 currently" in said
    own = text(page_as("ada").get("/workloads/nlp/guarded/"))
    assert sentence(own, "data-eviction-refused") == said
    assert "Nothing here is being evicted now" in page


def test_a_node_with_others_still_evicting_says_both(pool: Any, page_as: Any) -> None:
    guarded = running_on(pool, "guarded", "n2", [0, 1, 2, 3])
    running_on(pool, "plain", "n2", [4, 5, 6, 7])
    drain(pool)
    refuse(guarded)
    health = " ".join(health_of(text(page_as("max").get("/cluster/")), "n2").split())
    assert health == (
        "draining: its workloads are being evicted, but a PodDisruptionBudget refused the "
        "eviction of 1 of them: it keeps running, and gpupool asks again after the refusal's "
        "back-off"
    )
    panel = text(page_as("ada").get("/cluster/"))
    assert "1 workload here is being evicted; a PodDisruptionBudget refused the eviction of " in (
        panel
    )
    assert "data-drain-refused" not in text(page_as("max").get("/cluster/"))  # admins only


def test_a_drain_nobody_refused_keeps_its_words(pool: Any, page_as: Any) -> None:
    running_on(pool, "plain", "n2", list(range(8)))
    drain(pool)
    page = text(page_as("ada").get("/cluster/"))
    assert PLAIN in health_of(page, "n2") and "data-drain-refused" not in page


def test_the_nodes_api_says_the_refusal_and_reads_it_once_for_many_draining_nodes(
    pool: Any, page_as: Any
) -> None:
    guarded = running_on(pool, "guarded", "n2", list(range(8)))
    drain(pool)
    refuse(guarded)
    client = page_as("max")
    one = client.get("/api/v1/nodes/n2/").json()["health"]
    assert one[0].startswith("draining: a PodDisruptionBudget refused the eviction of its")
    listed = {row["name"]: row["health"] for row in client.get("/api/v1/nodes/").json()["results"]}
    assert listed["n2"] == one
    with CaptureQueriesContext(connection) as few:
        client.get("/api/v1/nodes/")
    for index in range(4):
        node(f"d{index}", pool.h100, gpus=8)
        running_on(pool, f"w{index}", f"d{index}", list(range(8)))
        drain(pool, f"d{index}")
    with CaptureQueriesContext(connection) as many:
        rows = client.get("/api/v1/nodes/").json()["results"]
    assert len(many) == len(few)
    assert {row["name"]: row["health"][0] for row in rows if row["name"].startswith("d")} == {
        f"d{index}": PLAIN for index in range(4)
    }
