"""Node-level fragmentation measure, checked against hand-computed nodes."""

import pytest

from gpupool.scheduler.fragmentation import (
    REMAINDER_WEIGHT,
    FragmentKind,
    NodeState,
    PodShape,
    ShapeDistribution,
    best_placement,
    classify,
    cpu_stranded_milli,
    filler_supply,
    fits,
    node_fragmentation,
    pick_gpus,
    placement_cost,
    remainder_waste,
    remainder_waste_table,
    shape_fragment,
    take,
    workload_cpu_per_gpu_milli,
)


def node(*free: int, cpu: int = 64_000, mem: int = 512_000) -> NodeState:
    """A node with the given free milli-GPU per GPU index."""
    return NodeState(tuple(free), cpu, mem)


HALF = PodShape(gpus=1, milli=500)
WHOLE = PodShape(gpus=1)
TWO = PodShape(gpus=2)


def test_a_fraction_fits_on_a_partly_used_gpu() -> None:
    """A 500-milli pod fits on a GPU with 600 free; a whole-GPU pod does not."""
    n = node(600, 0)
    assert fits(n, HALF)
    assert not fits(n, WHOLE)


def test_a_fraction_takes_the_tightest_gpu_and_whole_gpus_the_lowest() -> None:
    """A fraction takes the tightest GPU; whole GPUs take the lowest free indices."""
    n = node(1000, 600, 1000, 550)
    assert pick_gpus(n, HALF) == (3,)
    assert pick_gpus(n, TWO) == (0, 2)
    assert pick_gpus(node(1000, 0), TWO) is None


def test_a_node_short_of_cpu_fits_nothing() -> None:
    """CPU and memory are checked before GPUs."""
    assert not fits(node(1000, cpu=0), PodShape(gpus=1, cpu_milli=1))


def test_taking_more_than_a_gpu_has_free_is_refused() -> None:
    """Placing on a GPU without enough free milli is an error naming the field."""
    with pytest.raises(ValueError, match="gpus"):
        take(node(400), HALF, (0,))
    assert take(node(1000, 1000), HALF, (1,)) == node(1000, 500)


def test_node_fragmentation_matches_a_hand_computation() -> None:
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
def test_each_node_and_shape_falls_in_the_class_built_for_it(
    case: str, free: tuple[int, ...], cpu: int, shape: PodShape, want: str
) -> None:
    """Each FGD class on a node built for it."""
    state = NodeState(free, cpu, 512_000, "T4")
    assert classify(state, shape) is FragmentKind[want], case


def test_only_the_satisfied_class_leaves_free_gpu_usable() -> None:
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


def test_node_fragmentation_weights_each_shape_by_its_popularity() -> None:
    """Weighted sum: 0.5 x 200 (half pods) + 0.25 x 800 (whole) + 0.25 x 1800 (CPU-only)."""
    state = NodeState((1000, 600, 200), 8000, 64_000, "T4")
    dist = ShapeDistribution.from_counts({HALF: 2, WHOLE: 1, PodShape(0, cpu_milli=1000): 1})
    assert node_fragmentation(state, dist) == pytest.approx(0.5 * 200 + 0.25 * 800 + 0.25 * 1800)


def test_a_pod_restricted_to_a_gpu_model_fits_only_that_model() -> None:
    """A pod restricted to V100s fits a V100 node and not a T4 node; CPU-only pods ignore it."""
    pod = PodShape(1, 500, gpu_models=V100)
    assert fits(NodeState((1000,), 8000, 64_000, "V100M32"), pod)
    assert not fits(NodeState((1000,), 8000, 64_000, "T4"), pod)
    assert (
        placement_cost(NodeState((1000,), 8000, 64_000, "T4"), pod, ShapeDistribution(())) is None
    )
    with pytest.raises(ValueError, match="gpu_models"):
        take(NodeState((1000,), 8000, 64_000, "T4"), pod, (0,))


def test_a_sharing_pod_takes_its_cheapest_gpu() -> None:
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
    # Fragmentation -300; the remainder term: only 700-milli pods arrive, so a GPU with 300
    # free stays at 300 and one with 0 at 0: REMAINDER_WEIGHT x (0 - 300).
    expected = -300 + REMAINDER_WEIGHT * -300
    assert best[1] == pytest.approx(expected)
    assert placement_cost(state, small, dist) == pytest.approx(expected)


def test_the_typical_shapes_are_the_popular_ones_up_to_the_coverage() -> None:
    """Shapes by decreasing count until 95% of pods are covered, then renormalised."""
    counts = {PodShape(1): 60.0, HALF: 35.0, TWO: 4.0, PodShape(8): 1.0}
    dist = ShapeDistribution.typical(counts, 0.95)
    assert dict(dist.shapes) == pytest.approx({PodShape(1): 60 / 95, HALF: 35 / 95})
    assert ShapeDistribution.typical({}, 0.95).shapes == ()
    with pytest.raises(ValueError, match="coverage"):
        ShapeDistribution.typical(counts, 0)


def test_gpu_stranded_by_short_cpu_matches_a_hand_count() -> None:
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


