"""Builders for hand-made nodes and tasks in the simulation tests, and where the samples are."""

from __future__ import annotations

from pathlib import Path

from gpupool.simulation.placement.openb import OpenbNode, OpenbTask

SAMPLE_DIR = Path(__file__).resolve().parents[1] / "data"  # tests/data: the synthetic traces


def task(
    name: str, gpus: int = 1, milli: int = 1000, cpu: int = 1000, memory: int = 1024, spec: str = ""
) -> OpenbTask:
    """A trace task for hand-built tests."""
    return OpenbTask(
        name=name,
        cpu_milli=cpu,
        memory_mib=memory,
        num_gpu=gpus,
        gpu_milli=milli if gpus else 0,
        gpu_spec=frozenset(s for s in spec.split("|") if s),
    )


def node(
    name: str, gpus: int = 2, cpu: int = 16_000, memory: int = 65_536, model: str = "T4"
) -> OpenbNode:
    """A cluster node for hand-built tests."""
    return OpenbNode(name=name, cpu_milli=cpu, memory_mib=memory, gpus=gpus, model=model)
