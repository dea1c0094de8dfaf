"""The Fragmentation page: every GPU by NVLink domain and node, coloured by the tenant that
holds it, and per flavor the free, fragmented and stranded GPUs and the gangs that fit now,
from the core's view of the pool (the figures the API serves)."""

from __future__ import annotations

from typing import Any

from dashboard_pages import live, rows, text
from domain_builders import flavor, node, priority_class, user

from gpupool.inventory.actions import do_set_node_cordoned
from gpupool.inventory.models import Node
from gpupool.quotas.models import PriorityClass
from gpupool.workloads.actions import (
    PlacementSpec,
    PodSetSpec,
    do_submit_workload,
    do_transition_workload,
)


def running(pool: Any, name: str, queue: Any, node_name: str, gpus: list[int]) -> None:
    """A workload of ``queue`` admitted onto ``gpus`` of ``node_name``."""
    workload = do_submit_workload(
        name, queue=queue, pod_sets=[PodSetSpec(count=1, gpus=len(gpus), flavor=pool.h100)]
    )
    do_transition_workload(
        workload,
        "admitted",
        reason="test",
        placements=[PlacementSpec("main", 0, Node.objects.get(name=node_name), gpus)],
    )


def test_each_gpu_is_coloured_by_the_tenant_holding_it_and_summed_per_domain(
    pool: Any, page_as: Any
) -> None:
    running(pool, "train", pool.nlp_queue, "n2", [0, 1, 2, 3])
    running(pool, "eval", pool.vision_queue, "n2", [4, 5])
    page = text(page_as("vic").get("/fragmentation/"))
    assert 'id="gpu-heatmap-figure"' in page
    assert "n2 GPU 0 (domain n2): nlp 1 GPU" in page
    assert "n1 GPU 3 (domain n1): broken: XID 79" in page
    table = rows(page.split("Per node", 1)[1])  # each node its own domain: no NVLink
    n2 = table.split("<td>n2</td>", 1)[1].split("</tr>", 1)[0]
    assert "nlp 4 GPUs, vision 2 GPUs" in n2
    assert '<td class="number">2</td>' in n2  # two free
    # the legend counts what the heatmap shows: 9 free (7 on n1, 2 on n2), one broken
    assert 'free <span class="muted">(9)</span>' in page
    assert 'broken <span class="muted">(1)</span>' in page
    # no workload's name reaches another tenant: tenants see each other at the queue level
    assert "train" not in page and "eval" not in page


def test_the_figures_say_how_many_gangs_of_each_size_fit_in_one_domain(
    pool: Any, page_as: Any
) -> None:
    running(pool, "train", pool.nlp_queue, "n2", [0, 1, 2, 3])
    part = text(live(page_as("ada"), "/fragmentation/"))
    assert "<html" not in part
    # free: 7 on n1 (one broken) + 4 on n2; the largest gang inside one domain is n1's 7
    assert "11 GPUs" in part and "7 GPUs" in part
    gangs = part.split("How many fit at once", 1)[1].split("</tr>", 1)[0]
    # 1 GPU: 11; 2: 3 + 2; 4: 1 + 1; 8: none; no gang of 16 or 72: no node (each its own
    # domain) could ever hold one
    cells = [cell.split("<", 1)[0] for cell in gangs.split('<td class="number">')[1:]]
    assert cells == ["11", "5", "2", ""]
    assert gangs.count("none") == 1
    assert 'id="gang-16"' not in part and 'id="gang-72"' not in part
    assert "No sample yet" in part


def test_cordoned_nodes_and_other_flavors_show_as_such(pool: Any, page_as: Any) -> None:
    do_set_node_cordoned(Node.objects.get(name="n2"), cordoned=True, acting_user=None)
    gb200 = flavor("gb200")
    for index in range(2):
        node(f"gb-{index}", gb200, gpus=4, nvlink_domain="nvl72-a")
    client = page_as("ada")
    page = text(client.get("/fragmentation/?flavor=h100"))
    assert "n2 GPU 0 (domain n2): on a cordoned node" in page
    assert 'href="?flavor=gb200"' in page
    gb = text(client.get("/fragmentation/?flavor=gb200"))
    assert "<td>nvl72-a</td>" in gb and "gb-0 GPU 3 (domain nvl72-a): free" in gb


def test_a_pool_the_scheduler_cannot_read_says_why(pool: Any, page_as: Any) -> None:
    # A state the actions refuse to make (there is always a default class), made directly.
    PriorityClass.objects.filter(name="normal").update(default=False)
    page = text(page_as("ada").get("/fragmentation/"))
    assert "cannot be read as the scheduler sees it" in page


def test_an_empty_pool_says_where_gpus_come_from(db: Any, client: Any) -> None:
    priority_class("normal", default=True)
    admin = user("root", admin=True)
    client.force_login(admin)
    assert "No GPUs yet" in text(client.get("/fragmentation/"))
