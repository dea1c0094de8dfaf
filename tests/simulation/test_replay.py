"""Placement replay: bookkeeping on a hand-checked trace, determinism, the vectorised choice
against the scalar one, and ``simulate openb`` on the synthetic sample."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from django.core.management import call_command
from simulation_builders import node, task

from gpupool.scheduler.fragmentation import placement_cost
from gpupool.simulation.placement.array_cluster import ArrayCluster, FragmentationTable, task_shape
from gpupool.simulation.placement.openb import InflatedTrace, OpenbNode, inflate, load_tasks
from gpupool.simulation.placement.policies import PLACEMENT_POLICIES, GpupoolPolicy, RandomPolicy
from gpupool.simulation.placement.replay import replay_placements, typical_shapes

NODES = [node("n0", gpus=2), node("n1", gpus=1)]
TASKS = [task("a"), task("b", milli=500), task("c", gpus=2), task("d", milli=500)]


def test_a_replay_records_arrived_allocated_and_fragmented_milli_per_task() -> None:
    """Best fit on 3 GPUs: a -> n1, b -> n0 GPU 0, c (2 GPUs) dropped, d -> n0 GPU 0.

    Arrived 1000, 1500, 3500, 4000 milli; allocated 1000, 1500, 1500, 2000. At the end n0 has
    (0, 1000) free: the 2-GPU shape (1/4 of the typical pods) cannot use its whole GPU, the
    others can -> 250 fragmented milli of 1000 idle.
    """
    inflated = InflatedTrace(tasks=tuple(TASKS), node_rank=(0, 1), seed=0)
    result = replay_placements(NODES, TASKS, inflated, "bestfit")
    assert result.arrived_milli.tolist() == [1000, 1500, 3500, 4000]
    assert result.allocated_milli.tolist() == [1000, 1500, 1500, 2000]
    assert (result.placed, result.dropped) == (3, 1)
    assert result.fragmented_milli[-1] == pytest.approx(250)
    curve = result.allocation_curve()
    assert curve[33] == pytest.approx(33.33)
    assert curve[34] == pytest.approx(33.33)  # no task at 34%: mean of 33..35%
    assert curve[50] == curve[117] == pytest.approx(50.0)
    assert 130 not in curve  # nothing arrived within 129..131%
    assert result.curve(result.allocated_milli.astype(float), 133, 133) == {133: 2000.0}


def test_the_same_seed_gives_the_same_run() -> None:
    """A seeded run is reproducible, including the random policy."""
    tasks = [task(f"t{i}", milli=m) for i, m in enumerate((300, 700, 1000, 450, 550, 1000))]
    inflated = inflate(tasks, NODES, seed=5)
    first = replay_placements(NODES, tasks, inflated, "random")
    again = replay_placements(NODES, tasks, inflated, "random")
    assert np.array_equal(first.allocated_milli, again.allocated_milli)
    assert np.array_equal(first.fragmented_milli, again.fragmented_milli)


def test_random_puts_a_sharing_pod_on_any_gpu_that_fits() -> None:
    """The paper's Random draws the GPU too (`-gpusel random`): with GPUs at 1000, 300, 1000
    and 150 milli free, a 200-milli pod lands on each of the three that fit, never on the
    150 -- best fit would always take the 300. Whole-GPU pods still take free GPUs."""
    cluster = ArrayCluster([node("n0", gpus=4)])
    cluster.place(0, task_shape(task("a", milli=700)), (1,))
    cluster.place(0, task_shape(task("b", milli=850)), (3,))
    policy = RandomPolicy(cluster, np.zeros(1, dtype=np.int64), seed=3)
    sharing = task_shape(task("s", milli=200))
    chosen = {policy.choose(sharing, cluster.feasible(sharing)) for _ in range(200)}
    assert chosen == {(0, (0,)), (0, (1,)), (0, (2,))}
    whole = task_shape(task("w", gpus=2))
    assert policy.choose(whole, cluster.feasible(whole)) == (0, (0, 2))


@pytest.mark.parametrize("policy", PLACEMENT_POLICIES)
def test_the_first_tasks_of_a_light_load_all_fit_with_every_policy(
    sample_openb_nodes: list[OpenbNode], policy: str
) -> None:
    """The first 60 tasks of the sample's default trace (seed 42) all fit."""
    tasks = load_tasks("default")
    inflated = inflate(tasks, sample_openb_nodes, 42)
    result = replay_placements(sample_openb_nodes, tasks, inflated, policy, limit=60)
    assert result.placed == 60
    assert np.array_equal(result.allocated_milli, result.arrived_milli)
    assert np.all(np.diff(result.arrived_milli) >= 0)


