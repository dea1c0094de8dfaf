"""Node-level fragmentation measure, checked against hand-computed nodes."""

import pytest

from gpupool.scheduler.fragmentation import (
    NodeState,
    PodShape,
    ShapeDistribution,
    fits,
    node_fragmentation,
    pick_gpus,
    placement_cost,
    take,
)


def node(*free: int, cpu: int = 64_000, mem: int = 512_000) -> NodeState:
    """A node with the given free milli-GPU per GPU index."""
    return NodeState(tuple(free), cpu, mem)


HALF = PodShape(gpus=1, milli=500)
WHOLE = PodShape(gpus=1)
TWO = PodShape(gpus=2)


def test_fraction_fits_on_partly_used_gpu() -> None:
    """A 500-milli pod fits on a GPU with 600 free; a whole-GPU pod does not."""
    n = node(600, 0)
    assert fits(n, HALF)
    assert not fits(n, WHOLE)


def test_pick_gpus_best_fit_for_fraction_and_lowest_for_whole() -> None:
    """A fraction takes the tightest GPU; whole GPUs take the lowest free indices."""
    n = node(1000, 600, 1000, 550)
    assert pick_gpus(n, HALF) == (3,)
    assert pick_gpus(n, TWO) == (0, 2)
    assert pick_gpus(node(1000, 0), TWO) is None


def test_cpu_short_node_fits_nothing() -> None:
    """CPU and memory are checked before GPUs."""
    assert not fits(node(1000, cpu=0), PodShape(gpus=1, cpu_milli=1))


def test_take_refuses_over_commit() -> None:
    """Placing on a GPU without enough free milli is an error naming the field."""
    with pytest.raises(ValueError, match="gpus"):
        take(node(400), HALF, (0,))
    assert take(node(1000, 1000), HALF, (1,)) == node(1000, 500)


def test_fragmentation_hand_computed() -> None:
    """Free (1000, 300) against 50% whole-GPU and 50% half-GPU pods.

    Whole-GPU pods can use GPU 0 only: 300 milli is fragmented. Half-GPU pods can use GPU 0
    but not GPU 1 (300 < 500): 300 again. Expected fragmentation = 0.5*300 + 0.5*300 = 300.
    A two-GPU pod cannot fit at all: for it every free milli (1300) is fragmented.
    """
    dist = ShapeDistribution.from_counts({WHOLE: 1, HALF: 1})
    assert node_fragmentation(node(1000, 300), dist) == pytest.approx(300)
    dist2 = ShapeDistribution.from_counts({TWO: 3})
    assert node_fragmentation(node(1000, 300), dist2) == pytest.approx(1300)


def test_placement_cost_prefers_the_partly_used_gpu() -> None:
    """A half-GPU pod costs less on a node whose GPU is already half used."""
    dist = ShapeDistribution.from_counts({WHOLE: 1, HALF: 1})
    fresh = node(1000, 1000)
    used = node(1000, 500)
    cost_fresh = placement_cost(fresh, HALF, dist)
    cost_used = placement_cost(used, HALF, dist)
    assert cost_fresh is not None and cost_used is not None
    assert cost_used < cost_fresh
    assert placement_cost(node(0, 0), HALF, dist) is None
