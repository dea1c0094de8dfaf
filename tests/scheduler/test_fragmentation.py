"""Node-level fragmentation measure, checked against hand-computed nodes."""

import pytest

from gpupool.scheduler.fragmentation import (
    FragmentKind,
    NodeState,
    PodShape,
    ShapeDistribution,
    best_placement,
    classify,
    cpu_stranded_milli,
    fits,
    node_fragmentation,
    pick_gpus,
    placement_cost,
    shape_fragment,
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


# --- FGD's classes (the reference simulator's GetNodePodFrag), by hand -----------------------

V100 = frozenset({"V100M16", "V100M32"})


CLASS_CASES = [
    ("fits: satisfied", (1000, 300), 8000, PodShape(1, 500, cpu_milli=4000), "Q3_SATISFIED"),
    ("GPUs enough, CPU short", (1000,), 2000, PodShape(1, 500, cpu_milli=4000), "Q4_LACK_CPU"),
    ("CPU enough, GPUs short", (300, 300), 8000, PodShape(1, 500), "Q2_LACK_GPU"),
    ("both short", (300,), 0, PodShape(1, 500, cpu_milli=1), "Q1_LACK_BOTH"),
    ("two GPUs asked, one whole free", (1000, 999), 8000, PodShape(2), "Q2_LACK_GPU"),
    ("CPU-only shape that fits", (1000,), 8000, PodShape(0, cpu_milli=4000), "XL_SATISFIED"),
    ("CPU-only shape that does not", (1000,), 0, PodShape(0, cpu_milli=4000), "XR_LACK_CPU"),
    ("other GPU model", (1000,), 8000, PodShape(1, gpu_models=V100), "NO_ACCESS"),
]


@pytest.mark.parametrize(
    ("case", "free", "cpu", "shape", "want"), CLASS_CASES, ids=[c[0] for c in CLASS_CASES]
)
def test_classify_by_hand(
    case: str, free: tuple[int, ...], cpu: int, shape: PodShape, want: str
) -> None:
    """Each FGD class on a node built for it."""
    state = NodeState(free, cpu, 512_000, "T4")
    assert classify(state, shape) is FragmentKind[want], case


def test_shape_fragment_by_class() -> None:
    """Only the satisfied class leaves part of the free GPU usable; every other class, none.

    Node T4 with free (1000, 600, 200) = 1800 milli and 8 cores free:
    - 500-milli pods (fit): GPU 2 (200 < 500) is the fragment -> 200;
    - whole-GPU pods (fit): GPUs 1 and 2 are partly used -> 800;
    - pods that need 16 cores (Q4), CPU-only pods (XL) and V100-only pods: all 1800.
    """
    state = NodeState((1000, 600, 200), 8000, 64_000, "T4")
    assert shape_fragment(state, PodShape(1, 500)) == 200
    assert shape_fragment(state, PodShape(1)) == 800
    assert shape_fragment(state, PodShape(1, 500, cpu_milli=16_000)) == 1800
    assert shape_fragment(state, PodShape(0, cpu_milli=1000)) == 1800
    assert shape_fragment(state, PodShape(1, gpu_models=V100)) == 1800


def test_node_fragmentation_weights_classes() -> None:
    """Weighted sum: 0.5 x 200 (half pods) + 0.25 x 800 (whole) + 0.25 x 1800 (CPU-only)."""
    state = NodeState((1000, 600, 200), 8000, 64_000, "T4")
    dist = ShapeDistribution.from_counts({HALF: 2, WHOLE: 1, PodShape(0, cpu_milli=1000): 1})
    assert node_fragmentation(state, dist) == pytest.approx(0.5 * 200 + 0.25 * 800 + 0.25 * 1800)


def test_gpu_model_restriction() -> None:
    """A pod restricted to V100s fits a V100 node and not a T4 node; CPU-only pods ignore it."""
    pod = PodShape(1, 500, gpu_models=V100)
    assert fits(NodeState((1000,), 8000, 64_000, "V100M32"), pod)
    assert not fits(NodeState((1000,), 8000, 64_000, "T4"), pod)
    assert (
        placement_cost(NodeState((1000,), 8000, 64_000, "T4"), pod, ShapeDistribution(())) is None
    )
    with pytest.raises(ValueError, match="gpu_models"):
        take(NodeState((1000,), 8000, 64_000, "T4"), pod, (0,))


def test_sharing_pod_takes_its_cheapest_gpu() -> None:
    """With a distribution, a 300-milli pod avoids breaking the GPU that 700-milli pods need.

    Free (1000, 700, 300): 700-milli pods can use GPUs 0 and 1. Putting the pod on GPU 2
    (300 -> 0) removes a fragment; on GPU 1 (700 -> 400) it would create one. Best fit picks
    GPU 2 as well; the point is that the cost, not the index, decides.
    """
    dist = ShapeDistribution.from_counts({PodShape(1, 700): 1})
    state = NodeState((1000, 700, 300), 8000, 64_000)
    small = PodShape(1, 300)
    best = best_placement(state, small, dist)
    assert best is not None
    assert best[0] == (2,)
    assert pick_gpus(state, small, dist) == (2,)
    assert best[1] == pytest.approx(-300)
    assert placement_cost(state, small, dist) == pytest.approx(-300)


def test_typical_keeps_popular_shapes_up_to_coverage() -> None:
    """Shapes by decreasing count until 95% of pods are covered, then renormalised."""
    counts = {PodShape(1): 60.0, HALF: 35.0, TWO: 4.0, PodShape(8): 1.0}
    dist = ShapeDistribution.typical(counts, 0.95)
    assert dict(dist.shapes) == pytest.approx({PodShape(1): 60 / 95, HALF: 35 / 95})
    assert ShapeDistribution.typical({}, 0.95).shapes == ()
    with pytest.raises(ValueError, match="coverage"):
        ShapeDistribution.typical(counts, 0)


def test_cpu_stranded_milli_by_hand() -> None:
    """The workload asks 12 cores per GPU (12 milli-cores per milli-GPU).

    A node with 4 free GPUs and 24 free cores can feed only 2 GPUs: 2000 milli stranded.
    A CPU-only pod taking 12 more cores strands another GPU, which `placement_cost` charges;
    on a node with plenty of CPU the same pod strands nothing.
    """
    dist = ShapeDistribution.from_counts({PodShape(1, cpu_milli=12_000): 3, PodShape(0): 1})
    tight = NodeState((1000,) * 4, 24_000, 512_000)
    roomy = NodeState((1000,) * 4, 96_000, 512_000)
    cpu_pod = PodShape(0, cpu_milli=12_000)
    assert cpu_stranded_milli(tight, dist) == pytest.approx(2000)
    assert cpu_stranded_milli(roomy, dist) == 0
    tight_cost = placement_cost(tight, cpu_pod, dist)
    roomy_cost = placement_cost(roomy, cpu_pod, dist)
    assert tight_cost is not None and roomy_cost is not None
    assert roomy_cost == pytest.approx(0)
    assert tight_cost > roomy_cost