# Single-GPU shapes 300 (weight 1), 500 (weight 1) and a whole GPU (weight 2); the 2-GPU and
# the CPU-only shapes do not land on one GPU's remainder.
REMAINDER_DIST = ShapeDistribution.from_counts(
    {PodShape(1, 300): 1, PodShape(1, 500): 1, PodShape(1): 2, TWO: 1, PodShape(0): 1}
)


def test_the_remainder_waste_matches_a_hand_computation() -> None:
    """Expected idle milli of one GPU as 300-, 500- and 1000-milli pods keep arriving.

    Below 300 nothing fits: r stays. 300..499: only 300 fits, r - 300 stays (300 -> 0,
    450 -> 150). 500: 300 or 500 equally: (W(200) + W(0)) / 2 = 100; 600: (W(300) + W(100))
    / 2 = 50; 700: (W(400) + W(200)) / 2 = 150; 800: (W(500) + W(300)) / 2 = 50. 1000: 300,
    500, 1000 weighted 1:1:2: (W(700) + W(500) + 2 W(0)) / 4 = (150 + 100) / 4 = 62.5.
    """
    expected = {0: 0, 1: 1, 299: 299, 300: 0, 450: 150, 500: 100, 600: 50, 700: 150, 800: 50}
    for free, waste in expected.items():
        assert remainder_waste(free, REMAINDER_DIST) == pytest.approx(waste)
    assert remainder_waste(1000, REMAINDER_DIST) == pytest.approx(62.5)
    assert len(remainder_waste_table(REMAINDER_DIST)) == 1001
    assert remainder_waste(700, ShapeDistribution(())) == 700  # nothing ever arrives


def test_remainder_term_decides_the_gpu() -> None:
    """Free (1000, 500), a 500-milli pod, shapes 300 and 500 (no CPU asked: no stranding).

    Either GPU leaves no fragment for 300 or 500 (growth 0), so FGD alone would take GPU 0.
    The remainder term: GPU 1 goes 500 -> 0, REMAINDER_WEIGHT x (0 - 100); GPU 0 goes
    1000 -> 500, with W(1000) = (W(700) + W(500)) / 2 = 125 here: REMAINDER_WEIGHT x
    (100 - 125). GPU 1 wins.
    """
    dist = ShapeDistribution.from_counts({PodShape(1, 300): 1, PodShape(1, 500): 1})
    state = node(1000, 500)
    best = best_placement(state, HALF, dist)
    assert best is not None
    assert best == ((1,), pytest.approx(REMAINDER_WEIGHT * -100))
    assert placement_cost(state, HALF, dist) == pytest.approx(REMAINDER_WEIGHT * -100)


def test_scarce_fillers_are_not_counted_on() -> None:
    """A small size that is the only fit beside a common large one is left out of the table.

    Whole GPUs (weight 50), 810 (weight 20), 160 (weight 1): the random filling places a 160
    beside nearly every 810, twenty times as often as 160s arrive, so the 190 milli an 810
    leaves stays idle in the table; with 160s as common as 810s it would be filled.
    """
    scarce = ShapeDistribution.from_counts(
        {PodShape(1): 50, PodShape(1, 810): 20, PodShape(1, 160): 1}
    )
    supply = filler_supply(scarce)
    assert supply[160] < 0.1 * max(supply.values())
    assert remainder_waste(190, scarce) == 190
    assert remainder_waste(1000, scarce) == pytest.approx(20 / 70 * 190)
    common = ShapeDistribution.from_counts(
        {PodShape(1): 50, PodShape(1, 810): 20, PodShape(1, 160): 20}
    )
    assert remainder_waste(190, common) == 30


def test_gpu_stranded_with_cpu_only_pods_counted_matches_a_hand_count() -> None:
    """GPU pods ask 8 cores per GPU; CPU-only pods, as many of them, 8 more: 16 per GPU.

    Free 4 GPUs and 48 cores: at 8 per GPU all 4 are fed (0 stranded); counting the CPU-only
    pods, 48 cores feed 3 GPUs: 1000 stranded. A 1-GPU pod with 8 cores leaves 3 GPUs and 40
    cores (2.5 GPUs fed): 500 stranded, so the term lowers its cost by 0.1 x 500 = 50 against
    an equally fragmented node with CPU to spare (free 4 GPUs, 96 cores: nothing stranded).
    """
    gpu_pod = PodShape(1, cpu_milli=8000)
    dist = ShapeDistribution.from_counts({gpu_pod: 1, PodShape(0, cpu_milli=8000): 1})
    assert workload_cpu_per_gpu_milli(dist) == pytest.approx(16)
    tight = NodeState((1000,) * 4, 48_000, 512_000)
    roomy = NodeState((1000,) * 4, 96_000, 512_000)
    assert cpu_stranded_milli(tight, dist) == 0
    assert cpu_stranded_milli(tight, dist, with_cpu_only=True) == pytest.approx(1000)
    assert cpu_stranded_milli(roomy, dist, with_cpu_only=True) == 0
    tight_cost = placement_cost(tight, gpu_pod, dist)
    roomy_cost = placement_cost(roomy, gpu_pod, dist)
    assert tight_cost is not None and roomy_cost is not None
    assert tight_cost - roomy_cost == pytest.approx(-50)
