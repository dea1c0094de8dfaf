"""The gangs ``flavor_fragmentation`` counts are those of ``GANG_SIZES`` the flavor's largest
NVLink domain could ever hold: its healthy GPUs (a MIG flavor's: MIG instances), its cordoned
nodes' and other schedulers' GPUs included, as the core judges a gang bound to one domain
"never fits" (``CycleState.larger_than_any_domain``). A larger gang is not listed as one
that fits none now."""

from __future__ import annotations

from gpupool.inventory.queries import GANG_SIZES, flavor_fragmentation
from gpupool.scheduler.statement import ClusterState
from gpupool.scheduler.types import NodeInfo

CPU, MEMORY = 128_000, 1_048_576


def test_gang_sizes_stop_at_the_largest_domain_of_each_flavor() -> None:
    nodes = (
        # MIG: two nodes of 16 instances, each its own domain; m1 has a broken card (2 of 16)
        NodeInfo("m1", "mig", 16, CPU, MEMORY, "m1", frozenset({10, 11}), physical_gpus=8),
        NodeInfo("m2", "mig", 16, CPU, MEMORY, "m2", cordoned=True, physical_gpus=8),
        # h100: 8-GPU nodes, each its own domain
        *(NodeInfo(f"h{i}", "h100", 8, CPU, MEMORY, f"h{i}") for i in range(3)),
        # gb200: one NVL72 rack of 18 nodes of 4 GPUs, one of them another scheduler's
        *(
            NodeInfo(f"g{i}", "gb200", 4, CPU, MEMORY, "nvl72", foreign_gpus=frozenset({0}))
            for i in range(18)
        ),
    )
    figures = {f.flavor: f for f in flavor_fragmentation(ClusterState(nodes), {})}
    sizes = {name: [gang.gpus for gang in f.gangs] for name, f in figures.items()}
    largest = {name: f.largest_domain_gpus for name, f in figures.items()}
    # the cordoned m2 takes no pods now, but holds a gang of 16 once its cordon ends
    assert (largest["mig"], sizes["mig"]) == (16, [1, 2, 4, 8, 16])
    assert (largest["h100"], sizes["h100"]) == (8, [1, 2, 4, 8])
    assert (largest["gb200"], sizes["gb200"]) == (72, list(GANG_SIZES))
    assert figures["gb200"].gangs[-1].gangs == 0  # 18 of its 72 GPUs are another scheduler's
