"""The pool's fragmentation figure weighs a node's fragments over the GPU shapes that node could
ever hold (``fragmentation.fitting_node_fragmentation``).

Reported from the Kubernetes demo: an idle ``gb200`` flavor (18 nodes of 4 GPUs, nothing
running) read "72 fragmented". The cause: a whole-GPU pod from Kubernetes lists every
exclusive flavor as a choice (``control.sync``), so pending 8-GPU pods bound for ``h100`` put
their shape in gb200's distribution too, and FGD's measure counts every free GPU of a node as
fragmented for a shape the node cannot hold (class Q2) -- for ever, however idle. The paper's
measure itself (``node_fragmentation``, placement, the B2 replays) is unchanged.
"""

from __future__ import annotations

import pytest
from scheduler_builders import node, queue, scenario, workload

from gpupool.inventory.queries import flavor_fragmentation, fragmentation_sample
from gpupool.scheduler.cycle import run_cycle
from gpupool.scheduler.fragmentation import (
    NodeState,
    PodShape,
    ShapeDistribution,
    empty_node,
    fitting_node_fragmentation,
    gpu_shapes_that_fit,
    node_fragmentation,
)
from gpupool.scheduler.scenario import scenario_from_dict
from gpupool.scheduler.types import MILLI

CPU = 144_000
MEMORY = 960 * 1024
GB200 = empty_node(4, CPU, MEMORY)  # a GB200 node with nothing on it


def demo_pool_with_an_idle_rack() -> dict[str, object]:
    """Two full h100 nodes, an idle NVL72 rack of 18 gb200 nodes of 4 GPUs, and two 8-GPU
    pods that may use h100 or gb200 (as the Kubernetes sync lists a whole-GPU pod's flavors)."""
    rack = [
        node(f"gb200-{i:02d}", gpus=4, flavor="gb200", domain="nvl72", cpu=144, memory_gb=960)
        for i in range(18)
    ]
    team = queue("team-a", deserved=16, capability=200)
    team["quota"]["gb200"] = {"guarantee": 0, "deserved": 72, "capability": 72}
    return scenario(
        [node("h100-0"), node("h100-1"), *rack],
        [team],
        [
            workload("run-0", gpus=8, on=[("h100-0", list(range(8)))]),
            workload("run-1", gpus=8, on=[("h100-1", list(range(8)))]),
            workload("train", gpus=8, count=2, flavor=["h100", "gb200"]),
        ],
    )


def test_an_idle_flavor_is_not_fragmented_by_shapes_its_nodes_can_never_hold() -> None:
    loaded = scenario_from_dict(demo_pool_with_an_idle_rack())
    cycle = run_cycle(loaded.snapshot, loaded.policy, loaded.now)
    dist = cycle.placer.distributions["gb200"]
    assert [shape.gpus for shape, _ in dist.shapes] == [8]  # the h100 pods' shape
    rack = [name for name, info in cycle.cluster.nodes.items() if info.flavor == "gb200"]
    states = [cycle.cluster.state[name] for name in rack]
    assert sum(state.free_milli for state in states) == 72 * MILLI  # idle
    # The report, reproduced: the paper's measure over the flavor's distribution.
    assert sum(node_fragmentation(state, dist) for state in states) == 72 * MILLI
    assert sum(fitting_node_fragmentation(state, GB200, dist) for state in states) == 0


def test_shapes_a_node_cannot_hold_are_left_out_and_the_rest_renormalised() -> None:
    """A 4-GPU node with GPUs free 1000, 500, 0, 0; pods of 1 GPU (25%), 2 GPUs (25%) and
    8 GPUs (50%). One GPU pod: the half GPU is its fragment (500). Two: Q2, all 1500. Eight:
    never fits a 4-GPU node, left out; the two others weigh half each."""
    dist = ShapeDistribution.from_counts({PodShape(1): 1, PodShape(2): 1, PodShape(8): 2})
    state = NodeState((1000, 500, 0, 0), CPU, MEMORY)
    assert node_fragmentation(state, dist) == pytest.approx(0.25 * 500 + 0.25 * 1500 + 0.5 * 1500)
    assert fitting_node_fragmentation(state, GB200, dist) == pytest.approx(0.5 * 500 + 0.5 * 1500)


@pytest.mark.parametrize(
    ("shape", "kept"),
    [
        (PodShape(4), True),
        (PodShape(1, milli=250), True),
        (PodShape(5), False),  # more GPUs than the node has
        (PodShape(1, cpu_milli=CPU + 1), False),  # more CPU than the node has
        (PodShape(1, memory_mib=MEMORY + 1), False),  # more memory than the node has
        (PodShape(0, cpu_milli=1000), False),  # asks no GPU: no GPU is any use to it
    ],
    ids=lambda value: repr(value) if isinstance(value, PodShape) else str(value),
)
def test_the_work_that_could_run_on_a_node_is_what_fits_it_empty(
    shape: PodShape, kept: bool
) -> None:
    dist = ShapeDistribution.from_counts({shape: 1, PodShape(2): 3})
    fitting = gpu_shapes_that_fit(dist, GB200)
    assert dict(fitting.shapes) == ({shape: 0.25, PodShape(2): 0.75} if kept else {PodShape(2): 1})


def test_a_node_no_shape_could_run_on_has_no_fragmented_gpus() -> None:
    dist = ShapeDistribution.from_counts({PodShape(8): 3, PodShape(0, cpu_milli=500): 1})
    half_used = NodeState((1000, 1000, 0, 0), CPU, MEMORY)
    assert gpu_shapes_that_fit(dist, GB200).shapes == ()
    assert fitting_node_fragmentation(half_used, GB200, dist) == 0
    assert node_fragmentation(half_used, dist) == 2 * MILLI  # the paper's counts them all


def test_the_pool_figures_read_no_fragmented_gpus_on_an_idle_flavor() -> None:
    """What the Fragmentation page and the trend show (``inventory.queries``), on the cycle's
    cluster and distributions, as the control loop samples them."""
    loaded = scenario_from_dict(demo_pool_with_an_idle_rack())
    cycle = run_cycle(loaded.snapshot, loaded.policy, loaded.now)
    sample = fragmentation_sample(cycle.cluster, cycle.placer.distributions)
    assert sample["gb200"] == {"free": 72.0, "fragmented": 0.0, "largest_gang": 72}
    (figures,) = [
        f
        for f in flavor_fragmentation(cycle.cluster, cycle.placer.distributions)
        if f.flavor == "gb200"
    ]
    assert (figures.free_gpus, figures.fragmented_gpus) == (72.0, 0.0)
