"""A gang bound to one NVLink domain (``topology: domain``) is told the GPUs it could use:
the most free inside one domain, not the flavor's free GPUs scattered over every domain.

The facts come from the cycle (``explain.TOPOLOGY_FACT``, ``explain.IN_ONE_DOMAIN_FACT``);
without them, or when every free GPU lies in one domain anyway, the sentence is as before.
"""

from __future__ import annotations

import pytest
from scheduler_builders import Case, node, queue, run_case, workload

from gpupool.scheduler.explain import IN_ONE_DOMAIN_FACT, TOPOLOGY_FACT, Verdict, explanation
from gpupool.scheduler.types import PendingReason

GANG = {"queue": "team-a", "flavor": "gb200", "pods": 8, "minimum": 8, "free_gpus": 40.0}


@pytest.mark.parametrize(
    ("reason", "facts", "detail"),
    [
        (
            "fragmentation",
            {**GANG, TOPOLOGY_FACT: "domain", IN_ONE_DOMAIN_FACT: 20.0, "largest_placeable": 5},
            "At most 20 gb200 GPUs are free in one NVLink domain (40 in all), but no set of "
            "nodes holds the gang: at most 5 of its 8 pods fit (minimum 8).",
        ),
        (
            "fragmentation",
            {**GANG, "pods": 1, "minimum": 1, TOPOLOGY_FACT: "domain", IN_ONE_DOMAIN_FACT: 1.0},
            "At most 1 gb200 GPU is free in one NVLink domain (40 in all), but no node has room "
            "for its pod with its CPU and memory.",
        ),
        (
            "topology",
            {**GANG, TOPOLOGY_FACT: "domain", IN_ONE_DOMAIN_FACT: 20.0},
            "No single NVLink domain holds its 8 pods (at most 20 gb200 GPUs are free in one); "
            "it would fit across domains, but it requires one.",
        ),
    ],
    ids=["a gang", "a lone pod", "a gang that would fit across domains"],
)
def test_a_domain_gang_is_told_the_most_free_in_one_nvlink_domain(
    reason: PendingReason, facts: dict[str, object], detail: str
) -> None:
    assert explanation("w", Verdict(reason, facts), 0).detail == detail


@pytest.mark.parametrize(
    "facts",
    [
        {**GANG, "largest_placeable": 5},  # may spread: all free GPUs count
        {**GANG, TOPOLOGY_FACT: "domain", IN_ONE_DOMAIN_FACT: 40.0, "largest_placeable": 5},
    ],
    ids=["a gang that may spread", "every free GPU in one domain"],
)
def test_the_domain_is_said_only_when_it_matters(facts: dict[str, object]) -> None:
    assert explanation("w", Verdict("fragmentation", facts), 0).detail == (
        "40 gb200 GPUs are free in all, but no set of nodes holds the gang: at most 5 of its "
        "8 pods fit (minimum 8)."
    )


def gb200_pool(free_per_node: list[int]) -> list[dict[str, object]]:
    """Two NVLink domains d1, d2 of 4-GPU gb200 nodes (``free_per_node`` per domain, the rest
    of each node held by a running pod), and an 8-GPU h100 node."""
    nodes: list[dict[str, object]] = [node("h1")]
    for domain in ("d1", "d2"):
        for i, _ in enumerate(free_per_node):
            nodes.append(node(f"{domain}-n{i}", gpus=4, flavor="gb200", domain=domain))
    return nodes


def held(free_per_node: list[int]) -> list[dict[str, object]]:
    """Running pods holding what is not free on each gb200 node."""
    return [
        workload(f"run-{domain}-{i}", gpus=4 - free, flavor="gb200",
                 on=[(f"{domain}-n{i}", list(range(4 - free)))])
        for domain in ("d1", "d2")
        for i, free in enumerate(free_per_node)
        if free < 4
    ]  # fmt: skip


def test_a_waiting_domain_gang_is_told_the_most_free_in_one_domain_by_the_plan() -> None:
    """Each domain has 4 GPUs free, one a node: 8 free in all. Gangs of 3 pods of 2 GPUs fit
    nowhere (the second, the same gang, takes the cycle's cached answer); a 2 x 4-GPU gang on
    a pool with two whole nodes free in different domains would fit only across them."""
    team = queue("team-a", flavor="gb200", deserved=64, capability=64)
    result = run_case(
        Case(
            "scattered",
            gb200_pool([1, 1, 1, 1]),
            [team],
            [
                *held([1, 1, 1, 1]),
                workload("frag-a", gpus=2, count=3, flavor="gb200", topology="domain"),
                workload("frag-b", gpus=2, count=3, flavor="gb200", topology="domain"),
            ],
            want_reasons={"frag-a": "fragmentation", "frag-b": "fragmentation"},
        )
    )
    for name in ("frag-a", "frag-b"):
        detail = next(p.detail for p in result.pending if p.workload == name)
        assert detail == (
            "At most 4 gb200 GPUs are free in one NVLink domain (8 in all), but no set of "
            "nodes holds the gang: at most 0 of its 3 pods fit (minimum 3)."
        )
    result = run_case(
        Case(
            "one whole node free in each domain",
            gb200_pool([4, 2, 0, 0]),
            [team],
            [
                *held([4, 2, 0, 0]),
                workload("across", gpus=4, count=2, flavor="gb200", topology="domain"),
            ],
            want_reasons={"across": "topology"},
        )
    )
    assert result.pending[0].detail == (
        "No single NVLink domain holds its 2 pods (at most 6 gb200 GPUs are free in one); it "
        "would fit across domains, but it requires one."
    )
