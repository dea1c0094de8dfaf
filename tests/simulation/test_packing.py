"""The packing bound: the LP on hand-computed pods, and the ledger on a hand-checked replay."""

from __future__ import annotations

import pytest
from simulation_builders import node, task

from gpupool.simulation.openb import Workload, gpu_capacity_milli
from gpupool.simulation.packing import SharingLedger, min_gpus_lp, packing_bound
from gpupool.simulation.replay import replay


@pytest.mark.parametrize(
    ("pods", "gpus"),
    [
        ({}, 0.0),
        ({600: 2, 400: 2}, 2.0),  # two perfect pairs
        ({700: 3}, 3.0),  # nothing shares
        ({500: 3}, 1.5),  # the LP may split a GPU: 1.5, where whole GPUs need 2
        ({300: 7}, 7 / 3),  # three to a GPU
        # every two fit together, never all three: the LP pairs them at half a GPU each
        # (1.5), while whole GPUs need 2 -- the LP is a lower bound, never above the truth
        ({650: 1, 350: 1, 340: 1}, 1.5),
        ({810: 4, 160: 1, 470: 2}, 5.0),  # an 810 with the 160, three 810s alone, 470 + 470
    ],
)
def test_lp_bound_on_hand_computed_pods(pods: dict[int, int], gpus: float) -> None:
    assert min_gpus_lp(pods) == pytest.approx(gpus)


@pytest.mark.parametrize("size", [0, 1000, 1500])
def test_sizes_that_are_not_sharing_pods_are_refused(size: int) -> None:
    with pytest.raises(ValueError, match="sharing pod sizes"):
        min_gpus_lp({size: 1, 500: 1})


def test_ledger_and_bound_on_a_hand_checked_replay() -> None:
    """Best fit: the whole-GPU task takes n1 (the smaller node), 300 and 300 stack on n0's
    GPU 0, 700 takes GPU 1, the second 700 fits nowhere; the CPU-only task holds no GPU.

    Shared GPUs: (300, 300) and (700), 700 milli idle. The best packing of 300, 300, 700 is
    (700, 300) plus a third of (300, 300, 300) = 4/3 GPUs by the LP, 33.3 milli idle; the
    666.7 milli it frees, filled, would lift 2,300 of 3,000 milli to 2,966.7 (98.89%).
    """
    nodes = [node("n0", gpus=2), node("n1", gpus=1)]
    tasks = [
        task("f"),
        task("a", milli=300),
        task("b", milli=300),
        task("c", milli=700),
        task("d", milli=700),
        task("e", gpus=0),
    ]
    workload = Workload(tasks=tuple(tasks), node_rank=(0, 1), seed=0)
    ledger = SharingLedger()
    result = replay(nodes, tasks, workload, "bestfit", on_place=ledger)

    assert result.dropped == 1
    assert dict(ledger.by_gpu) == {(0, 0): [300, 300], (0, 1): [700]}
    assert ledger.other_milli == 1000
    bound = packing_bound(ledger, gpu_capacity_milli(nodes))
    assert bound.allocated_milli == result.allocated_milli[-1] == 2300
    assert bound.sharing_gpus == 2
    assert bound.sharing_idle_milli == 700
    assert bound.best_gpus == pytest.approx(4 / 3)
    assert bound.best_idle_milli == pytest.approx(100 / 3)
    assert bound.upper_pct == pytest.approx(100 * (2300 + 700 - 100 / 3) / 3000)
    assert bound.allocation_pct == pytest.approx(100 * 2300 / 3000)
