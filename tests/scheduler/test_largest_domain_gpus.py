"""One rule for the largest NVLink domain of a flavor (``ClusterState.largest_domain_gpus``):
the sound GPUs of its nodes summed per domain, the most of any domain. Cordoned nodes and
other schedulers' GPUs count (they come back), unhealthy GPUs do not. The core judges a gang
bound to one domain "never fits" against it, and the Fragmentation page lists the gang sizes
up to it: both read this one function, so they cannot disagree."""

from __future__ import annotations

from gpupool.inventory.queries import flavor_fragmentation
from gpupool.number_formats import listed
from gpupool.scheduler.statement import ClusterState
from gpupool.scheduler.types import NodeInfo

CPU, MEMORY = 128_000, 1_048_576


def _pool() -> tuple[NodeInfo, ...]:
    return (
        # h100 domain "a": two nodes of 8, one cordoned, one with two broken GPUs -> 8 + 6
        NodeInfo("a1", "h100", 8, CPU, MEMORY, "a", cordoned=True),
        NodeInfo("a2", "h100", 8, CPU, MEMORY, "a", frozenset({0, 1})),
        # h100 domain "b": one node of 8, half of it another scheduler's -> 8
        NodeInfo("b1", "h100", 8, CPU, MEMORY, "b", foreign_gpus=frozenset({0, 1, 2, 3})),
        # gb200: two domains of 4-GPU nodes, three nodes and one node -> 12 and 4
        *(NodeInfo(f"g{i}", "gb200", 4, CPU, MEMORY, "rack1") for i in range(3)),
        NodeInfo("g9", "gb200", 4, CPU, MEMORY, "rack2", frozenset({0, 1, 2, 3})),
    )


def test_largest_domain_counts_cordoned_and_foreign_gpus_but_not_unhealthy_ones() -> None:
    assert ClusterState(_pool()).largest_domain_gpus() == {"h100": 14, "gb200": 12}


def test_largest_domain_of_an_empty_pool_is_none() -> None:
    assert ClusterState(()).largest_domain_gpus() == {}


def test_the_fragmentation_report_says_the_cores_largest_domain() -> None:
    cluster = ClusterState(_pool())
    report = {f.flavor: f.largest_domain_gpus for f in flavor_fragmentation(cluster, {})}
    assert report == cluster.largest_domain_gpus()


def test_listed_says_a_list_as_a_sentence() -> None:
    assert [listed(()), listed([1]), listed([1, 2]), listed([1, 2, 4, 8])] == [
        "",
        "1",
        "1 and 2",
        "1, 2, 4 and 8",
    ]
