"""The vectorised node scoring equals the scalar `gpupool.scheduler.fragmentation` functions."""

from __future__ import annotations

import random

import numpy as np
import pytest
from simulation_builders import node

from gpupool.scheduler.fragmentation import (
    PodShape,
    ShapeDistribution,
    fits,
    fragmentation_gradient,
    node_fragmentation,
    pick_gpus,
    placement_cost,
)
from gpupool.simulation.placement.array_cluster import ArrayCluster, FragmentationTable
from gpupool.simulation.placement.policies import FGDPolicy, GpupoolPolicy, fgd_score

MODELS = ("T4", "G2", "V100M32")
SHAPES = [
    PodShape(0, cpu_milli=8000),
    PodShape(1, 810, cpu_milli=3152),
    PodShape(1, 470, cpu_milli=11_908, memory_mib=30_000),
    PodShape(1, 250, cpu_milli=4000, gpu_models=frozenset({"T4"})),
    PodShape(1, cpu_milli=11_300),
    PodShape(2, cpu_milli=16_000),
    PodShape(4, cpu_milli=32_000, gpu_models=frozenset({"G2", "V100M32"})),
    PodShape(8, cpu_milli=64_000),
]


def random_cluster(rng: random.Random, size: int = 60) -> ArrayCluster:
    """Nodes of 1-8 GPUs in random partly used states."""
    nodes = [
        node(
            f"n{i:03d}",
            gpus=rng.choice((1, 2, 4, 8)),
            cpu=rng.choice((16_000, 96_000)),
            model=rng.choice(MODELS),
        )
        for i in range(size)
    ]
    cluster = ArrayCluster(nodes)
    for i, spec in enumerate(nodes):
        for gpu in range(spec.gpus):
            cluster.gpu_free[i, gpu] = rng.choice((0, 100, 190, 470, 530, 810, 1000, 1000))
        cluster.cpu_free[i] = rng.randrange(0, spec.cpu_milli + 1, 500)
        cluster.memory_free[i] = rng.randrange(0, spec.memory_mib + 1, 1024)
        row = cluster.gpu_free[i]
        cluster.free_total[i] = row.sum()
        cluster.whole_free[i] = (row >= 1000).sum()
        cluster.max_free[i] = row.max()
    return cluster


@pytest.fixture(params=[1, 2, 3])
def cluster(request: pytest.FixtureRequest) -> ArrayCluster:
    """A random cluster per seed."""
    return random_cluster(random.Random(request.param))


DIST = ShapeDistribution.from_counts(dict(zip(SHAPES, (5, 30, 20, 5, 25, 5, 5, 5), strict=True)))


def test_the_vectorised_node_fragmentation_matches_the_scalar_one(cluster: ArrayCluster) -> None:
    """Every node's vectorised fragmentation equals `node_fragmentation`."""
    table = FragmentationTable(cluster, DIST)
    for i in range(cluster.size):
        assert table.frag[i] == pytest.approx(node_fragmentation(cluster.state(i), DIST), abs=1e-6)
    assert table.total == pytest.approx(sum(table.frag), abs=1e-6)


@pytest.mark.parametrize("pod", SHAPES, ids=lambda s: f"{s.gpus}x{s.milli}")
def test_the_vectorised_gpupool_cost_matches_placement_cost(
    cluster: ArrayCluster, pod: PodShape
) -> None:
    """The vectorised gpupool cost of each feasible node equals `placement_cost`; others None."""
    policy = GpupoolPolicy(cluster, np.arange(cluster.size), FragmentationTable(cluster, DIST))
    feasible = cluster.feasible(pod)
    costs = policy.costs(pod, feasible)
    expected = {i: placement_cost(cluster.state(i), pod, DIST) for i in range(cluster.size)}
    assert {i for i, cost in expected.items() if cost is not None} == set(feasible.tolist())
    for i, cost in zip(feasible.tolist(), costs.tolist(), strict=True):
        assert cost == pytest.approx(expected[i], abs=1e-6)


@pytest.mark.parametrize("pod", SHAPES, ids=lambda s: f"{s.gpus}x{s.milli}")
def test_the_vectorised_fgd_choice_matches_its_scalar_scores(
    cluster: ArrayCluster, pod: PodShape
) -> None:
    """FGD picks a node with the best integer score computed node by node, then its rank."""
    table = FragmentationTable(cluster, DIST)
    rank = np.array(random.Random(9).sample(range(cluster.size), cluster.size))
    policy = FGDPolicy(cluster, rank, table)
    feasible = cluster.feasible(pod)
    if not len(feasible):
        # A shape this random cluster cannot hold: the replay drops it without asking the
        # policy, so what remains to check is that no node fits it node by node either.
        assert not any(fits(cluster.state(i), pod) for i in range(cluster.size))
        return
    scores = {}
    for i in feasible.tolist():
        state = cluster.state(i)
        if pod.is_fraction:
            choices = [(g,) for g, free in enumerate(state.gpu_free_milli) if free >= pod.milli]
        else:
            choices = [pick_gpus(state, pod) or ()]
        delta = min(fragmentation_gradient(state, pod, gpus, DIST) for gpus in choices)
        scores[i] = int(fgd_score(np.array([delta]))[0])
    best = max(scores.values())
    want = min((i for i, s in scores.items() if s == best), key=lambda i: rank[i])
    choice = policy.choose(pod, feasible)
    assert choice is not None
    assert choice[0] == want


def test_the_fragmentation_table_follows_placements(cluster: ArrayCluster) -> None:
    """After placing pods, refreshed rows still equal the scalar measure."""
    table = FragmentationTable(cluster, DIST)
    policy = GpupoolPolicy(cluster, np.arange(cluster.size), table)
    for pod in SHAPES * 3:
        feasible = cluster.feasible(pod)
        if not len(feasible):
            continue
        choice = policy.choose(pod, feasible)
        assert choice is not None
        cluster.place(choice[0], pod, choice[1])
        table.refresh(choice[0])
    for i in range(cluster.size):
        assert table.frag[i] == pytest.approx(node_fragmentation(cluster.state(i), DIST), abs=1e-6)
    assert table.total == pytest.approx(float(table.frag.sum()), abs=1e-3)
