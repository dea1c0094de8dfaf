"""The packing bound: the LP on hand-computed pods, and the ledger on a hand-checked replay."""

from __future__ import annotations

import pytest
from simulation_builders import node, task

from gpupool.simulation.placement.openb import InflatedTrace, gpu_capacity_milli
from gpupool.simulation.placement.packing import (
    RunOutLedger,
    SharingLedger,
    min_gpus_lp,
    packing_bound,
)
from gpupool.simulation.placement.replay import replay_placements


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
def test_the_lp_bound_matches_hand_computed_packings(pods: dict[int, int], gpus: float) -> None:
    assert min_gpus_lp(pods) == pytest.approx(gpus)


@pytest.mark.parametrize("size", [0, 1000, 1500])
def test_sizes_that_are_not_sharing_pods_are_refused(size: int) -> None:
    with pytest.raises(ValueError, match="sharing pod sizes"):
        min_gpus_lp({size: 1, 500: 1})


def test_the_packing_bound_of_a_hand_checked_replay() -> None:
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
    inflated = InflatedTrace(tasks=tuple(tasks), node_rank=(0, 1), seed=0)
    ledger = SharingLedger()
    result = replay_placements(nodes, tasks, inflated, "bestfit", on_place=ledger)

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


def test_the_run_out_ledger_of_a_hand_checked_replay() -> None:
    """Best fit on two 2-GPU nodes: a takes n0's GPU 0, the 700 the tighter n0's GPU 1, e
    n1's GPU 0; the 2-GPU gang g finds one fresh GPU and is dropped; the 810 takes the last
    fresh GPU (n1's GPU 1) -- fresh GPUs are gone at 5,510 of 4,000 milli arrived; the 200
    joins the 700; after that i and the gang j are dropped, and j does not count.

    Had g been placed, the last two fresh GPUs (n1's) would have gone to it: they end with
    0 and 190 milli idle, so placing g could save 190 at most.
    """
    nodes = [node("n0"), node("n1")]
    tasks = [
        task("a"),
        task("d", milli=700),
        task("e"),
        task("g", gpus=2),
        task("f", milli=810),
        task("h", milli=200),
        task("i"),
        task("j", gpus=2),
    ]
    inflated = InflatedTrace(tasks=tuple(tasks), node_rank=(0, 1), seed=0)
    ledger = RunOutLedger(inflated.tasks, total_gpus=4)
    result = replay_placements(
        nodes, tasks, inflated, "bestfit", on_task=ledger.task, on_place=ledger.place
    )

    assert result.dropped == 3
    assert list(ledger.used) == [(0, 0), (0, 1), (1, 0), (1, 1)]  # in the order first taken
    assert ledger.used == {(0, 0): 1000, (0, 1): 900, (1, 0): 1000, (1, 1): 810}
    assert ledger.run_out_load == pytest.approx(5510 / 4000)
    assert ledger.gangs_dropped_gpus == 2
    assert ledger.last_fresh_idle_milli(2) == 190
    assert ledger.last_fresh_idle_milli(0) == 0
    assert ledger.last_fresh_idle_milli(5) == 290  # more than were taken: all four


def test_fresh_gpus_that_never_run_out_leave_no_run_out_load() -> None:
    nodes = [node("n0")]
    tasks = [task("a", milli=500), task("g", gpus=3), task("b", milli=300)]
    inflated = InflatedTrace(tasks=tuple(tasks), node_rank=(0,), seed=0)
    ledger = RunOutLedger(inflated.tasks, total_gpus=2)
    replay_placements(nodes, tasks, inflated, "bestfit", on_task=ledger.task, on_place=ledger.place)

    assert ledger.run_out_load is None
    assert ledger.gangs_dropped_gpus == 3
    assert list(ledger.used) == [(0, 0)]  # best fit stacks the 300 on the 500
    assert ledger.last_fresh_idle_milli(3) == 200  # only one GPU was ever taken
