"""The Fragmentation page's "pool's shape" column and domain words, as a tester read them:

- a gang the core set aside as never fitting (``explain.never_fits``) is told its explanation,
  not "no NVLink domain has 16 free together" (defragmenting would not help);
- a gang bound to one domain that waits for quota is still judged against the free GPUs in
  one domain (the page's per-domain table): not "fits" while no domain holds it;
- a gang column's pods add up to the gang (72 GPUs on 16-GPU nodes: 4 x 16 + 1 x 8, not
  5 x 16, which is 80);
- a clique's long id is shown by a short stable name, the full id in a title;
- a flavor whose nodes are each their own domain (no ``nvidia.com/gpu.clique``: PCIe l40s)
  speaks of nodes, not NVLink domains."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from dashboard_pages import live, text
from domain_builders import core_explained, explained, flavor, node, quota

from gpupool.dashboard.blocking import FITS, SHAPE, blocking_shape
from gpupool.inventory.models import Node
from gpupool.inventory.queries import FlavorFragmentation, GangFit
from gpupool.workloads.actions import (
    PlacementSpec,
    PodSetSpec,
    do_submit_workload,
    do_transition_workload,
)

X = "\N{MULTIPLICATION SIGN}"  # as the page writes pods: 2 x 8
CLIQUE_A = "24758309-5d1c-4bde-9a0b-6f0e2c1d7a41.1"
CLIQUE_B = "24758309-5d1c-4bde-9a0b-6f0e2c1d7a41.2"
# What the core says of a 2 x 8 h100 gang bound to one domain where each domain is one 8-GPU
# node (``test_the_page_tells_a_never_fitting_gang_its_explanation`` has it said by the core).
NEVER = (
    "It can never run as asked: it must sit in one NVLink domain, and the largest h100 domain "
    "has 8 healthy GPUs; it asks 16."
)


def figures(free: float, largest: int) -> FlavorFragmentation:
    """A gb200 flavor's figures: ``free`` GPUs, ``largest`` whole GPUs free in one domain."""
    return FlavorFragmentation(
        flavor="gb200",
        nodes=18,
        domains=2,
        healthy_gpus=72,
        free_gpus=free,
        fragmented_gpus=0.0,
        stranded_gpus=0.0,
        largest_gang_gpus=largest,
        gangs=(GangFit(16, 4, 4, 1), GangFit(72, 18, 4, 0)),
    )


def placed(name: str, queue: Any, of: Any, node_name: str, gpus: list[int]) -> None:
    """A workload of ``queue`` admitted onto ``gpus`` of ``node_name``."""
    workload = do_submit_workload(
        name, queue=queue, pod_sets=[PodSetSpec(count=1, gpus=len(gpus), flavor=of)]
    )
    do_transition_workload(
        workload,
        "admitted",
        reason="test",
        placements=[PlacementSpec("main", 0, Node.objects.get(name=node_name), gpus)],
    )


def test_a_domain_gang_waiting_for_quota_is_not_told_it_fits_when_no_domain_holds_it() -> None:
    # vision/dom-big: 8 pods x 4 on gb200, 40 free in all, 24 the most in one domain
    why = blocking_shape(Decimal(32), figures(40, 24), reason="quota", topology="domain")
    assert why.kind == SHAPE
    assert why.text == (
        "This 32-GPU job waits although 40 GPUs are free: no NVLink domain has 32 free "
        "together (the largest free block is 24 GPUs). It waits for its reason (quota) too."
    )
    fits = blocking_shape(Decimal(16), figures(40, 24), reason="quota", topology="domain")
    assert fits.kind == FITS and "waits for its reason (quota)" in fits.text
    # room is being made for it: what is free now is not what it will get
    room = blocking_shape(
        Decimal(32), figures(40, 24), reason="waiting-for-preemption", topology="domain"
    )
    assert room.kind == FITS and "waits for its reason (waiting-for-preemption)" in room.text


def test_a_gang_that_never_fits_is_told_its_explanation_not_the_shape() -> None:
    why = blocking_shape(
        Decimal(16), figures(63, 8), reason="topology", topology="domain", never=NEVER
    )
    assert (why.kind, why.text, why.gang_size) == ("never", NEVER, None)


def test_a_flavor_without_nvlink_speaks_of_nodes() -> None:
    why = blocking_shape(Decimal(16), figures(20, 8), topology="domain", nvlink=False)
    assert why.kind == SHAPE
    assert "no node has 16 free together" in why.text and "NVLink" not in why.text