def test_gpupool_picks_the_node_of_lowest_scalar_placement_cost(
    sample_openb_nodes: list[OpenbNode],
) -> None:
    """For 60 tasks, the vectorised gpupool choice is the node of lowest `placement_cost`
    (ties to the tie-break rank), computed node by node with the scalar API."""
    tasks = load_tasks("default")
    inflated = inflate(tasks, sample_openb_nodes, 42)
    cluster = ArrayCluster(sample_openb_nodes)
    dist = typical_shapes(tasks)
    rank = np.array(inflated.node_rank)
    policy = GpupoolPolicy(cluster, rank, FragmentationTable(cluster, dist))
    for item in inflated.tasks[:60]:
        shape = task_shape(item)
        feasible = cluster.feasible(shape)
        choice = policy.choose(shape, feasible)
        assert choice is not None
        costs = {}
        for i in feasible.tolist():
            cost = placement_cost(cluster.state(i), shape, dist)
            assert cost is not None
            costs[i] = cost
        best = min(costs.values())
        want = min((i for i, c in costs.items() if c == best), key=lambda i: rank[i])
        assert choice[0] == want
        cluster.place(choice[0], shape, choice[1])
        policy.table.refresh(choice[0])


def simulate_openb_json(*args: str) -> dict[str, Any]:
    """What ``simulate openb ... --json`` prints, parsed."""
    out = io.StringIO()
    call_command("gpupool", "simulate", "openb", *args, "--json", stdout=out)
    document: dict[str, Any] = json.loads(out.getvalue())
    return document


def paper_mean(sample: Path, policy: str, column: str) -> float:
    """The mean over seeds of one column of the sample's paper results, as a fraction."""
    path = sample / "openb" / "fgd_expected_results" / "analysis_allo_discrete.csv"
    with path.open(newline="") as handle:
        values = [float(r[column]) for r in csv.DictReader(handle) if r["sc_policy"] == policy]
    return sum(values) / len(values) / 100


def test_simulate_openb_prints_the_b2_layout_beside_the_papers_means(sample_data: Path) -> None:
    """The whole run reaches 130% arrived load; the paper's seed means come with it."""
    document = simulate_openb_json("--policy", "bestfit", "--policy", "fgd")
    assert (document["trace"], document["seed"]) == ("default", 42)
    assert set(document["policies"]) == {"bestfit", "fgd"}
    for entry in document["policies"].values():
        assert 0 < entry["allocation_ratio"]["1.0"] <= entry["allocation_ratio"]["1.3"] <= 1
        assert 0 <= entry["fragmentation_rate"]["1.0"] <= 1
    paper = document["paper"]
    assert set(paper) == {"random", "bestfit", "fgd"}
    want = paper_mean(sample_data, "06-FGD", "130")
    assert paper["fgd"]["allocation_ratio"]["1.3"] == pytest.approx(want, abs=1e-5)


@pytest.mark.usefixtures("sample_data")
def test_a_short_run_has_no_figure_at_loads_it_never_reached() -> None:
    document = simulate_openb_json("--policy", "fgd", "--limit", "20")
    assert document["policies"]["fgd"]["allocation_ratio"] == {"1.0": None, "1.3": None}


@pytest.mark.usefixtures("full_openb_nodes")
def test_simulate_openb_gives_the_papers_fgd_mean_on_the_published_trace() -> None:
    document = simulate_openb_json("--policy", "fgd", "--limit", "200")
    assert document["paper"]["fgd"]["allocation_ratio"]["1.3"] == pytest.approx(0.95391, abs=1e-4)


@pytest.mark.usefixtures("sample_data")
def test_simulate_openb_refuses_an_unknown_trace_naming_it() -> None:
    err = io.StringIO()
    with pytest.raises(SystemExit) as exit_info:
        call_command("gpupool", "simulate", "openb", "--trace", "nope", "--json", stderr=err)
    assert exit_info.value.code == 2
    assert "unknown trace(s) nope" in err.getvalue()
