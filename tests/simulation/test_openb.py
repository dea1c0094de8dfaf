"""The openb loaders and the inflation protocol: on the synthetic sample, on hand-made tasks,
and on the published files where they are found (counts from the trace's README)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from simulation_builders import node, task

from gpupool.simulation.datasets import OPENB, MissingTraceData
from gpupool.simulation.placement.openb import (
    PAPER_TRACES,
    OpenbNode,
    available_traces,
    gpu_capacity_milli,
    inflate,
    load_nodes,
    load_tasks,
)


def test_the_node_lists_load_models_gpus_and_cpu_only_nodes(
    sample_openb_nodes: list[OpenbNode],
) -> None:
    assert len(sample_openb_nodes) == 24
    assert gpu_capacity_milli(sample_openb_nodes) == 116_000
    assert Counter((n.model, n.gpus) for n in sample_openb_nodes)[("G2", 8)] == 8
    every = load_nodes(OPENB.directory() / "openb_node_list_all_node.csv")
    assert len(every) == 30
    assert all(n.model == "" for n in every if n.gpus == 0)
    assert sum(1 for n in every if n.gpus == 0) == 6


@pytest.mark.usefixtures("sample_data")
def test_a_pod_list_loads_gpu_shares_and_model_restrictions() -> None:
    """CPU-only tasks ask no GPU milli; ``gpu_spec`` is a set of models, empty for any."""
    tasks = load_tasks("gpuspec33")
    assert all(t.gpu_milli == 0 for t in tasks if t.num_gpu == 0)
    assert all(t.gpu_milli == 1000 for t in tasks if t.num_gpu > 1)
    assert any(0 < t.gpu_milli < 1000 for t in tasks)
    assert frozenset({"V100M16", "V100M32"}) in {t.gpu_spec for t in tasks}
    assert all(not t.gpu_spec for t in tasks if t.num_gpu == 0)


@pytest.mark.usefixtures("sample_data")
def test_a_pod_list_without_the_gpu_spec_column_allows_any_model() -> None:
    """The multigpu files have five columns only."""
    tasks = load_tasks("multigpu50")
    assert tasks and all(not t.gpu_spec for t in tasks)
    assert available_traces() == ["default", "gpuspec33", "multigpu50"]


def test_an_unknown_trace_is_refused_naming_its_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("GPUPOOL_DATA_DIR", str(tmp_path))
    with pytest.raises(MissingTraceData, match=r"openb_pod_list_nope\.csv not found"):
        load_tasks("nope")


def test_inflation_appends_copies_up_to_the_target() -> None:
    """4 GPUs of capacity, 2 GPUs of tasks: copies are appended until 130% (5.2 GPUs)."""
    nodes = [node("n1"), node("n0")]
    tasks = [task("a"), task("b", milli=500), task("c", gpus=0)]
    inflated = inflate(tasks, nodes, seed=7)
    requested = sum(t.total_gpu_milli for t in inflated.tasks)
    assert requested <= 5200
    assert {"a", "b", "c"} <= {t.name for t in inflated.tasks}
    assert len(inflated.tasks) > 3
    assert sorted(inflated.node_rank) == [0, 1]


def test_inflation_removes_tasks_above_the_target() -> None:
    """More demand than 130%: random tasks are removed until it is met."""
    nodes = [node("n0", gpus=1)]
    tasks = [task(f"t{i}") for i in range(5)]
    inflated = inflate(tasks, nodes, seed=1)
    assert sum(t.total_gpu_milli for t in inflated.tasks) == 1000


def test_inflation_is_deterministic_per_seed(sample_openb_nodes: list[OpenbNode]) -> None:
    """Same seed, same sequence and node order; another seed, another order; every trace
    task comes first, once, then copies up to 130% of capacity."""
    tasks = load_tasks("default")
    first, again, other = (inflate(tasks, sample_openb_nodes, s) for s in (42, 42, 43))
    assert first == again
    assert first.tasks != other.tasks
    assert first.node_rank != other.node_rank
    capacity = gpu_capacity_milli(sample_openb_nodes)
    requested = sum(t.total_gpu_milli for t in first.tasks)
    assert 1.29 * capacity < requested <= 1.3 * capacity + 8000
    assert Counter(t.name for t in first.tasks[: len(tasks)]) == Counter(t.name for t in tasks)


def test_the_published_gpu_nodes_match_their_readme(full_openb_nodes: list[OpenbNode]) -> None:
    """1,213 GPU nodes, 6,212 GPUs, 107,018 CPU cores; G2x8 is the largest group (549); the
    full list adds 310 CPU-only nodes."""
    assert len(full_openb_nodes) == 1213
    assert sum(n.gpus for n in full_openb_nodes) == 6212
    assert sum(n.cpu_milli for n in full_openb_nodes) == 107_018_000
    assert Counter((n.model, n.gpus) for n in full_openb_nodes)[("G2", 8)] == 549
    assert gpu_capacity_milli(full_openb_nodes) == 6_212_000
    every = load_nodes(OPENB.directory() / "openb_node_list_all_node.csv")
    assert len(every) == 1523
    assert sum(1 for n in every if n.gpus == 0) == 310


@pytest.mark.usefixtures("full_openb_nodes")
def test_the_published_default_trace_matches_its_readme() -> None:
    """8,152 tasks: 1,088 CPU-only, 6,989 one-GPU (3,078 sharing), 16 x2, 15 x4, 44 x8."""
    tasks = load_tasks("default")
    assert len(tasks) == 8152
    assert Counter(t.num_gpu for t in tasks) == {0: 1088, 1: 6989, 2: 16, 4: 15, 8: 44}
    assert sum(1 for t in tasks if t.num_gpu == 1 and t.gpu_milli < 1000) == 3078
    assert Counter(t.gpu_milli for t in tasks if t.num_gpu == 1).most_common(2)[1] == (810, 1078)


@pytest.mark.usefixtures("full_openb_nodes")
@pytest.mark.parametrize(
    ("trace", "cpu_only"),
    [("cpu0", 0), ("cpu050", 375), ("cpu250", 2356), ("cpu300", 3030)],
)
def test_the_published_cpu_variants_vary_only_cpu_tasks(trace: str, cpu_only: int) -> None:
    """The cpuNNN traces keep the 7,064 GPU tasks and change the CPU-only count."""
    tasks = load_tasks(trace)
    assert sum(1 for t in tasks if t.num_gpu == 0) == cpu_only
    assert sum(1 for t in tasks if t.num_gpu > 0) == 7064


@pytest.mark.usefixtures("full_openb_nodes")
def test_the_published_trace_has_every_paper_trace_and_model_restrictions() -> None:
    assert any(t.gpu_spec for t in load_tasks("gpuspec33"))
    assert all(not t.gpu_spec for t in load_tasks("multigpu50"))
    assert set(PAPER_TRACES) <= set(available_traces())