def test_a_gang_columns_pods_add_up_to_the_gang() -> None:
    from gpupool.dashboard.blocking import gang_pods  # (new: imported here, not for all)

    assert gang_pods(GangFit(72, 5, 16, 0)) == f"4 {X} 16 + 1 {X} 8"
    assert gang_pods(GangFit(72, 18, 4, 1)) == f"18 {X} 4"
    assert gang_pods(GangFit(2, 1, 2, 3)) == f"1 {X} 2"


def test_the_page_tells_a_never_fitting_gang_its_explanation(pool: Any, page_as: Any) -> None:
    node("n3", pool.h100, gpus=8)  # 23 GPUs free, 8 the most on one node (its own domain)
    big = do_submit_workload(
        "dom-big",
        queue=pool.nlp_queue,
        pod_sets=[PodSetSpec(count=2, gpus=8, flavor=pool.h100)],
        topology="domain",
        submitter=pool.users["max"],
    )
    never = core_explained(big)  # the core's reason, sentence and facts, as a cycle writes them
    assert (never.reason, never.detail) == ("topology", NEVER), never
    assert never.facts["never_fits"] and never.facts["largest_domain_gpus"] == 8, never
    page = text(live(page_as("max"), "/fragmentation/"))
    blocked = page.split('id="blocked-title"', 1)[1]
    assert '<span class="badge danger">never fits</span>' in blocked
    assert NEVER in blocked
    assert "free together" not in blocked and "waits although" not in blocked


def test_the_page_names_cliques_shortly_and_judges_domain_gangs_by_the_table(
    pool: Any, page_as: Any
) -> None:
    gb200 = flavor("gb200")
    quota(pool.vision_queue, gb200, 0, 16, 16)
    for name, clique in (("g1", CLIQUE_A), ("g2", CLIQUE_A), ("g3", CLIQUE_B), ("g4", CLIQUE_B)):
        node(name, gb200, gpus=4, nvlink_domain=clique)
    placed("a", pool.vision_queue, gb200, "g1", [0, 1])  # domain A: 6 free
    placed("b", pool.vision_queue, gb200, "g4", [0, 1, 2, 3])  # domain B: 4 free
    gang = do_submit_workload(
        "dom-big",
        queue=pool.vision_queue,
        pod_sets=[PodSetSpec(count=2, gpus=4, flavor=gb200)],
        topology="domain",
    )
    explained(gang, "quota", "Queue vision has 0 gb200 GPUs of quota available, 8 asked.")
    page = text(live(page_as("ada"), "/fragmentation/?flavor=gb200"))
    table = page.split("Per NVLink domain", 1)[1].split("</table>", 1)[0]
    assert f'<span title="{CLIQUE_A}">g1 and 1 more node</span>' in table
    assert f'<span title="{CLIQUE_B}">g3 and 1 more node</span>' in table
    assert "g2 GPU 0 (domain g1 and 1 more node): free" in page  # the hover, the same name
    assert "in 2 of 2 NVLink domains" in page
    blocked = page.split('id="blocked-title"', 1)[1]
    assert (
        "This 8-GPU job waits although 10 GPUs are free: no NVLink domain has 8 free together "
        "(the largest free block is 6 GPUs). It waits for its reason (quota) too."
    ) in blocked
    assert "not for the pool&#x27;s shape" not in blocked


def test_the_page_counts_a_pcie_flavors_nodes_not_nvlink_domains(pool: Any, page_as: Any) -> None:
    l40s = flavor("l40s")
    node("p1", l40s, gpus=4)
    node("p2", l40s, gpus=4)
    page = text(live(page_as("ada"), "/fragmentation/?flavor=l40s"))
    card = page.split("Free (of", 1)[1].split("</div>", 1)[0]
    assert "on 2 of 2 nodes (the table below)" in card and "NVLink" not in card
    assert "Per node, each its own domain" in page and "Per NVLink domain" not in page
    assert "Largest gang on one node" in page


def test_the_page_writes_a_72_gpu_gang_of_16_gpu_nodes_as_pods_adding_up_to_72(
    pool: Any, page_as: Any
) -> None:
    a100 = flavor("a100")
    for index in range(5):  # 80 GPUs in one NVLink domain: it holds a gang of 72
        node(f"a{index}", a100, gpus=16, nvlink_domain="nvl-a")
    page = text(live(page_as("ada"), "/fragmentation/?flavor=a100"))
    pods = page.split("As pods of", 1)[1].split("</tr>", 1)[0]
    assert f"4 {X} 16 + 1 {X} 8" in pods
    assert f"5 {X} 16" not in pods
